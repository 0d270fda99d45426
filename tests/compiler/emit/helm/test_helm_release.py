"""A release of the chart fits the Secret in which Helm stores it, up to 5,000 nodes, BATCH
or REALTIME.

The release grows linearly with the nodes (a row of values and the rendered objects per
node), so the test measures it at two sizes the suite can afford and extrapolates the line
to 5,000 nodes; ``bench/helm_release.py`` measures 5,000 itself (ADR 87). Under 200 bytes a
node either way (ADR 194): a REALTIME flow took 325 while one node's schema differed from
the others' (a finite producer's Job name) and the schema then wrote every node's out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helm_release import SECRET_LIMIT, release_secret_bytes, write_layered
from vf.pipeline import CompileRequest, compile_project
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

SMALL, LARGE, TARGET = 100, 400, 5000


def _release_bytes(
    tmp_path: Path, helm: str, *, nodes: int, prod_image: str, kind: str = "BATCH"
) -> int:
    folder = tmp_path / f"{kind}-n{nodes}"
    graph = write_layered(folder, nodes=nodes, prod_image=prod_image, kind=kind)
    result = compile_project(CompileRequest(graph=str(graph)))
    out = folder / "deploy"
    write_tree(out, result.tree)
    chart = out / "chart"
    return release_secret_bytes(
        helm, chart=chart, values=chart / "values-prod.yaml", namespace="layered"
    )


@pytest.mark.parametrize(
    ("kind", "prod_image"),
    [("BATCH", "bench"), ("BATCH", "bench-2"), ("REALTIME", "bench-2")],  # one generation, or two
)
def test_a_5000_node_release_fits_helms_release_secret(
    tmp_path: Path, helm: str, kind: str, prod_image: str
) -> None:
    small = _release_bytes(tmp_path, helm, nodes=SMALL, prod_image=prod_image, kind=kind)
    large = _release_bytes(tmp_path, helm, nodes=LARGE, prod_image=prod_image, kind=kind)
    per_node = (large - small) / (LARGE - SMALL)
    print(f"{kind}, prod image {prod_image}: {per_node:.0f} bytes per node")
    at_target = large + per_node * (TARGET - LARGE)
    assert per_node < 200, f"{per_node:.0f} bytes per node"
    assert at_target < SECRET_LIMIT, f"{at_target:.0f} bytes at {TARGET} nodes"


def test_the_chart_has_a_template_per_shape_not_per_object(tmp_path: Path) -> None:
    """A chart of 200 nodes has the templates of one of 20: as many as it has shapes."""
    counts: list[int] = []
    for nodes in (20, 200):
        graph = write_layered(tmp_path / f"n{nodes}", nodes=nodes)
        tree = compile_project(CompileRequest(graph=str(graph))).tree
        counts.append(sum(p.startswith("chart/templates/") for p in tree))
    assert counts[0] == counts[1] < 25, counts
