"""What a pipeline image is built from when its app folder has no Dockerfile of its own:
the Dockerfile ``vf init`` writes, copying the app's node modules under ``/app``."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from vf import __version__, names
from vf.errors import VfError
from vf.resources import templates, worker_pins

_SKIPPED = {"deploy", "tests"}


def _everything(app_dir: Path) -> list[tuple[str, str]]:
    files: list[tuple[str, str]] = []
    for path in sorted(app_dir.iterdir()):
        if path.name.startswith(".") or path.name in _SKIPPED:
            continue
        if path.is_file() and path.suffix == ".py":
            files.append((path.name, ""))
        elif path.is_dir() and (path / "__init__.py").is_file():
            files.append((path.name, f"{path.name}/"))
    return files


def node_files(app_dir: Path, modules: list[str] | None) -> list[tuple[str, str]]:
    """(source, folder under /app/) of each module to copy: the named modules' top-level
    files or packages, or, with none named, every top-level module and package."""
    if modules is None:
        found = _everything(app_dir)
    else:
        found = []
        for top in sorted({module.split(".")[0] for module in modules}):
            if (app_dir / top / "__init__.py").is_file():
                found.append((top, f"{top}/"))
            elif (app_dir / f"{top}.py").is_file():
                found.append((f"{top}.py", ""))
            else:
                raise VfError(
                    "VF_PIPELINE_IMAGE",
                    f"node module {top!r} is neither {top}.py nor a package {top}/ in {app_dir}",
                    "pass the folder that holds the node modules (--app), or add a Dockerfile "
                    "there that copies them under /app",
                    str(app_dir),
                )
    if not found:
        raise VfError(
            "VF_PIPELINE_IMAGE",
            f"{app_dir} holds no Python module to copy into the pipeline image",
            "pass the folder that holds the node modules, or add a Dockerfile there",
            str(app_dir),
        )
    return found


def init_dockerfile(app_dir: Path, modules: list[str] | None) -> str:
    """The Dockerfile ``vf init`` writes, for the node modules of ``app_dir``."""
    return (
        templates("init", trim=False)
        .get_template("Dockerfile.j2")
        .render(
            name=names.slug(app_dir.resolve().name),
            version=__version__,
            pins=worker_pins(),
            node_files=node_files(app_dir, modules),
        )
    )


def host_certificates() -> list[str]:
    """podman flags that lend a build the host's CA bundle where Debian's pip reads it, so a
    pipeline's own ``pip install`` trusts what the host's pip trusts."""
    candidates = [os.environ.get("PIP_CERT"), ssl.get_default_verify_paths().cafile]
    candidates.append("/etc/ssl/certs/ca-certificates.crt")
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return ["--volume", f"{candidate}:/etc/ssl/certs/ca-certificates.crt:ro"]
    return []
