"""The worker runtime imports nothing of the compiler or its dependencies."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BLOCKED = ("vf", "jinja2", "ruamel", "jsonschema", "jsonschema_rs", "click")


def test_vf_runtime_imports_without_compiler_modules() -> None:
    script = textwrap.dedent(
        f"""
        import importlib.abc, sys

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {BLOCKED!r}:
                    raise ImportError("blocked: " + name)
                return None

        sys.meta_path.insert(0, Block())
        import vf_runtime
        from vf_runtime import Flow, Producer, Processor, Consumer, JoinPolicy, DeliveryPolicy
        import vf_runtime.wire, vf_runtime.worker.replica, vf_runtime.broker.provision
        import vf_runtime.local.supervisor, vf_runtime.local.infra, vf_runtime.store.blobstore
        import vf_runtime.worker.health, vf_runtime.broker.naming
        import vf_runtime.components
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r})
        assert not loaded, loaded
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_block_would_catch_a_compiler_import() -> None:
    script = (
        "import importlib.abc, sys\n"
        "class B(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'click': raise ImportError(name)\n"
        "sys.meta_path.insert(0, B())\n"
        "import vf.cli\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode != 0


@pytest.mark.slow
def test_compile_loads_no_broker_client(tmp_path: Path) -> None:
    """The operator commands' nats-py and redis (about 0.2 s) load only when one runs."""
    script = textwrap.dedent(
        """
        import sys
        from vf.cli import cli
        graph, out = sys.argv[1:3]
        try:
            cli.main(["compile", graph, "--out", out], prog_name="vf", standalone_mode=False)
        except SystemExit:
            pass
        heavy = {"nats", "redis", "asyncio"}
        print(sorted({m.split(".")[0] for m in sys.modules} & heavy))
        """
    )
    graph = EXAMPLES / "batch_pipeline" / "graph.py"
    argv = [sys.executable, "-c", script, str(graph), str(tmp_path / "deploy")]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[0] == "[]"
    assert (tmp_path / "deploy" / "plan" / "dev.json").is_file()


@pytest.mark.slow
def test_operator_commands_still_load_on_use() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vf", "dlq", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "dead letters" in done.stdout


@pytest.mark.slow
def test_a_worker_imports_numpy_only_for_a_tensor() -> None:
    """numpy costs a worker about 10 MiB; one that never decodes a tensor never loads it."""
    script = textwrap.dedent(
        """
        import sys
        from vf_runtime.worker.processor import _numpy_available
        from vf_runtime.wire import Tensor, decode_payload, encode_payload
        assert _numpy_available()
        decode_payload(*encode_payload({"i": 1}), arrays=True)
        print("numpy" in sys.modules)
        decode_payload(*encode_payload(Tensor(shape=(1,), dtype="uint8", data=b"x")), arrays=True)
        print("numpy" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_a_payload_store_loads_redis_on_first_use() -> None:
    """redis-py costs a worker about 5 MiB; one that never offloads a payload never loads it."""
    script = textwrap.dedent(
        """
        import sys
        import vf_runtime.worker.replica
        from vf_runtime.store.blobstore import BlobStore
        store = BlobStore.from_url("redis://127.0.0.1:1/0", ttl_seconds=5, prefix="vf:f:")
        print("redis" in sys.modules)
        store.client
        print("redis" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_a_payload_store_url_without_a_redis_scheme_is_refused_at_once() -> None:
    from vf_runtime.store.blobstore import BlobStore

    with pytest.raises(ValueError, match="redis://, rediss://, unix://"):
        BlobStore.from_url("http://cache:6379", ttl_seconds=5, prefix="vf:f:")
