"""Artifact files: written atomically, read back only when intact.

Each writer writes to a temporary file in the destination's directory, syncs it to disk and
renames it into place (os.replace is atomic on POSIX), so a killed job never leaves a
half-written file that a later step could take for complete.  A temporary file is hidden and
named after its destination, its host and its writer's process id
(``.<name>.<host>-<pid>.<random>.tmp<suffix>``); the next write of the same destination
removes those of writers that are gone (:func:`stale_temporaries`), and ``.dvcignore`` keeps
them out of DVC.  Each reader checks
what it reads (an .npz's member CRC-32s and the sha256 of its arrays stored inside
it, JSON syntax, a CSV's complete last line) and raises :class:`CorruptArtifact`,
naming the file, instead of handing on a truncated or damaged artifact (a full disk,
a broken copy, a bad transfer).  :func:`verify` checks files without using them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


class CorruptArtifact(ValueError):
    """An artifact that exists but cannot be read back whole; ``foreign``: an intact file that
    subaudit did not write (an .npz without the digest :func:`write_npz` stores)."""

    def __init__(self, path: str | Path, reason: str, *, foreign: bool = False) -> None:
        self.path = Path(path)
        self.reason = reason
        self.foreign = foreign
        super().__init__(
            f"{path} is damaged ({reason}); it was not used. `subaudit verify --remove {path}` removes "
            "it if the workflow wrote it and prints the command that rebuilds it.")


#: A temporary file older than this is stale whoever wrote it (a write takes seconds).
STALE_AFTER_S = 3600.0


def _owner() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:          # another user's live process
        return True
    return True


#: A writer's temporary file: hidden, ``-<pid>.<mkstemp's 8 characters>.tmp<suffix>`` at the end.
_TEMPORARY = re.compile(r"^\..+-(?P<pid>\d+)\.[a-z0-9_]{8}\.tmp(?:\.[^.]+)?$")


def is_stale_temporary(path: str | Path) -> bool:
    """Whether ``path`` is a temporary file of a writer that is gone: written on this host by a
    process that no longer runs, or older than :data:`STALE_AFTER_S` (from any host)."""
    path = Path(path)
    match = _TEMPORARY.match(path.name)
    if match is None:
        return False
    try:
        if time.time() - path.stat().st_mtime > STALE_AFTER_S:
            return True
    except FileNotFoundError:        # renamed into place or removed meanwhile
        return False
    pid = int(match["pid"])
    return f".{socket.gethostname()}-{pid}." in path.name and not _alive(pid)


def stale_temporaries(dest: str | Path) -> list[Path]:
    """The stale temporary files (:func:`is_stale_temporary`) of writers of ``dest``."""
    dest = Path(dest)
    if not dest.parent.is_dir():
        return []
    return sorted(f for f in dest.parent.glob(f".{dest.name}.*.tmp{dest.suffix}") if is_stale_temporary(f))


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.  Removes
    the temporary files that killed writers of ``path`` left first."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in stale_temporaries(dest):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.{_owner()}.", suffix=".tmp" + dest.suffix, dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results are for sharing
        os.replace(tmp, dest)
    except OSError as err:           # a full disk names no file: name the destination
        Path(tmp).unlink(missing_ok=True)
        if err.filename is None:
            raise type(err)(err.errno, err.strerror, str(dest)) from err
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_text(path: str | Path, writer: Callable[[IO[str]], None]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w") as fh:
        writer(fh)
        fh.flush()
        os.fsync(fh.fileno())


def write_text(path: str | Path, text: str) -> None:
    """Write a text file (a report) atomically, synced before it appears."""
    _write_text(path, lambda fh: fh.write(text))


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats (NaN, +-inf) replaced by None, recursively.

    Strict JSON has no NaN or Infinity; None (null) means "not a finite number".
    """
    if isinstance(value, float | np.floating):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    return value


def dumps(data: Mapping[str, Any], indent: int | None = None) -> str:
    """Strict JSON text of ``data`` (sorted keys; non-finite floats as null)."""
    return json.dumps(json_safe(data), indent=indent, sort_keys=True, allow_nan=False)


