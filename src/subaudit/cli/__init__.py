"""The ``subaudit`` command line: privacy accounting, statements, estimation and audits.

Accountants, privacy statements, calibration, estimation, ceilings, one-run audits, S1
simulation, bench, artifact checks.

The flags are a contract (tests and users script against them). With ``--json`` a
command prints exactly one JSON object on stdout. A bad input (a value out of its range, a
count whose arrays would not fit in memory, a file that is missing, a folder, unreadable or
not in an accepted layout) exits with status 2 and one line on stderr naming the flag or
file and what is allowed; a valid setting beyond the accountant's numerical reach, degenerate
data or a failing disk exit with 1, also in one line. No input gives a traceback.

The commands are a registry (:data:`COMMANDS`): each module of this package lists its own,
each with its flags beside its handler (:class:`~subaudit.cli.arguments.Command`):
:mod:`~subaudit.cli.privacy` (accounting), :mod:`~subaudit.cli.auditing` (estimates, ceilings,
one-run audits), :mod:`~subaudit.cli.operations` (the workflow's configurations, runs and
artifacts), :mod:`~subaudit.cli.measurement` (S1 scores, the engine's bench);
:mod:`~subaudit.cli.arguments` holds what they share. Adding a command is a handler, its flags
and a :class:`Command` entry in one of them.

May import every part of subaudit: it is the outermost layer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from subaudit import __version__
from subaudit.cli import auditing, measurement, operations, privacy
from subaudit.cli.arguments import Command, Parser, UsageError, flag_of, listed
from subaudit.validation import AccountingRangeError, ConfigError, ParameterError

__all__ = ["COMMANDS", "Command", "build_parser", "main"]

#: Every subcommand by name, in the order of ``subaudit --help``.
COMMANDS: dict[str, Command] = {c.name: c for module in (privacy, auditing, operations, measurement)
                                for c in module.COMMANDS}

#: The flags that describe an accounting request, named in an AccountingRangeError.
_SETTING_FLAGS = ("sigma", "q", "steps", "target_epsilon", "delta")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    p = Parser(prog="subaudit", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version="%(prog)s " + __version__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for c in COMMANDS.values():
        sp = sub.add_parser(c.name, help=c.help)
        c.flags(sp)
        if c.json:
            sp.add_argument("--json", action="store_true", help="print one JSON object")
        sp.set_defaults(func=c.run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``subaudit`` console script."""
    from subaudit.data.sources import DataError

    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"subaudit {args.command}"
    func: Callable[[argparse.Namespace], int | None] = args.func
    try:
        status = func(args)
    except ParameterError as err:
        print(f"{prog}: error: {flag_of(err.name)} = {err.value!r} is invalid; "
              f"allowed: {err.allowed}", file=sys.stderr)
        return 2
    except UsageError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except AccountingRangeError as err:  # name the setting the accountant could not resolve
        given = [f"--{k.replace('_', '-')} {listed(getattr(args, k))}" for k in _SETTING_FLAGS
                 if getattr(args, k, None) is not None]
        print(f"{prog}: error: {' '.join(given)}: {err}" if given else f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except ConfigError as err:           # a params or preset file that breaks the schema
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:               # a file or folder: named, with what the system said
        names = " -> ".join(str(f) for f in (err.filename, err.filename2) if f is not None)
        print(f"{prog}: error: {names or 'a file'}: {err.strerror or err}", file=sys.stderr)
        return 2 if isinstance(err, _BAD_PATHS) else 1
    except (ValueError, DataError) as err:  # degenerate data, numerics out of reach, a bad download
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as err:
        extra = _EXTRAS.get((err.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"{prog}: error: needs {err.name}, which comes with subaudit's {extra} extra: "
              f"pip install 'subaudit[{extra}]'", file=sys.stderr)
        return 1
    return status or 0


#: File errors that are the input's (a path that is missing, a folder, not a folder, not
#: permitted): exit 2, as other bad input; the others (a full disk, an I/O error) exit 1.
_BAD_PATHS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError, FileExistsError)

#: Packages of the optional extras (pyproject.toml), for the message when one is missing.
_EXTRAS = {"torch": "engine", "opacus": "engine", "tqdm": "engine", "timm": "features",
           "torchvision": "features", "sentence_transformers": "features", "matplotlib": "workflow",
           "seaborn": "workflow", "yaml": "workflow", "jsonschema": "workflow"}


if __name__ == "__main__":
    sys.exit(main())
