"""Everything a configuration downloads, fetched once where there is internet (a cluster's login
node), so that its jobs run where there is none.

:func:`downloads` lists what a validated configuration needs: the archive of each source its
experiments and its deep phase read (into ``data/raw/<source>/``, where the workflow's
``acquire`` rule finds them verified and does nothing) and the weights file of each backbone
that does not ship in an installed package (into the Hugging Face cache, which the feature
jobs read; set ``HF_HUB_OFFLINE=1`` for them on nodes without internet).
:func:`prefetch` fetches them, each checked against its digest.  An archive or weights file
without a pinned digest (Purchase100, the ViT-B/16 weights) whose configuration gives none
stops everything before any download, naming the key that records one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subaudit.data import SOURCES, own_features
from subaudit.data.acquisition import acquire
from subaudit.data.sources import DataError
from subaudit.data.backbones import BACKBONES, unverified

__all__ = ["Archive", "Weights", "downloads", "prefetch"]


@dataclass(frozen=True)
class Archive:
    """A source archive a configuration reads: the source, the digest the configuration gives
    for it (None: the pinned one) and the key that gives it."""

    source: str
    checksum: str | None
    key: str


@dataclass(frozen=True)
class Weights:
    """A backbone's downloaded weights file a configuration reads: the backbone, the sha256
    the configuration gives for it (None: the pinned one, if any) and the key that gives it."""

    backbone: str
    checksum: str | None
    key: str


def downloads(params: Mapping[str, Any]) -> tuple[list[Archive], list[Weights]]:
    """The source archives and the backbones' weights files a configuration needs (each
    backbone once, with the digest of the first experiment that reads it)."""
    archives: dict[str, Archive] = {}
    weights: dict[str, Weights] = {}
    for exp, e in params["natural"]["experiments"].items():
        if e["source"] != own_features.NAME and e["source"] not in archives:
            archives[e["source"]] = Archive(e["source"], e.get("checksum"), f"natural.experiments.{exp}.checksum")
        bb = e.get("backbone", "none")
        if bb in BACKBONES and BACKBONES[bb].hub_repo is not None and bb not in weights:
            weights[bb] = Weights(bb, e.get("weights_checksum"), f"natural.experiments.{exp}.weights_checksum")
    deep = params.get("deep", {}).get("source")
    if deep is not None and deep not in archives:
        archives[deep] = Archive(deep, None, "deep.source")
    return list(archives.values()), list(weights.values())


def _check_weights(weights: list[Weights]) -> None:
    """DataError, before any download, for weights with neither a pinned nor a given sha256."""
    for w in weights:
        bb = BACKBONES[w.backbone]
        if bb.sha256 is None and w.checksum is None:
            raise DataError(unverified(bb, w.key, " in your configuration (params.yaml or a --configfile)"))


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
             say: Callable[[str], None] = print) -> dict[str, Path]:
    """Fetch every archive of :func:`downloads` into ``root/data/raw`` (verified; an archive
    already there and intact is kept) and, with ``weights``, every backbone's weights file
    into the Hugging Face cache (verified by its sha256); each local file, by source or
    backbone."""
    root = Path(root)
    archives, files = downloads(params)
    _check_digests(archives, root)
    if weights:
        _check_weights(files)
    done: dict[str, Path] = {}
    for a in archives:
        path = acquire(a.source, root / "data" / "raw" / a.source, checksum=a.checksum)
        say(f"{a.source}: {path} (verified)")
        done[a.source] = path
    for w in files if weights else ():
        from subaudit.data.features import hub_weights  # imports torch: only where weights are fetched

        done[w.backbone] = hub_weights(w.backbone, w.checksum, key=w.key)
        say(f"{w.backbone}: {done[w.backbone]} (verified; the Hugging Face cache)")
    if not files:
        say("no weights to fetch: every backbone of this configuration ships in an installed package")
    return done
