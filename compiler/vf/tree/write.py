"""Write a rendered tree to disk: all or nothing, only into a directory vf owns.

The new tree is built completely in a sibling directory and swapped in with one
atomic ``renameat2(RENAME_EXCHANGE)``, so a crash leaves either the previous tree
or the new one. Files vf did not generate are carried over untouched; files it did
generate and no longer emits are pruned.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

from vf.errors import EnvironmentProblem, VfError
from vf.textio.filetext import FileText, whole
from vf.textio.safe_read import load_json
from vf.tree.owned_read import read_owned
from vf.tree.swap import (
    exchange,
    interrupts_deferred,
    libc,
    recover,
    remove_tree,
    sweep_leftovers,
    writer_lock,
)

MANIFEST = ".vf-manifest.json"
# Folders a tool reads whole, not file by file from a list vf wrote, and what reads them:
# Helm loads every file of a chart (templates/, charts/, crds/ …), and an Argo CD directory
# source applies every YAML and JSON file of manifests/<env>/ (and of shards/<env>/<nn>/,
# which Flux reads too); a file there vf did not write is applied with the flow.
GLOB_READ = {
    "chart": "Helm renders every file of chart/",
    "manifests": ("Argo CD applies every file of manifests/<env>/"),
    "shards": "Argo CD and Flux apply every file of shards/<env>/<nn>/",
}
_SURROGATE = re.compile("[\ud800-\udfff]")
_BLOCK = 256 * 1024


def manifest_text(files: list[str]) -> str:
    """The ownership marker: which files of the directory vf generated."""
    doc = {"generator": "vf", "files": sorted(files)}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def with_manifest(tree: Mapping[str, str]) -> dict[str, str]:
    full = dict(tree)
    full[MANIFEST] = manifest_text(list(tree))
    return full


def owned_files(out: Path) -> list[str] | None:
    """Files vf generated in ``out`` last time; None when vf does not own ``out``."""
    try:
        text = read_owned(out, MANIFEST)
        if text is None:
            return None
        doc = load_json(text)  # nesting bounded: a planted manifest is not vf's
        files = doc["files"]
    except VfError as error:
        if error.code == "VF_OUTPUT_NOT_UTF8":
            return None
        raise
    except (ValueError, KeyError, TypeError, OSError):
        return None
    if doc.get("generator") != "vf" or not all(isinstance(f, str) for f in files):
        return None
    return [f for f in files if _safe_relative(f)]


def _safe_relative(path: str) -> bool:
    parts = Path(path).parts
    return bool(parts) and not Path(path).is_absolute() and ".." not in parts


def check_owned(out: Path) -> list[str]:
    """The files vf owns in ``out`` (empty for a new or empty directory), else refuse."""
    if not out.exists():
        return []
    if not out.is_dir():
        raise VfError(
            "VF_OUTPUT_NOT_DIR",
            f"output path {str(out)!r} exists and is not a directory",
            "pass --out a directory path",
            str(out),
        )
    owned = owned_files(out)
    if owned is None:
        if any(out.iterdir()):
            raise VfError(
                "VF_OUTPUT_NOT_OWNED",
                f"{str(out)!r} is not empty and was not written by vf",
                "choose an empty or new directory for --out; "
                "vf never overwrites files it did not write",
                str(out),
            )
        return []
    return [*owned, MANIFEST]


def stray_files(out: Path, *, known: Iterable[str]) -> list[str]:
    """Files (and links) under the folders of ``GLOB_READ`` in ``out`` that are not in
    ``known``: vf did not write them, yet the tool reading the folder takes them in."""
    wanted = set(known)
    found: list[str] = []
    for folder in GLOB_READ:
        root = out / folder
        if root.is_symlink() or not root.is_dir():
            continue
        for here, dirs, files in os.walk(root, followlinks=False):
            base = Path(here).relative_to(out)
            links = [d for d in dirs if (Path(here) / d).is_symlink()]
            for name in [*files, *links]:
                rel = (base / name).as_posix()
                if rel not in wanted:
                    found.append(rel)
    return sorted(found)


def stray_reason(rel: str) -> str:
    """Why a stray file matters: what reads its folder whole."""
    return GLOB_READ.get(rel.split("/", 1)[0], "")


def stray_notes(strays: Iterable[str]) -> str:
    """One line per stray file, as ``--check`` and ``vf diff --raw`` print them."""
    return "".join(
        f"Only in the tree: {rel} (vf did not write it, and {stray_reason(rel)}: delete it "
        "or move it out of the tree)\n"
        for rel in strays
    )


def write_tree(out: Path, tree: Mapping[str, str]) -> None:
    """Replace vf's files in ``out`` with ``tree`` in one atomic swap."""
    with staged_tree(out) as stage:
        for rel in sorted(tree):
            stage.add(rel, tree[rel])


