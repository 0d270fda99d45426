"""Measure the Helm release of the chart of a synthetic layered BATCH graph (1,000 and 5,000
nodes, the compile benchmark's shape; prod with dev's generation, and with one of its own
from another image): the bytes of the Secret in which Helm stores the
release (``base64(gzip(json(release)))``, computed as Helm's ``secret`` driver does, see
``tests/helm_release.py``) against the API server's 1 MiB, and the chart's files and bytes.

Results go to ``bench/results/helm-release.json``.

Usage: ``python bench/helm_release.py [--sizes 1000,5000] [--no-save]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helm_release import SECRET_LIMIT, release_secret_bytes, write_layered  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "helm-release.json"
HELM = ROOT / ".tools" / "bin" / "helm"
VF = ROOT / ".venv" / "bin" / "vf"


def measure(nodes: int, work: Path, *, prod_image: str) -> dict[str, Any]:
    graph = write_layered(work / f"n{nodes}-{prod_image}", nodes=nodes, prod_image=prod_image)
    out = graph.parent / "deploy"
    subprocess.run(
        [str(VF), "compile", str(graph), "--out", str(out)],
        check=True,
        cwd=graph.parent,
        stdout=subprocess.DEVNULL,
    )
    chart = out / "chart"
    files = [p for p in chart.rglob("*") if p.is_file()]
    size = release_secret_bytes(
        str(HELM), chart=chart, values=chart / "values-prod.yaml", namespace="layered"
    )
    return {
        "nodes": nodes,
        "generations": 1 if prod_image == "bench" else 2,
        "release_secret_bytes": size,
        "fits": size < SECRET_LIMIT,
        "chart_files": len(files),
        "chart_bytes": sum(p.stat().st_size for p in files),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            measure(int(n), Path(tmp), prod_image=image)
            for n in args.sizes.split(",")
            for image in ("bench", "bench-2")  # prod shares dev's generation, or has its own
        ]
    report = {"limit_bytes": SECRET_LIMIT, "sizes": rows}
    text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    print(text, end="")
    if not args.no_save:
        RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
