"""The servers a tree deploys are the servers the tests run: one pin each
(vf.config.servers) for the broker and store images, the shipped kustomize components, the
``[local]`` extra of pyproject.toml and the binaries installed from it."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.support import require
from vf.config.infra import BrokerTarget, StoreTarget
from vf.config.servers import LOCAL_EXTRA, NATS_IMAGE, NATS_VERSION, STORE_IMAGE, VALKEY_VERSION
from vf_runtime.local.infra import MissingTool, nats_server_binary, redis_server_binary

REPO = Path(__file__).resolve().parent.parent
COMPONENTS = REPO / "kustomize" / "components"


def test_the_local_extra_installs_the_pinned_releases() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert tuple(project["project"]["optional-dependencies"]["local"]) == LOCAL_EXTRA


def test_the_tree_deploys_the_pinned_images() -> None:
    assert BrokerTarget().image == NATS_IMAGE and StoreTarget().image == STORE_IMAGE
    assert NATS_IMAGE.split(":")[1].startswith(NATS_VERSION + "-")
    assert STORE_IMAGE.split(":")[1].startswith(VALKEY_VERSION + "-")
    shipped = {
        (path.parent.name, image)
        for path in sorted(COMPONENTS.rglob("*.yaml"))
        for image in re.findall(r"^\s+image: (\S+)$", path.read_text(), re.MULTILINE)
    }
    parsed = json.loads((REPO / "kustomize" / "components.json").read_text())
    shipped |= {
        (name, str(container["image"]))
        for name, objects in parsed.items()
        for obj in objects
        for container in ((obj.get("spec") or {}).get("template") or {})
        .get("spec", {})
        .get("containers", [])
    }
    expected = {
        (name, NATS_IMAGE if name.startswith("nats") else STORE_IMAGE) for name, _ in shipped
    }
    assert shipped and shipped == expected


def _version(binary: str) -> str:
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


@pytest.mark.parametrize("server", ["nats", "store"])
def test_the_servers_the_tests_run_are_the_pinned_releases(server: str) -> None:
    """What ``vf run-local`` and ``vf run-tree`` start (the [local] extra's binaries, as
    they find them) is the release the tree deploys."""
    try:
        binary = nats_server_binary() if server == "nats" else redis_server_binary()
    except MissingTool as exc:
        require(False, str(exc))
        return
    version = _version(binary)
    wanted = f"v{NATS_VERSION}" if server == "nats" else f"v={VALKEY_VERSION} "
    assert wanted in version, f"{binary} is {version.strip()!r}, the tree deploys {wanted}"
