"""Load a graph module and call its factory: the only stage that runs user code."""

from __future__ import annotations

import contextlib
import importlib.util
import keyword
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TypeVar

import vf_runtime
from vf.errors import VfError
from vf_runtime import AuthoringError, Flow

DEFAULT_FACTORY = "build_flow"
FALLBACK_MODULE = "_vf_user_graph"
_OWN_DIRS = (
    str(Path(__file__).resolve().parent) + "/",
    str(Path(vf_runtime.__file__).resolve().parent) + "/",
)
T = TypeVar("T")
_LOADED_GRAPHS: set[str] = set()
_LOADED_DIRS: set[str] = set()


def split_target(target: str) -> tuple[Path, str]:
    """``path/graph.py[:factory]`` → (path, factory name)."""
    path, sep, factory = target.rpartition(":")
    if not sep or not factory.isidentifier() or not path.endswith(".py"):
        path, factory = target, DEFAULT_FACTORY
    return Path(path), factory


def load_flow(target: str) -> tuple[Flow, Path]:
    """Import the graph module named by ``target`` and return the Flow its factory builds."""
    path, factory_name = split_target(target)
    if not path.is_file() or path.suffix != ".py":
        raise VfError(
            "VF_LOAD_NOT_FOUND",
            f"graph module {str(path)!r} does not exist or is not a .py file",
            "pass the path of a Python graph module, e.g. examples/batch_pipeline/graph.py",
            str(path),
        )
    path = path.resolve()
    module = _import_module(path)
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise VfError(
            "VF_LOAD_NO_FACTORY",
            f"{path.name} has no callable {factory_name}()",
            f"define def {factory_name}() -> Flow in the module, or pass {path.name}:<factory>",
            str(path),
        )
    flow = _call_user(factory, path, "VF_LOAD_FACTORY_FAILED")
    if not isinstance(flow, Flow):
        raise VfError(
            "VF_LOAD_FACTORY_TYPE",
            f"{factory_name}() returned {type(flow).__name__}, not a Flow",
            "return Flow([...consumers], flow_type=...) without calling run()",
            str(path),
        )
    return flow, path


def _module_name(path: Path) -> str:
    """The graph's basename, unless that would shadow a module the user did not write."""
    name = path.stem
    if not name.isidentifier() or keyword.iskeyword(name) or name in sys.builtin_module_names:
        return FALLBACK_MODULE
    if name in _LOADED_GRAPHS:
        return name
    loaded = sys.modules.get(name)
    if loaded is not None:
        return name if getattr(loaded, "__file__", None) == str(path) else FALLBACK_MODULE
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    return FALLBACK_MODULE if spec is not None and spec.origin != str(path) else name


def _forget_user_modules(directory: Path) -> None:
    """Drop modules imported from graph folders so a (re)load sees only this graph's code."""
    _LOADED_DIRS.add(str(directory) + "/")
    prefixes = tuple(_LOADED_DIRS)
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.startswith(prefixes):
            del sys.modules[name]
    for stale in prefixes:
        if stale[:-1] in sys.path:
            sys.path.remove(stale[:-1])


def _import_module(path: Path) -> ModuleType:
    directory = path.parent
    _forget_user_modules(directory)
    name = _module_name(path)
    sys.path.insert(0, str(directory))
    _LOADED_GRAPHS.add(name)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise VfError("VF_LOAD_NOT_FOUND", f"cannot import {path}", "check the file", str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader = spec.loader
    _call_user(lambda: loader.exec_module(module), path, "VF_LOAD_IMPORT_FAILED")
    return module


def _call_user(action: Callable[[], T], path: Path, code: str) -> T:
    """Run user code; turn anything it raises into a VfError that shows the user's frames only."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return action()
    except VfError:
        raise
    except AuthoringError as exc:
        raise VfError(
            exc.code, str(exc), exc.remedy, _last_user_frame(exc.__traceback__, path)
        ) from None
    except SyntaxError as exc:
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else str(path)
        raise VfError(
            code, f"syntax error in the graph module: {exc.msg}", "fix the syntax", where
        ) from None
    except SystemExit as exc:
        raise VfError(
            "VF_LOAD_EXIT",
            f"the graph module called sys.exit({exc.code!r}) while loading",
            "graph modules must not exit; guard scripts with if __name__ == '__main__'",
            _last_user_frame(exc.__traceback__, path),
        ) from None
    except Exception as exc:
        frames = _user_frames(exc.__traceback__)
        raise VfError(
            code,
            f"{type(exc).__name__}: {exc}" + (f"\n{frames}" if frames else ""),
            "fix the error in your graph code shown above",
            _last_user_frame(exc.__traceback__, path),
        ) from None


def _user_summary(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    return [
        frame
        for frame in traceback.extract_tb(tb)
        if not frame.filename.startswith(_OWN_DIRS) and "<frozen" not in frame.filename
    ]


def _user_frames(tb: TracebackType | None) -> str:
    return "".join(traceback.format_list(_user_summary(tb))).rstrip()


def _last_user_frame(tb: TracebackType | None, path: Path) -> str:
    frames = _user_summary(tb)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else str(path)