@contextmanager
def staged_tree(out: Path, *, only: Iterable[str] = ()) -> Iterator[StagedTree]:
    """A new tree for ``out``, filled file by file and swapped in whole when the block ends
    without an error; on any error (or a kill) the previous tree stays as it was.

    ``only``: the environments compiled (``--env``); the swap is refused when the tree
    holds another one, whose files it would delete."""
    stage = StagedTree(out, only=tuple(only))
    try:
        yield stage
        stage.commit()
    except BaseException:
        stage.discard()
        raise


@contextmanager
def _disk_errors(out: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise EnvironmentProblem(
            "VF_OUTPUT_WRITE",
            f"could not write {str(out)!r}: {exc.strerror or exc}",
            "check permissions and free space; the previous tree is unchanged",
            str(out),
        ) from None


class StagedTree:
    """The staging directory beside ``out``: created by the first file, never seen as ``out``
    until ``commit`` swaps it in with the ownership manifest and the user's own files."""

    def __init__(self, out: Path, *, only: tuple[str, ...] = ()) -> None:
        self.out = out
        self._only = only
        self.files: dict[str, None] = {}
        self._target = out.resolve()
        self._owned: set[str] = set()
        self._staging: Path | None = None
        self._folders: set[str] = set()
        self._made: list[Path] = []  # parent directories this write created
        self._lock = ExitStack()

    def add(self, rel: str, text: FileText) -> None:
        """Write one file of the new tree (a path given twice keeps the later text)."""
        if isinstance(text, str):  # one string, the common case: checked before any write
            _check_encodable(rel, text)
            blocks: Iterable[bytes] = (text.encode("utf-8"),)
        else:
            blocks = _encoded(rel, text.pieces)
        with _disk_errors(self.out):
            self._write(rel, blocks)

    def _write(self, rel: str, blocks: Iterable[bytes]) -> None:
        root = self._staging or self._open()
        folder = rel.rpartition("/")[0]
        if folder not in self._folders:
            os.makedirs(f"{root}/{folder}", exist_ok=True)
            self._folders.add(folder)
        if rel in self.files:
            os.unlink(f"{root}/{rel}")
        self.files[rel] = None
        fd = os.open(f"{root}/{rel}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            for data in blocks:
                _write_all(fd, data)
        finally:
            os.close(fd)

    def _open(self) -> Path:
        target = self._target
        self._made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
        target.parent.mkdir(parents=True, exist_ok=True)
        # Held until the swap: a second writer reads the manifest only after this one's swap.
        self._lock.enter_context(writer_lock(target.parent, target.name))
        recover(target)
        self._owned = set(check_owned(target))
        self._refuse_partial()
        sweep_leftovers(target.parent, target.name)
        staging = target.parent / f".{target.name}.vf-new-{os.getpid()}"
        staging.mkdir()
        self._staging, self._folders = staging, {""}
        return staging

    def commit(self) -> None:
        """Add the manifest, carry the user's files over, make it durable, swap it in."""
        self.add(MANIFEST, manifest_text([f for f in self.files if f != MANIFEST]))
        with self._lock, _disk_errors(self.out), interrupts_deferred():
            self._swap()

    def _refuse_partial(self) -> None:
        if not self._only:
            return
        held = sorted(
            rel[len("plan/") : -len(".json")]
            for rel in self._owned
            if rel.startswith("plan/") and rel.endswith(".json") and rel.count("/") == 1
        )
        others = [env for env in held if env not in self._only]
        if others:
            raise VfError(
                "VF_OUTPUT_PARTIAL",
                f"{str(self.out)!r} also holds environment(s) {', '.join(others)}; compiling "
                f"only {', '.join(self._only)} into it would delete their files",
                f"compile every environment (drop --env), or give {', '.join(self._only)} "
                "an --out directory of its own",
                str(self.out),
            )

    def _swap(self) -> None:
        staging, target = self._staging, self._target
        assert staging is not None  # the manifest was written
        existed = target.exists()
        if existed:
            _carry_user_files(target, staging, self._owned)
            _keep_owner_and_mode(target, staging)
        _sync_filesystem(staging)
        if existed:
            exchange(staging, target)
        else:
            os.rename(staging, target)
        _fsync_dir(target.parent)
        self._made = []
        # The previous tree now sits in the staging path; a failure to delete it is swept later.
        remove_tree(staging)

    def discard(self) -> None:
        """Remove the staging directory and any parent directory this write created."""
        with self._lock:
            if self._staging is not None:
                remove_tree(self._staging)
            for folder in self._made:
                with suppress(OSError):
                    folder.rmdir()


def _check_encodable(rel: str, text: str) -> None:
    """Refuse a file that UTF-8 cannot encode (its staging tree is discarded)."""
    if not text.isascii() and _SURROGATE.search(text):
        raise VfError(
            "VF_OUTPUT_TEXT",
            f"{rel} would hold an unpaired surrogate (an escape like \\ud800), "
            "which is not valid Unicode",
            "remove the escaped surrogate from vf.yaml or from the graph's strings",
            rel,
        )


def _encoded(rel: str, pieces: Iterable[str]) -> Iterator[bytes]:
    """UTF-8 bytes of the pieces, joined into blocks of at least 256 KiB."""
    block: list[bytes] = []
    size = 0
    for piece in pieces:
        _check_encodable(rel, piece)
        data = piece.encode("utf-8")
        block.append(data)
        size += len(data)
        if size >= _BLOCK:
            yield b"".join(block)
            block, size = [], 0
    if block:
        yield b"".join(block)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _sync_filesystem(path: Path) -> None:
    """Flush every dirty page of the filesystem holding ``path`` (``syncfs``, else ``sync``).

    One sync after the last file replaces an fsync per file: the swap that follows needs
    every byte on disk before it, not each file before the next.
    """
    syncfs = getattr(libc(), "syncfs", None)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if syncfs is None or syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _carry_user_files(out: Path, staging: Path, owned: set[str]) -> None:
    """Carry every file, link and empty folder vf does not own into the new tree."""
    for folder, dirs, files in os.walk(out):
        base = Path(folder)
        rel_base = base.relative_to(out)
        if not dirs and not files and rel_base != Path("."):
            (staging / rel_base).mkdir(parents=True, exist_ok=True)  # an empty folder of theirs
        links = [d for d in dirs if (base / d).is_symlink()]  # os.walk does not enter them
        for name in sorted([*files, *links]):
            rel = (rel_base / name).as_posix()
            target = staging / rel
            if rel in owned:
                continue
            if os.path.lexists(target):  # a file of the user's where vf now generates one
                raise VfError(
                    "VF_OUTPUT_USER_FILE",
                    f"{str(out / rel)!r} is not vf's, and vf now generates a file at that path",
                    "move or rename your file (vf never overwrites files it did not write), "
                    "then compile again; the previous tree is unchanged",
                    str(out / rel),
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            _carry(base / name, target)


def _carry(path: Path, target: Path) -> None:
    if path.is_symlink():
        os.symlink(os.readlink(path), target)
        return
    try:
        os.link(path, target, follow_symlinks=False)
    except OSError:
        import shutil

        shutil.copy2(path, target, follow_symlinks=False)


def _keep_owner_and_mode(out: Path, staging: Path) -> None:
    """The new tree's directory gets the previous one's permissions and, where allowed,
    its owner and group."""
    info = os.stat(out)
    os.chmod(staging, stat.S_IMODE(info.st_mode))
    with suppress(PermissionError):
        os.chown(staging, info.st_uid, info.st_gid)


def diff_tree(
    out: Path, tree: Mapping[str, str], *, keep: Callable[[str], bool] | None = None
) -> str:
    """A unified diff from the tree on disk to ``tree`` (only the files ``keep`` accepts,
    when given); empty when they are equal."""
    check = TreeCheck(out)
    for rel, text in tree.items():
        check.add(rel, text)
    text = check.diff()
    if keep is None:
        return text
    return "".join(line for rel in sorted(check.chunks) if keep(rel) for line in check.chunks[rel])


class TreeCheck:
    """Compares a tree, file by file as it is made, with the one vf wrote to ``out``."""

    def __init__(self, out: Path, *, only: tuple[str, ...] = ()) -> None:
        self.out = out
        self._only = only
        self.owned = set(check_owned(out))
        self.files: dict[str, None] = {}
        self._chunks: dict[str, list[str]] = {}
        self.strays: list[str] = []  # files under GLOB_READ vf did not write, once diffed

    def add(self, rel: str, text: FileText) -> None:
        """Compare one file (a path given twice is compared with the later text)."""
        self.files[rel] = None
        before = read_owned(self.out, rel) if rel in self.owned else None
        self._compare(rel, before=before, after=whole(text))

    def diff(self) -> str:
        """The unified diff of every file compared, the manifest and every file now gone;
        one line when there is no tree at all."""
        self.add(MANIFEST, manifest_text([f for f in self.files if f != MANIFEST]))
        if not os.path.lexists(self.out):
            return f"{self.out} does not exist: vf compile would write {len(self.files)} files\n"
        for rel in self.owned - set(self.files):
            self._compare(rel, before=read_owned(self.out, rel), after=None)
        self.strays = stray_files(self.out, known=self.owned | set(self.files))
        text = "".join(line for rel in sorted(self._chunks) for line in self._chunks[rel])
        return text + stray_notes(self.strays)

    @property
    def chunks(self) -> Mapping[str, list[str]]:
        """The diff lines of each file that differs, once ``diff`` ran."""
        return self._chunks

    def _compare(self, rel: str, *, before: str | None, after: str | None) -> None:
        self._chunks.pop(rel, None)
        if before == after:
            return
        import difflib  # only a stale tree has a diff to show

        self._chunks[rel] = list(
            difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                (after or "").splitlines(keepends=True),
                fromfile=f"a/{rel}" if before is not None else "/dev/null",
                tofile=f"b/{rel}" if after is not None else "/dev/null",
            )
        )
