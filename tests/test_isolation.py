"""The worker runtime imports nothing of the compiler or its dependencies."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKED = ("vf", "jinja2", "ruamel", "jsonschema", "click")


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
