"""Load a graph module and call its factory: the only stage that runs user code."""

from __future__ import annotations

import contextlib
import importlib.util
import keyword
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, TypeVar

import vf_runtime
from vf.errors import VfError
from vf.frontend.params import safe_repr
from vf.frontend.watchdog import LoadTimeout, Watchdog, load_timeout, watchdog
from vf_runtime import AuthoringError, Flow

if TYPE_CHECKING:
    import traceback

DEFAULT_FACTORY = "build_flow"
MAX_FRAMES = 12
FALLBACK_MODULE = "_vf_user_graph"
_OWN_DIRS = (
    str(Path(__file__).resolve().parents[1]) + "/",
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
    """Import the graph module named by ``target`` and return the Flow its factory builds.

    Importing and building together must finish within ``VF_LOAD_TIMEOUT_SECONDS``.
    """
    path, factory_name = split_target(target)
    if not _is_python_file(path):
        raise VfError(
            "VF_LOAD_NOT_FOUND",
            f"graph module {str(path)!r} does not exist or is not a .py file",
            "pass the path of a Python graph module, e.g. examples/batch_pipeline/graph.py",
            str(path),
        )
    path = path.resolve()
    with watchdog(load_timeout(), path) as guard, _working_directory_kept():
        flow = _build(path, factory_name, guard)
    return flow, path


@contextlib.contextmanager
def _working_directory_kept() -> Iterator[None]:
    """Undo an ``os.chdir`` in user code: every path the user gave vf (``--out``,
    ``--config``) stays relative to the directory vf was started in."""
    try:
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # no readable working directory: nothing to come back to
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.fchdir(here)
        os.close(here)


def _is_python_file(path: Path) -> bool:
    try:
        return path.suffix == ".py" and path.is_file()
    except (OSError, ValueError):  # a name too long for the filesystem, or a NUL byte
        return False


def _build(path: Path, factory_name: str, guard: Watchdog) -> Flow:
    module = _import_module(path, guard)
    factory = _call_user(lambda: getattr(module, factory_name, None), path, guard)
    if not callable(factory):
        raise VfError(
            "VF_LOAD_NO_FACTORY",
            f"{path.name} has no callable {factory_name}()",
            f"define def {factory_name}() -> Flow in the module, or pass {path.name}:<factory>",
            str(path),
        )
    flow = _call_user(factory, path, guard, code="VF_LOAD_FACTORY_FAILED")
    if not isinstance(flow, Flow):
        raise VfError(
            "VF_LOAD_FACTORY_TYPE",
            f"{factory_name}() returned {type(flow).__name__}, not a Flow",
            "return Flow([...consumers], flow_type=...) without calling run()",
            str(path),
        )
    return flow


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


def _import_module(path: Path, guard: Watchdog) -> ModuleType:
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
    _call_user(lambda: loader.exec_module(module), path, guard)
    return module


def _call_user(
    action: Callable[[], T], path: Path, guard: Watchdog, *, code: str = "VF_LOAD_IMPORT_FAILED"
) -> T:
    """Run user code; turn anything it raises into a VfError that shows the user's frames only."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = action()
    except (VfError, KeyboardInterrupt):
        raise
    except LoadTimeout as exc:
        raise guard.error(_last_user_frame(exc.__traceback__, path)) from None
    except BaseException as exc:
        guard.check(str(path))  # the user's code swallowed the watchdog's interruption
        raise _user_error(exc, path, code) from None
    guard.check(str(path))
    return result


def _user_error(exc: BaseException, path: Path, code: str) -> VfError:
    where = _last_user_frame(exc.__traceback__, path)
    if isinstance(exc, AuthoringError):
        return VfError(exc.code, safe_str(exc), exc.remedy, where)
    if isinstance(exc, SyntaxError):
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else str(path)
        return VfError(
            code, f"syntax error in the graph module: {exc.msg}", "fix the syntax", where
        )
    if isinstance(exc, SystemExit):
        return VfError(
            "VF_LOAD_EXIT",
            f"the graph module called sys.exit({safe_repr(exc.code)}) while loading",
            "graph modules must not exit; guard scripts with if __name__ == '__main__'",
            where,
        )
    frames = _user_frames(exc.__traceback__)
    return VfError(
        code,
        f"{type(exc).__name__}: {safe_str(exc)}" + (f"\n{frames}" if frames else ""),
        "fix the error in your graph code shown above",
        where,
    )


def safe_str(value: object, limit: int = 500) -> str:
    """``str`` of a user's object, shortened, and never raising."""
    try:
        text = str(value)
    except Exception:
        text = f"<{type(value).__name__} that cannot be printed>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _user_summary(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    import traceback  # only a graph that fails to load has frames to show

    return [
        frame
        for frame in traceback.extract_tb(tb)
        if not frame.filename.startswith(_OWN_DIRS) and "<frozen" not in frame.filename
    ]


def _user_frames(tb: TracebackType | None) -> str:
    """The user's frames, innermost last; a deep recursion shows only its last frames."""
    import traceback

    frames = _user_summary(tb)
    shown = traceback.format_list(frames[-MAX_FRAMES:])
    skipped = len(frames) - len(shown)
    head = [f"  ... {skipped} earlier frames\n"] if skipped > 0 else []
    return "".join(head + shown).rstrip()


def _last_user_frame(tb: TracebackType | None, path: Path) -> str:
    frames = _user_summary(tb)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else str(path)