def write_json(path: str | Path, data: Mapping[str, Any]) -> None:
    """Write a strict JSON object (sorted keys, trailing newline) atomically."""
    _write_text(path, lambda fh: fh.write(dumps(data, indent=2) + "\n"))


def read_json(path: str | Path) -> dict[str, Any]:
    """Read a JSON object (:class:`CorruptArtifact` if it does not parse as one)."""
    try:
        data = json.loads(Path(path).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptArtifact(path, f"not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise CorruptArtifact(path, f"a JSON {type(data).__name__}, not an object")
    return data


def write_csv(path: str | Path, frame: pd.DataFrame) -> None:
    """Write a tidy CSV (no index) atomically, with full float precision."""
    _write_text(path, lambda fh: frame.to_csv(fh, index=False, float_format="%.10g"))


DIGEST = "_sha256"  # the .npz member holding the digest of all the others


def _digest(arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 over the arrays' names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def write_npz(path: str | Path, **arrays: np.ndarray) -> None:
    """Write a compressed .npz atomically, with the sha256 digest of its arrays inside."""
    if DIGEST in arrays:
        raise ValueError(f"{DIGEST} is a reserved array name")
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **{DIGEST: np.array(_digest(arrays))}, **arrays)
        fh.flush()
        os.fsync(fh.fileno())


def read_csv(path: str | Path, **kwargs: Any) -> pd.DataFrame:
    """Read a CSV written by :func:`write_csv` (:class:`CorruptArtifact` if cut short).

    Every line of such a file ends with a newline: a file cut inside a line is refused.
    """
    import pandas as pd  # here: a training job, which reads no CSV, is spared 0.3 s of import

    data = Path(path).read_bytes()
    if not data.endswith(b"\n"):
        raise CorruptArtifact(path, "the last line is incomplete")
    try:
        return pd.read_csv(io.BytesIO(data), **kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise CorruptArtifact(path, f"not a complete CSV table: {err}") from None


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Read every array of an .npz into memory (:class:`CorruptArtifact` if damaged).

    The file is read once: each member's CRC-32 and length are checked as it is read,
    any failure to parse counts as damage, and the arrays must match the digest
    :func:`write_npz` stored (which also catches a damaged zip directory that hides
    members), so a truncated file or a changed byte is caught here, not later.
    """
    Path(path).stat()  # a missing file is FileNotFoundError, not damage
    try:
        with np.load(path, allow_pickle=False) as data:  # reading a member checks its CRC-32
            arrays = {k: data[k] for k in data.files}
        stored = str(arrays.pop(DIGEST, ""))
        if not stored:
            raise CorruptArtifact(path, "no stored digest (not written by subaudit)", foreign=True)
        if stored != _digest(arrays):
            raise CorruptArtifact(path, "its arrays do not match the stored sha256 digest")
        return arrays
    except CorruptArtifact:
        raise
    except Exception as err:  # noqa: BLE001 - any failure to parse an intact-looking file
        raise CorruptArtifact(path, f"{type(err).__name__}: {err}") from None


READERS: dict[str, Callable[[Path], Any]] = {".npz": read_npz, ".json": read_json,
                                             ".csv": read_csv}


def verify(paths: Iterable[str | Path]) -> tuple[list[Path], list[CorruptArtifact], list[Path]]:
    """Read every artifact (.npz, .json, .csv) under ``paths``: (files checked, damaged ones,
    stale temporary files of writers that are gone).

    Other hidden files (a running writer's temporary files) are skipped.
    """
    files: list[Path] = []
    stale: list[Path] = []
    for root in map(Path, paths):
        found = sorted(root.rglob("*")) if root.is_dir() else [root]
        files += [f for f in found if f.is_file() and f.suffix in READERS
                  and not f.name.startswith(".")]
        stale += [f for f in found if f.is_file() and is_stale_temporary(f)]
    bad = []
    for f in files:
        try:
            READERS[f.suffix](f)
        except CorruptArtifact as err:
            bad.append(err)
    return files, bad, stale
