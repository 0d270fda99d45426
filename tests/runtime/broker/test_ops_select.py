"""One selection for every operator command: an empty or malformed selector is refused
before any broker is touched, and ``vf dlq ls``, ``show``, ``replay``, ``purge`` and
``vf teardown`` select the same records for the same options (real nats-server)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from tests.runtime.opshelp import Servers, fresh_servers, vf, with_js
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import RunTopology, provision
from vf_runtime.broker.topology import NodeTopology

NOWHERE = "nats://127.0.0.1:1"
SELECTORS = {
    ("dlq", "ls"): ("--flow", "--run", "--generation", "--node", "--code"),
    ("dlq", "show"): ("--run", "--generation", "--node", "--code"),
    ("dlq", "replay"): ("--flow", "--run", "--generation", "--node", "--code"),
    ("dlq", "purge"): ("--flow", "--run", "--generation", "--node", "--code"),
    ("dlq", "export"): ("--flow", "--run", "--generation", "--node", "--code"),
    ("runs",): ("--flow",),
    ("teardown",): ("--flow", "--run", "--generation"),
}
BASE = {"--flow": "f", "--run": "r1", "--generation": "g1", "--node": "a", "--code": "VF_X"}


def _argv(command: tuple[str, ...], option: str, value: str) -> list[str]:
    argv = [*command, *(["f:1"] if command[-1] == "show" else [])]
    for name in SELECTORS[command]:
        if name == option or name in ("--flow", "--run"):
            argv += [name, value if name == option else BASE[name]]
    return argv + ["--yes"] * (command[-1] in ("replay", "purge", "teardown"))


CASES = [
    (command, option, value, code)
    for command, options in SELECTORS.items()
    for option in options
    for value, code in (("", "VF_SELECTOR_EMPTY"), ("  ", "VF_SELECTOR_EMPTY"), ("r*", "MAL"))
]


@pytest.mark.parametrize(
    ("command", "option", "value", "code"),
    CASES,
    ids=[f"{' '.join(c)} {o}={v!r}" for c, o, v, _ in CASES],
)
def test_an_empty_or_malformed_selector_is_refused_before_the_broker(
    command: tuple[str, ...], option: str, value: str, code: str
) -> None:
    done = vf(*_argv(command, option, value), nats_url=NOWHERE)
    want = "VF_SELECTOR_MALFORMED" if code == "MAL" else code
    assert done.code == 2, (done.out, done.err)
    assert f"error[{want}]" in done.err and option in done.err, done.err


def test_a_blank_flow_in_a_dead_letter_id_is_refused() -> None:
    for command in (("dlq", "show"), ("debug", "decode", "--dlq")):
        done = vf(*command, " :3", nats_url=NOWHERE)
        assert done.code == 2 and "error[VF_DLQ_ID]" in done.err, done.err


@dataclass(frozen=True)
class Letter:
    run: str
    generation: str
    node: str
    code: str


RUNS = (("r1", "g1"), ("r1", "g2"), ("r2", "g1"))
LETTERS = [
    Letter(run, gen, node, code)
    for (run, gen), node, code in itertools.product(RUNS, ("a", "b"), ("VF_X", "VF_Y"))
]
NODES = tuple(
    NodeTopology(
        name=name,
        parents=parents,
        replicas=1,
        partitioned=False,
        has_children=name == "a",
        max_deliver=1,
    )
    for name, parents in (("a", ()), ("b", ("a",)))
)
OPTION_SETS: list[dict[str, str]] = [
    {},
    {"run": "r1"},
    {"run": "r2"},
    {"run": "r1", "generation": "g2"},
    {"generation": "g1"},
    {"node": "b"},
    {"code": "VF_Y"},
    {"run": "r1", "node": "a", "code": "VF_X"},
    {"run": "nope"},
]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    yield from fresh_servers(tmp_path_factory.mktemp("ops-select"))


def _seed(url: str) -> dict[str, Letter]:
    """Three runs of flow ``sel`` on the broker, and their dead letters by id."""

    async def body(js: JetStreamContext) -> dict[str, Letter]:
        for run, gen in RUNS:
            topology = RunTopology(
                flow_id="sel", run_id=run, flow_type="batch", nodes=NODES, generation=gen
            )
            await provision(js, topology)
        ids = {}
        for letter in LETTERS:
            names = RunNames("sel", letter.run, letter.generation)
            headers = {
                "VF-Origin-Node": letter.node,
                "VF-Run-Id": letter.run,
                "VF-Generation": letter.generation,
                "VF-Code": letter.code,
                "VF-Error": "refused",
            }
            ack = await js.publish(names.dlq_subject(letter.node), b"", headers=headers)
            ids[f"sel:{ack.seq}"] = letter
        return ids

    return with_js(url, body)


def _options(chosen: dict[str, str]) -> list[str]:
    return [arg for key, value in chosen.items() for arg in (f"--{key}", value)]


def _expected(ids: dict[str, Letter], chosen: dict[str, str]) -> list[str]:
    return [
        i for i, letter in ids.items() if all(getattr(letter, k) == v for k, v in chosen.items())
    ]


def test_every_command_selects_the_same_records_for_the_same_options(
    servers: Servers, tmp_path: Path
) -> None:
    url = servers.nats.url
    ids = _seed(url)
    for chosen in OPTION_SETS:
        options, expected = _options(chosen), _expected(ids, chosen)
        listed = vf("dlq", "ls", "--flow", "sel", *options, "--format", "json", nats_url=url)
        replay = vf(
            "dlq",
            "replay",
            "--flow",
            "sel",
            *options,
            "--dry-run",
            "--format",
            "json",
            nats_url=url,
        )
        purge = vf("dlq", "purge", "--flow", "sel", *options, "--format", "json", nats_url=url)
        export = vf("dlq", "export", "--flow", "sel", *options, nats_url=url)
        shown = {
            i: vf("dlq", "show", i, *options, "--format", "json", nats_url=url).code for i in ids
        }
        print(f"[select] {chosen}: {len(expected)} record(s)")
        assert [r["id"] for r in listed.json()["dead_letters"]] == expected, chosen
        assert [r["id"] for r in replay.json()["records"]] == expected, chosen
        assert purge.json()["selected"] == expected, chosen
        assert [json.loads(line)["id"] for line in export.out.splitlines()] == expected, chosen
        assert {i for i, code in shown.items() if code == 0} == set(expected), chosen
        assert {code for i, code in shown.items() if i not in expected} <= {2}, chosen
        if "run" in chosen and not {"node", "code"} & set(chosen):
            torn = vf("teardown", "--flow", "sel", *options, "--format", "json", nats_url=url)
            runs = {(r["run"], r["generation"]) for r in torn.json()["runs"]}
            assert runs == {(ids[i].run, ids[i].generation) for i in expected}, chosen
    unset = vf("dlq", "purge", "--flow", "sel", "--run", "", "--yes", nats_url=url)
    assert unset.code == 2 and "error[VF_SELECTOR_EMPTY]" in unset.err
    narrow = {"run": "r1", "node": "a", "code": "VF_X"}
    done = vf("dlq", "purge", "--flow", "sel", *_options(narrow), "--yes", nats_url=url)
    left = vf("dlq", "ls", "--flow", "sel", "--format", "json", nats_url=url)
    assert done.code == 0, done.err
    kept = [r["id"] for r in left.json()["dead_letters"]]
    print(f"[select] purged {narrow}: {len(ids)} -> {len(kept)} record(s)")
    assert kept == [i for i in ids if i not in _expected(ids, narrow)]
