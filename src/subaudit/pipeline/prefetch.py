"""Everything a configuration downloads, fetched once where there is internet (a cluster's login
node), so that its jobs run where there is none.

:func:`downloads` lists what a validated configuration needs: the archive of each source its
experiments and its deep phase read (into ``data/raw/<source>/``, where the workflow's
``acquire`` rule finds them verified and does nothing) and the pretrained weights of each
backbone that does not ship in an installed package (into the Hugging Face cache, which the
feature jobs read; set ``HF_HUB_OFFLINE=1`` for them on nodes without internet).
:func:`prefetch` fetches them, each checked against its digest.  A source without a pinned
digest (Purchase100) stops before any download, naming the key that records one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subaudit.data import SOURCES, own_features
from subaudit.data.acquisition import acquire
from subaudit.data.sources import DataError
from subaudit.data.backbones import BACKBONES

__all__ = ["Archive", "downloads", "prefetch"]


@dataclass(frozen=True)
class Archive:
    """A source archive a configuration reads: the source, the digest the configuration gives
    for it (None: the pinned one) and the key that gives it."""

    source: str
    checksum: str | None
    key: str


def downloads(params: Mapping[str, Any]) -> tuple[list[Archive], list[str]]:
    """The source archives and the backbones with downloaded weights a configuration needs."""
    archives: dict[str, Archive] = {}
    backbones: list[str] = []
    for exp, e in params["natural"]["experiments"].items():
        if e["source"] != own_features.NAME and e["source"] not in archives:
            archives[e["source"]] = Archive(e["source"], e.get("checksum"), f"natural.experiments.{exp}.checksum")
        bb = e.get("backbone", "none")
        if bb in BACKBONES and not BACKBONES[bb].offline and bb not in backbones:
            backbones.append(bb)
    deep = params.get("deep", {}).get("source")
    if deep is not None and deep not in archives:
        archives[deep] = Archive(deep, None, "deep.source")
    return list(archives.values()), backbones


def _check_digests(archives: list[Archive], root: Path) -> None:
    """DataError, before any download, for a source with neither a pinned nor a given digest."""
    for a in archives:
        src = SOURCES[a.source]
        if src.checksum is None and a.checksum is None:
            if not a.key.endswith(".checksum"):   # deep.source: no key gives a digest
                raise DataError(f"{a.key}: {a.source} has no pinned digest; choose a source that has one")
            path = root / "data" / "raw" / a.source / src.filename
            raise DataError(
                f"{a.source} has no pinned digest, so it is not used unverified. Fetch it by hand "
                f"({src.how_to_fetch.replace('<cache_dir>', str(path.parent))}), check it as you see fit, "
                "then record its digest: "
                f"run `sha256sum {path}` and set `{a.key}: <that sha256>` in your configuration "
                "(params.yaml or a --configfile); then run this command again.")


def prefetch(params: Mapping[str, Any], root: str | Path = ".", *, weights: bool = True,
             say: Callable[[str], None] = print) -> dict[str, Path | str]:
    """Fetch every archive of :func:`downloads` into ``root/data/raw`` (verified; an archive
    already there and intact is kept) and, with ``weights``, every backbone's downloaded
    weights into the Hugging Face cache; what was done, by source or backbone."""
    root = Path(root)
    archives, backbones = downloads(params)
    _check_digests(archives, root)
    done: dict[str, Path | str] = {}
    for a in archives:
        path = acquire(a.source, root / "data" / "raw" / a.source, checksum=a.checksum)
        say(f"{a.source}: {path} (verified)")
        done[a.source] = path
    for name in backbones if weights else ():
        from subaudit.data.features import create_image_model

        if BACKBONES[name].family != "image":
            raise DataError(f"{name}: no download path for a text backbone that does not ship in a package")
        create_image_model(name, pretrained=True)
        say(f"{name}: weights in the Hugging Face cache")
        done[name] = "weights cached"
    if not backbones:
        say("no weights to fetch: every backbone of this configuration ships in an installed package")
    return done
