"""Dependencies by use: ``pip install subaudit`` (no extras) gives the accountants, the
statement, the estimators and their command line; the engine, the feature extractors and the
workflow are extras, and a command that needs one names it."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: The packages that only the extras install, made unimportable in the child process.
_BLOCKED = ["torch", "opacus", "tqdm", "timm", "torchvision", "sentence_transformers", "transformers",
            "matplotlib", "seaborn", "yaml", "jsonschema", "snakemake", "dvc", "sklearn"]
_CHILD = r"""
import importlib.abc, json, sys
BLOCKED = set(json.loads(sys.argv[1]))

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not installed)", name=name)
        return None

sys.meta_path.insert(0, Block())
from subaudit.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CHILD, json.dumps(_BLOCKED), *args],
                          capture_output=True, text=True, timeout=300)


def test_the_core_commands_run_without_the_extras(tmp_path):
    setting = ["--sigma", "1.5", "--q", "0.04", "--steps", "2250", "--delta", "1e-5"]
    for command in (["account", *setting, "--adjacency", "substitute"], ["statement", *setting],
                    ["calibrate", "--target-epsilon", "4", "--q", "0.04", "--steps", "2250", "--delta", "1e-5",
                     "--adjacency", "substitute"],
                    ["gdp-epsilon", "--mu", "1.5", "--delta", "1e-5"], ["ceiling", *setting],
                    ["one-run", "--canaries", "1000", "--guesses", "100", "--correct", "95", "--delta", "1e-5",
                     "--method", "steinke"]):
        proc = _cli(*command, "--json")
        assert proc.returncode == 0, (command, proc.stderr)
        assert json.loads(proc.stdout)
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.normal(2.0, 1.0, 500), rng.normal(0.0, 1.0, 500)])
    labels = np.repeat([1, 0], 500)
    np.savez(tmp_path / "scores.npz", score=scores, label=labels)
    proc = _cli("estimate", str(tmp_path / "scores.npz"), "--delta", "1e-5", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["epsilon"] > 1.0


def test_a_command_that_needs_an_extra_names_it():
    proc = _cli("bench", "--quick")
    assert proc.returncode == 1
    assert "pip install 'subaudit[engine]'" in proc.stderr and "Traceback" not in proc.stderr


def test_the_extras_hold_what_the_core_does_not_need():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for heavy in ("torch", "opacus", "timm", "sentence-transformers", "torchvision", "snakemake", "dvc",
                  "matplotlib", "efficientnet", "minilm"):
        assert heavy not in core, heavy
    extras = project["optional-dependencies"]
    assert any(d.startswith("torch==") for d in extras["engine"])
    assert "subaudit[engine]" in extras["features"] and "subaudit[engine,features]" in extras["workflow"]


def test_make_lets_python_keep_its_compiled_modules():
    """``make run`` and ``make test`` unset PYTHONDONTWRITEBYTECODE: with it set, uv's installs
    have no bytecode and every process compiled its ~1,300 modules again (7.3 s for 3.6 s)."""
    probe = 'probe: ; @echo "[$${PYTHONDONTWRITEBYTECODE-unset}]"'
    out = subprocess.run(["make", "-s", "-C", str(ROOT), f"--eval={probe}", "probe"], capture_output=True,
                         text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[unset]"


def test_the_python_floor_is_what_the_pinned_packages_require():
    """pyproject.toml's requires-python is the highest floor among the versions constraints.txt
    pins (each installed distribution's own Requires-Python), and setup.sh checks that one."""
    import re
    from importlib import metadata

    floors = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name = line.split("==")[0].strip()
            spec = metadata.metadata(name).get("Requires-Python") or ""
            found = re.search(r">=\s*3\.(\d+)", spec)
            floors[name] = int(found.group(1)) if found else 0
    floor = max(floors.values())
    assert floor >= 11, floors
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert declared == f">=3.{floor}", (declared, {k: v for k, v in floors.items() if v == floor})
    assert f"sys.version_info >= (3, {floor})" in (ROOT / "scripts" / "setup.sh").read_text()
    for page in ("README.md", "docs/install.md", "docs/quickstart.md"):
        text = (ROOT / page).read_text()
        assert f"3.{floor}" in text and "3.10" not in text, page
