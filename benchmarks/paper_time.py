"""How long the paper preset's DP trainings take: the arithmetic, from `subaudit bench`.

Lists every natural-data audit of ``params.yaml`` merged with ``presets/paper.yaml`` (base grid
and ablations, as the workflow builds them), its model-steps (runs x steps) and useful FLOPs,
and converts them to time with the engine's rates measured by ``subaudit bench --json``:

* a linear head (image, text) trains densely at every q (the engine computes every record,
  see *Training engine*), so its time per model-step is the bench's image-head q = 1 time
  scaled by the useful FLOPs of a full batch of the paper's shape;
* the MLP (tabular) trains the sampled records only (``gather``), so its time scales with
  q x n: the bench's tabular q = 0.25 rate scaled by useful FLOPs;
* on a GPU the engine is assumed to reach the same fraction of the device's float32 matmul
  rate as on this CPU (``--device-gflops``; an H100 SXM does about 67,000 GFLOP/s in float32
  without tensor cores), so GPU time = CPU time x (CPU matmul / device matmul).

Usage: ``python benchmarks/paper_time.py --bench bench.json [--device-gflops 67000]``.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

import yaml

from subaudit.pipeline import settings as S
from subaudit.engine.bench import useful_flops
from subaudit.pipeline.config import validate_params

ROOT = Path(__file__).resolve().parent.parent

#: Model shapes of the paper preset's experiments (features -> hidden -> classes).
SIZES = {"image": (768, 10), "text": (384, 2), "tabular": (600, 128, 100)}


def merged(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` key by key, as Snakemake merges a --configfile."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merged(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def audits(params: dict) -> list[S.Setting]:
    """Every natural-data audit setting the workflow trains: base grid and ablations."""
    nat = params["natural"]
    out = dict.fromkeys(S.settings_from_config(nat))
    for knob in S.ABLATED:
        out.update(dict.fromkeys(S.ablation_settings(nat, params["ablations"], knob)))
    return list(out)


def seconds_per_model_step(bench: dict, exp: str, q: float, n: int) -> float:
    """CPU seconds of one model-step of ``exp`` at (q, n), from the bench's goal workloads."""
    rows = {(r["name"], r["q"]): r for r in bench["workloads"] if r["role"] == "goal"}
    if exp == "tabular":
        ref = rows[("tabular MLP", 0.25)]
        scale = useful_flops(SIZES[exp], q * n) / useful_flops((600, 128, 100), 0.25 * ref["n"])
    else:
        ref = rows[("image head", 1.0)]
        scale = useful_flops(SIZES[exp], n) / useful_flops((768, 10), ref["n"])
    return scale / ref["engine_model_steps_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="output of `subaudit bench --json`")
    ap.add_argument("--device-gflops", type=float, default=67000.0,
                    help="float32 matmul rate of one GPU (GFLOP/s)")
    args = ap.parse_args()
    bench = json.loads(Path(args.bench).read_text())
    params = merged(yaml.safe_load((ROOT / "params.yaml").read_text()),
                    yaml.safe_load((ROOT / "presets/paper.yaml").read_text()))
    validate_params(params, "params.yaml + presets/paper.yaml")
    nat = params["natural"]
    per_exp: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in audits(params):
        exp = nat["experiments"][s.experiment]
        shards = math.ceil(s.runs / nat["shard_size"])
        steps = s.runs * s.steps
        cpu = steps * seconds_per_model_step(bench, s.experiment, s.q, exp["n_train"])
        row = per_exp[s.experiment]
        row["settings"] += 1
        row["shards"] += shards
        row["model_steps"] += steps
        row["pflop"] += steps * useful_flops(SIZES[s.experiment], s.q * exp["n_train"]) / 1e15
        row["cpu_core_hours"] += cpu / 3600
    ratio = bench["matmul_gflops"] / args.device_gflops
    print(f"bench: float32 matmul {bench['matmul_gflops']:.0f} GFLOP/s on this CPU; device "
          f"{args.device_gflops:.0f} GFLOP/s: GPU time = CPU time x {ratio:.2e}")
    print(f"{'experiment':<10}{'settings':>9}{'shards':>8}{'model-steps':>14}{'PFLOP':>9}"
          f"{'CPU core-h':>12}{'GPU-h':>9}")
    total = defaultdict(float)
    for exp, row in per_exp.items():
        gpu = row["cpu_core_hours"] * ratio
        total["gpu"] += gpu
        for k, v in row.items():
            total[k] += v
        print(f"{exp:<10}{row['settings']:>9.0f}{row['shards']:>8.0f}{row['model_steps']:>14.3g}"
              f"{row['pflop']:>9.3g}{row['cpu_core_hours']:>12.1f}{gpu:>9.2f}")
    print(f"{'total':<10}{total['settings']:>9.0f}{total['shards']:>8.0f}{total['model_steps']:>14.3g}"
          f"{total['pflop']:>9.3g}{total['cpu_core_hours']:>12.1f}{total['gpu']:>9.2f}")


if __name__ == "__main__":
    main()
