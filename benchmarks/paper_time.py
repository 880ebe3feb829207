"""How long the paper preset's DP trainings take on one device: the arithmetic, from measured rates.

Lists every natural-data audit of ``params.yaml`` merged with ``presets/paper.yaml`` (base grid
and ablations, as the workflow builds them), its model-steps (runs x steps) and useful FLOPs,
and converts them to hours with the engine's own rates from ``subaudit bench --json`` on the
device the audits will train on (no assumed fraction of a matmul rate):

* a linear head (image, text) trains densely at every q (the engine computes every record,
  see *Training engine*), so its time per model-step is the bench's image-head q = 1 time
  scaled by the useful FLOPs of a full batch of the paper's shape;
* the MLP (tabular) trains the sampled records only (``gather``), so its time scales with
  q x n: the bench's tabular q = 0.25 rate scaled by useful FLOPs;
* of a workload's rows the one with the most runs trained at once is taken (on a GPU the
  bench measures 1,024 to 16,384 runs; a shard trains ``natural.shard_size``).

With ``--deep deep.json`` (``subaudit deep-cost --configfile presets/paper.yaml --json`` on
the same device) it adds the deep phase: its examples at the measured Opacus rate.

Usage: ``python benchmarks/paper_time.py --bench bench.json [--deep deep.json] [--json]``.
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
    """Device seconds of one model-step of ``exp`` at (q, n), from the bench's goal workloads
    (each workload's row with the most runs at once)."""
    rows: dict[tuple[str, float], dict] = {}
    for r in bench["workloads"]:
        key = (r["name"], r["q"])
        if r["role"] == "goal" and (key not in rows or r["runs"] > rows[key]["runs"]):
            rows[key] = r
    if exp == "tabular":
        ref = rows[("tabular MLP", 0.25)]
        scale = useful_flops(SIZES[exp], q * n) / useful_flops((600, 128, 100), 0.25 * ref["n"])
    else:
        ref = rows[("image head", 1.0)]
        scale = useful_flops(SIZES[exp], n) / useful_flops((768, 10), ref["n"])
    return scale / ref["engine_model_steps_per_s"]


def paper_hours(bench: dict, deep: dict | None = None) -> dict:
    """Per experiment: settings, shards, model-steps, PFLOP and hours on the bench's device;
    with ``deep`` (``subaudit deep-cost --json``) the deep phase's examples and hours."""
    params = merged(yaml.safe_load((ROOT / "params.yaml").read_text()),
                    yaml.safe_load((ROOT / "presets/paper.yaml").read_text()))
    validate_params(params, "params.yaml + presets/paper.yaml")
    nat = params["natural"]
    per_exp: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in audits(params):
        exp = nat["experiments"][s.experiment]
        steps = s.runs * s.steps
        row = per_exp[s.experiment]
        row["settings"] += 1
        row["shards"] += math.ceil(s.runs / nat["shard_size"])
        row["model_steps"] += steps
        row["pflop"] += steps * useful_flops(SIZES[s.experiment], s.q * exp["n_train"]) / 1e15
        row["hours"] += steps * seconds_per_model_step(bench, s.experiment, s.q, exp["n_train"]) / 3600
    out = {"device": bench["machine"]["device"], "natural": {k: dict(v) for k, v in per_exp.items()},
           "natural_hours": sum(v["hours"] for v in per_exp.values())}
    if deep is not None:
        if deep["device"].split(":")[0] != out["device"].split(":")[0]:
            raise SystemExit(f"--deep was measured on {deep['device']}, the bench on {out['device']}")
        out["deep"] = {"examples": deep["total_examples"], "examples_per_second": deep["examples_per_second"],
                       "hours": deep["total_examples"] / deep["examples_per_second"] / 3600}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="output of `subaudit bench --json` on the device")
    ap.add_argument("--deep", help="output of `subaudit deep-cost --configfile presets/paper.yaml --json`")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    bench = json.loads(Path(args.bench).read_text())
    deep = json.loads(Path(args.deep).read_text()) if args.deep else None
    out = paper_hours(bench, deep)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"the paper preset on one {out['device']} device, at the rates `subaudit bench` measured there")
    print(f"{'experiment':<10}{'settings':>9}{'shards':>8}{'model-steps':>14}{'PFLOP':>9}{'hours':>10}")
    for exp, row in out["natural"].items():
        print(f"{exp:<10}{row['settings']:>9.0f}{row['shards']:>8.0f}{row['model_steps']:>14.3g}"
              f"{row['pflop']:>9.3g}{row['hours']:>10.2f}")
    print(f"{'natural':<50}{out['natural_hours']:>10.2f}")
    if "deep" in out:
        d = out["deep"]
        print(f"deep: {d['examples']:,} examples with Opacus at {d['examples_per_second']:,.0f}/s: "
              f"{d['hours']:.2f} hours")


if __name__ == "__main__":
    main()
