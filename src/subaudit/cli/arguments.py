"""What every command shares: the :class:`Command` entry of the registry, the flags' value
types, the parameters file and its presets, audit score files, one-line usage errors and the
printing of a result (text, or one JSON object with ``--json``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from subaudit.artifacts import dumps
from subaudit.validation import ConfigError, ParameterError

__all__ = ["ADJACENCY_HELP", "S1_ADJACENCIES", "Command", "Parser", "UsageError", "as_dict", "configuration",
           "configuration_flags", "dp_flags", "emit", "finite_float", "flag_of", "integer", "listed",
           "s1_adjacency", "scores_file"]

S1_ADJACENCIES = ("substitute", "add-remove")
ADJACENCY_HELP = ("add-remove (also add-or-remove-one), substitute (also replace-one) or group; "
                  "case and _ / - do not matter")


@dataclass(frozen=True)
class Command:
    """A ``subaudit`` subcommand: its name and one-line help, what adds its flags and what runs
    it (returning the exit status, None for 0); ``json``: it takes ``--json`` (one JSON object
    on stdout instead of text)."""

    name: str
    help: str
    flags: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]
    json: bool = True


class UsageError(Exception):
    """A one-line usage problem, already phrased for the user."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, exiting with status 2 and one line on a bad flag."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


# Library parameter names that differ from their flag.
_FLAG_OF = {"runs_per_world": "--runs", "target_epsilon": "--target-epsilon", "paths": "PATH",
            "reference": "REFERENCE"}


def flag_of(name: str) -> str:
    """The flag (or positional) a library parameter ``name`` came from, for error messages."""
    if name.startswith("history["):  # a segment's value: "history[i] sigma"
        index, key = name[len("history["):].split("] ")
        return f"--{key} (segment {int(index) + 1})"
    return _FLAG_OF.get(name, "--" + name.replace("_", "-"))


def listed(value: Any) -> str:
    """A flag's value as typed: numbers by %g, lists space-separated."""
    values = value if isinstance(value, list) else [value]
    return " ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def emit(result: dict[str, Any], as_json: bool, text: str) -> None:
    """Print ``result`` as one JSON object, or ``text``."""
    print(dumps(result) if as_json else text)


def as_dict(obj: Any) -> dict[str, Any]:
    return asdict(obj)


def finite_float(text: str) -> float:
    """A finite number (argparse's float takes "nan" and "inf")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def s1_adjacency(text: str) -> str:
    """add-remove or substitute, also spelled as dp-accounting and Flower do (replace-one, ...)."""
    from subaudit.accounting import canonical_adjacency

    try:
        name = canonical_adjacency(text)
    except ParameterError:
        name = None
    if name not in S1_ADJACENCIES:
        raise argparse.ArgumentTypeError(
            f"expected add-remove (also add-or-remove-one) or substitute (also replace-one), got {text!r}")
    return name


def dp_flags(sp: argparse.ArgumentParser, sigma: bool = True) -> None:
    """One DP-SGD setting: ``--sigma`` (unless calibrated), ``--q``, ``--steps``."""
    if sigma:
        sp.add_argument("--sigma", type=finite_float, required=True, help="noise multiplier (> 0)")
    sp.add_argument("--q", type=finite_float, required=True, help="Poisson sampling rate in (0, 1]")
    sp.add_argument("--steps", type=integer, required=True, help="training steps T (>= 1)")


def configuration_flags(sp: argparse.ArgumentParser) -> None:
    """``--params`` and the ``--configfile`` presets merged over it."""
    sp.add_argument("--params", default="params.yaml", help="the parameters file (default params.yaml)")
    sp.add_argument("--configfile", nargs="*", default=[], help="presets merged over it, as snakemake does")


def configuration(args: argparse.Namespace) -> dict[str, Any]:
    """``--params`` with each ``--configfile`` merged over it as Snakemake merges them, validated,
    narrowed to the experiments and cases its selection lists name (what the workflow runs)."""
    from subaudit.pipeline.config import load_params, read_yaml, selected

    if not Path(args.params).exists():
        raise UsageError(f"--params {args.params}: no such file (run in the workflow's folder, or give --params FILE)")
    try:
        params = load_params(args.params)
    except ConfigError as err:
        raise UsageError(f"--params {err}") from None
    if args.configfile:
        from snakemake.utils import update_config   # how Snakemake merges --configfile

        from subaudit.pipeline.config import validate_params

        for extra in args.configfile:
            try:
                update_config(params, read_yaml(extra))
            except ConfigError as err:
                raise UsageError(f"--configfile {err}") from None
        validate_params(params, source=" + ".join([args.params, *args.configfile]))
    return selected(params)


def scores_file(path: str, flag: str, step: int | None = None) -> tuple[Any, Any]:
    """(scores, labels) from an audit's scores file, or a UsageError naming ``flag``, the file
    and what is wrong with it (missing, a folder, not one of the layouts, damaged)."""
    from subaudit.pipeline.score_files import load_audit_scores

    try:
        return load_audit_scores(path, step)
    except ParameterError:          # --step: not a checkpoint of the file
        raise
    except (OSError, ValueError) as err:
        raise UsageError(f"{flag} {err}") from None
