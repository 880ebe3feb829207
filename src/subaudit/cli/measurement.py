"""Measuring commands: ``simulate-s1`` (the S1 worst-case canary's audit scores) and ``bench``
(the training engine's throughput against Opacus and the machine's matmul rate)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from subaudit.cli.arguments import Command, dp_flags, emit, integer, s1_adjacency
from subaudit.validation import ParameterError

__all__ = ["COMMANDS"]


def _simulate_s1_flags(sp: argparse.ArgumentParser) -> None:
    dp_flags(sp)
    sp.add_argument("--runs", type=integer, required=True, help="runs per world (>= 1)")
    sp.add_argument("--adjacency", type=s1_adjacency, default="substitute",
                    help="substitute (also replace-one) or add-remove (also add-or-remove-one)")
    sp.add_argument("--seed", type=integer, default=0)
    sp.add_argument("--out", required=True, help="output CSV (columns score,label)")
    sp.add_argument("--quiet", action="store_true")


def _simulate_s1(args: argparse.Namespace) -> None:
    import pandas as pd

    from subaudit.artifacts import write_csv
    from subaudit.scenarios.s1 import simulate_s1

    if Path(args.out).is_dir():
        raise ParameterError("out", args.out, "a CSV file's path (this is a folder)")
    audit = simulate_s1(args.sigma, args.q, args.steps, args.runs, adjacency=args.adjacency,
                        seed=args.seed)
    frame = pd.DataFrame({"score": audit.scores[-1], "label": audit.labels.astype(int)})
    write_csv(args.out, frame)
    if not args.quiet:
        print(f"wrote {len(frame)} runs ({args.runs} per world) to {args.out}", file=sys.stderr)


def _bench_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--quick", action="store_true", help="fewer steps (under a minute)")
    sp.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")


def _bench(args: argparse.Namespace) -> None:
    from subaudit.engine.bench import format_table, run_bench
    from subaudit.devices import resolve_device

    def say(msg: str) -> None:
        if not args.json:
            print(f"measuring {msg} ...", file=sys.stderr)

    result = run_bench(quick=args.quick, progress=say, device=resolve_device(args.device))
    emit(result, args.json, format_table(result))


COMMANDS = [
    Command("simulate-s1", "S1 worst-case dataset canary audit scores", _simulate_s1_flags, _simulate_s1, json=False),
    Command("bench", "training engine throughput vs Opacus and the matmul rate", _bench_flags, _bench),
]
