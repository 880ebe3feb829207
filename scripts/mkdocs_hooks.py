"""MkDocs hooks: the pages whose content comes from the code or from what a run wrote.

A page holds a marker, an HTML comment on a line of its own, and the hook replaces it with
Markdown rendered at build time, so these pages cannot go stale:

* ``<!-- subaudit:cli -->``: every subcommand's usage and help, from
  :func:`subaudit.cli.build_parser`;
* ``<!-- subaudit:run ARGS -->``: the output of ``subaudit ARGS`` (run in-process);
* ``<!-- subaudit:params KEY -->``: the block of ``KEY`` in ``params.yaml``, as it is;
* ``<!-- subaudit:report -->``: the verdicts and final-step audits of ``results/report.json``
  (written by ``make run``), else of ``reference/report.json`` (the default's, kept in git);
* ``<!-- subaudit:bench -->``: ``logs/bench.json`` (``subaudit bench --quick --json``), else
  how to produce it;
* ``<!-- subaudit:job-seconds -->``: the job-seconds of the heavy rules, summed from the
  workflow's ``logs/benchmarks/**/*.tsv``, else how to produce them;
* ``<!-- subaudit:figures -->``: the figure registry (``subaudit.reporting.figure_registry``):
  each file, its number in the ICLR and the arXiv text of the paper, and its caption;
* ``<!-- subaudit:one-run-limits -->``: the most a one-run audit of m canaries can show
  (:func:`subaudit.estimation.one_run.perfect_guess_limit` beside the procedures' caps);
* ``<!-- subaudit:finding NAME [ARG] -->``: a finding computed from the figure CSVs of
  ``results/figures`` (after ``make run``), else of ``reference/figures`` (:data:`FINDINGS`:
  ``scenario S6``, ``one-run``, ``reconstruction``);
* ``<!-- subaudit:claims -->``: the claims registry (``subaudit.reporting.claims.CLAIMS``) as
  a numbered list, the paper's and ours (beyond the paper) apart.

Also a Griffe extension (:class:`RstRoles`, listed under mkdocstrings' ``extensions``) that
turns the docstrings' Sphinx roles (``:func:`x```) into plain code spans for Markdown.

Configured in ``mkdocs.yml`` (``hooks:``); tested by ``tests/test_docs.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import griffe

MARKER = re.compile(r"^<!--\s*subaudit:([\w-]+)(?:\s+(.*?))?\s*-->\s*$", re.M)
HELP_WIDTH = 100


# --------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------


def _fixed_width(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Help formatted at a fixed width, whatever the terminal the build runs in."""
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=HELP_WIDTH)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Each subcommand's (one-line help, parser), in the parser's order."""
    out: dict[str, tuple[str, argparse.ArgumentParser]] = {}
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out[name] = (helps.get(name, ""), sub)
    return out


def render_cli(parser: argparse.ArgumentParser) -> str:
    """Markdown: the top-level usage, then one section per subcommand with its full help."""
    parts = ["```text", _fixed_width(parser).format_help().rstrip(), "```", ""]
    for name, (summary, sub) in _subcommands(parser).items():
        parts += [f"## `subaudit {name}`", ""]
        if summary:
            parts += [summary[0].upper() + summary[1:] + ".", ""]
        parts += ["```text", _fixed_width(sub).format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def _cli_parser() -> argparse.ArgumentParser:
    from subaudit.cli import build_parser

    return build_parser()


def render_run(args: str) -> str:
    """The output of ``subaudit ARGS``, run in-process, as a console block."""
    from subaudit.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(shlex.split(args))
    if status:
        raise RuntimeError(f"`subaudit {args}` exited with status {status}")
    return "\n".join(["```console", f"$ subaudit {args}", out.getvalue().rstrip(), "```", ""])


def render_params(path: Path, key: str) -> str:
    """The block of a top-level key of a YAML file (``params.yaml``), comments included."""
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(rf"{re.escape(key)}:(\s|$)", line)), None)
    if start is None:
        raise KeyError(f"{path.name} has no top-level key {key!r}")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"[^\s#]", lines[i])), len(lines))
    block = "\n".join(lines[start:end]).rstrip()
    return "\n".join([f"```yaml title=\"{path.name}\"", block, "```", ""])


# --------------------------------------------------------------------------------------
# What a run wrote
# --------------------------------------------------------------------------------------


def _fmt(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _cell(x: Any) -> str:
    return _fmt(x).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines + [""]


def _note(title: str, text: str) -> str:
    return "\n".join([f'!!! note "{title}"', "", *("    " + line for line in text.splitlines()), ""])


def _claim_texts() -> dict[str, str]:
    """The claims' wording, from their registry."""
    from subaudit.reporting.claims import CLAIMS

    return {str(k): c.text for k, c in CLAIMS.items()}


def render_figures() -> str:
    """The workflow's figures with their numbers in both texts of the paper."""
    from subaudit.reporting.figure_registry import FIGURES

    rows = [(f"`results/figures/{f.name}.*`", f.iclr or "beyond the paper", f.arxiv or "", f.caption)
            for f in FIGURES.values()]
    return "\n".join(_table(["file", "ICLR 2026 text", "arXiv text", "what it shows"], rows)) + "\n"


def render_claims() -> str:
    """The claims of the registry, numbered: the paper's, then those beyond it."""
    from subaudit.reporting.claims import CLAIMS

    paper = [c for c in CLAIMS.values() if not c.beyond]
    beyond = [c for c in CLAIMS.values() if c.beyond]
    lines = [f"The paper's {len(paper)} claims:", ""]
    lines += [f"{c.number}. {c.text} ({', '.join(c.figures)});" for c in paper]
    if beyond:
        lines += ["", f"and {len(beyond)} beyond it:", ""]
        lines += [f"{c.number}. {c.text} ({', '.join(c.figures)})." for c in beyond]
    return "\n".join(lines) + "\n"


def render_report(path: Path, claim_texts: Mapping[str, str] | None = None) -> str:
    """The verdicts and final-step audits of a ``report.json`` (``reporting.report`` metrics)."""
    if not path.is_file():
        return _note("No results in this checkout",
                     "This section is generated from `results/report.json`, which the default run\n"
                     "writes: run `make run` (or `.venv/bin/snakemake --cores all results/report.md`),\n"
                     "then rebuild the site.")
    data = json.loads(path.read_text())
    texts = _claim_texts() if claim_texts is None else claim_texts
    estimator = data.get("estimator", "?")
    lines = [f"Generated from `{path.parent.name}/{path.name}` at build time; estimator `{estimator}`, final step. "
             f"{data.get('supported', 0)} claims supported, {data.get('cannot_tell', 0)} cannot tell, "
             f"{data.get('refuted', 0)} refuted.", "", "### Verdicts", ""]
    rows = []
    for number, claim in sorted(data.get("claims", {}).items(), key=lambda kv: int(kv[0])):
        numbers = "; ".join(f"{k} = {_fmt(v)}" for k, v in claim.items() if k not in ("verdict", "code"))
        rows.append((number, texts.get(number, ""), claim.get("verdict", "?"), numbers))
    lines += _table(["#", "claim", "verdict", "deciding numbers"], rows)
    for figure, audits in data.get("final_step", {}).items():
        if not audits:
            continue
        lines += [f"### {figure}", ""]
        panels: dict[str, dict[str, Any]] = {}
        scenarios: list[str] = []
        for key, value in audits.items():
            panel, _, scenario = key.rpartition("_")
            panels.setdefault(panel, {})[scenario] = value
            if scenario not in scenarios:
                scenarios.append(scenario)
        lines += _table(["panel", *scenarios],
                        ([panel, *(vals.get(s, "") for s in scenarios)] for panel, vals in panels.items()))
    return "\n".join(lines)


def render_bench(path: Path) -> str:
    """A ``subaudit bench --json`` result as tables."""
    if not path.is_file():
        return _note("No benchmark in this checkout",
                     "This section is generated from `logs/bench.json`:\n"
                     "`mkdir -p logs && .venv/bin/subaudit bench --quick --json > logs/bench.json`\n"
                     "(about a minute), then rebuild the site.")
    data = json.loads(path.read_text())
    machine = data.get("machine", {})
    lines = [f"Generated from `{path.name}` at build time: processor `{machine.get('processor', '?')}`, "
             f"{machine.get('torch_threads', '?')} threads, torch {machine.get('torch', '?')}, "
             f"device {machine.get('device', '?')}, float32 matmul "
             f"{_fmt(data.get('matmul_gflops'))} GFLOP/s{' (`--quick`)' if data.get('quick') else ''}.", ""]
    rows = []
    for w in data.get("workloads", []):
        sizes = " -> ".join(map(str, w.get("sizes", [])))
        rows.append((w.get("name", ""), sizes, w.get("n", ""), w.get("q", ""), w.get("runs", ""),
                     w.get("threads", machine.get("torch_threads", "")), w.get("basis", ""),
                     w.get("batching", ""), f"{w.get('engine_model_steps_per_s', 0):,.0f}/s",
                     f"{w.get('opacus_model_steps_per_s', 0):,.1f}/s",
                     f"{w.get('speedup_vs_opacus', 0):.0f}x", f"{w.get('fraction_of_matmul', 0):.0%}",
                     f"{w.get('randomness_share', 0):.0%}"))
    lines += _table(["workload", "sizes", "n", "q", "runs", "threads", "basis", "batching", "engine", "Opacus",
                     "speed-up", "of matmul", "drawing"], rows)
    goals = data.get("goals", [])
    if goals:
        lines += _table(["goal", "target", "measured", "met"],
                        ((g.get("goal"), g.get("target"), g.get("measured"), "yes" if g.get("met") else "no")
                         for g in goals))
    return "\n".join(lines)


def render_job_seconds(folder: Path) -> str:
    """Job-seconds per kind of heavy job from Snakemake's ``benchmark:`` files; the peak memory
    of a job the warm worker ran from the line it left in the job's log (``logs/X.log`` beside
    ``logs/benchmarks/X.tsv``: the benchmark measured the process that waited for it)."""
    from subaudit.pipeline.warm import job_usage

    files = sorted(folder.rglob("*.tsv")) if folder.is_dir() else []
    if not files:
        return _note("No workflow benchmarks in this checkout",
                     "This section is generated from `logs/benchmarks/`, which every heavy rule of\n"
                     "the workflow writes (`benchmark:`): run `make run`, then rebuild the site.")
    kinds: dict[str, list[float]] = {}
    for f in files:
        usage = job_usage(folder.parent / f.relative_to(folder).with_suffix(".log")) or {}
        with f.open(newline="") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                seconds = float(row.get("s") or 0)
                rss = max(float(row.get("max_rss") or 0), usage.get("max_rss_mb", 0.0))
                k = kinds.setdefault(str(f.relative_to(folder).parent / f.stem.split("_")[0]), [0, 0.0, 0.0])
                k[0] += 1
                k[1] += seconds
                k[2] = max(k[2], rss)
    total = sum(v[1] for v in kinds.values())
    lines = [f"Generated at build time from {len(files)} files under `logs/benchmarks/`: "
             f"{total:,.0f} job-seconds in all.", ""]
    rows = sorted(kinds.items(), key=lambda kv: -kv[1][1])
    lines += _table(["jobs (folder/kind)", "jobs", "job-seconds", "share", "largest peak memory (MB)"],
                    ((k, int(n), f"{s:,.0f}", f"{s / total:.0%}" if total else "-", f"{rss:,.0f}")
                     for k, (n, s, rss) in rows))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Findings: what a run's figure CSVs say, in a sentence or a small table
# --------------------------------------------------------------------------------------

#: The figures whose CSVs hold per-step audits of the base settings (image, tabular, text).
FINAL_STEP_FIGURES = ("fig3", "fig4", "figA6")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _source(folder: Path) -> str:
    whose = "the default run whose numbers git keeps" if folder.parent.name == "reference" else "this checkout's run"
    return f"Generated at build time from `{folder.parent.name}/{folder.name}/` ({whose})"


def final_step_audits(folder: Path) -> dict[tuple[str, float], dict[str, float]]:
    """(experiment, q) -> scenario (or ``eps_AR``/``eps_S``) -> epsilon at the last step, from
    the per-step figures' CSVs (the pooled bound of the figures' estimator)."""
    out: dict[tuple[str, float], dict[str, float]] = {}
    for name in FINAL_STEP_FIGURES:
        path = folder / f"{name}.csv"
        if not path.is_file():
            continue
        rows = _rows(path)
        last = {}
        for r in rows:
            key = (r["experiment"], float(r["q"]))
            last[key] = max(last.get(key, 0), int(float(r["step"])))
        for r in rows:
            key = (r["experiment"], float(r["q"]))
            if int(float(r["step"])) == last[key]:
                column = r["scenario"] or ("eps_AR" if r["series"].startswith("eps_AR") else "eps_S")
                out.setdefault(key, {})[column] = float(r["epsilon"])
    return out


def render_scenario_finding(folder: Path, subject: str) -> str:
    """``subject``'s final-step bound beside S2, S4, the other input scenarios and the
    accountants, per setting of the per-step figures, and how often it lies below each."""
    audits = final_step_audits(folder)
    if not audits:
        return _note("No figures in this checkout", "Run `make run`, then rebuild the site.")
    columns = [c for c in ("S2", "S3", "S4", "S5", "S6", "S7", "eps_AR", "eps_S")
               if any(c in v for v in audits.values())]
    settings = [(k, v) for k, v in sorted(audits.items()) if subject in v]
    rows = [(e, _fmt(q), *(v.get(c, "") for c in columns)) for (e, q), v in settings]
    counts = []
    for c in columns:
        if c == subject:
            continue
        pairs = [v for _, v in settings if c in v]
        if pairs:
            below = sum(v[subject] < v[c] for v in pairs)
            counts.append(f"below {c} in {below} of {len(pairs)}")
    text = (f"{_source(folder)}, the last step of {', '.join(FINAL_STEP_FIGURES)}: {subject}'s bound was "
            + ", ".join(counts) + " settings.")
    return "\n".join([text, "", *_table(["experiment", "q", *columns], rows)])


def render_one_run_finding(folder: Path) -> str:
    """The one-run audits' best bound as a share of the R-run bound of the same canary family,
    per canary kind (``one-run.csv``)."""
    path = folder / "one-run.csv"
    if not path.is_file():
        return _note("No figures in this checkout", "Run `make run`, then rebuild the site.")
    best: dict[tuple[str, str, str], float] = {}
    rrun: dict[tuple[str, str, str], float] = {}
    for r in _rows(path):
        key = (r["experiment"], r["kind"], r["q"])
        if r["series"].startswith("one-run audit"):
            best[key] = max(best.get(key, 0.0), float(r["epsilon"]))
        elif r["series"].startswith("R-run audit"):
            rrun[key] = float(r["epsilon"])
    parts = []
    for kind in dict.fromkeys(k for _, k, _ in best):
        keys = [k for k in best if k[1] == kind and k in rrun]
        shares = [best[k] / rrun[k] for k in keys]
        pairs = "; ".join(f"{_fmt(best[k])} of {_fmt(rrun[k])} at q = {_fmt(float(k[2]))}" for k in keys)
        parts.append(f"`{kind}` canaries reached {min(shares):.0%} to {max(shares):.0%} of the R-run bound "
                     f"({pairs})")
    return (f"{_source(folder)}: from one training, " + "; ".join(parts) + ". (The R-run bound here is the "
            "mean over repeats, as in the figure.)\n")


def render_reconstruction_finding(folder: Path) -> str:
    """How far each prediction of the trap units' outcomes lies from the observed counts
    (``reconstruction.csv``: the sum of absolute differences over the three outcomes)."""
    path = folder / "reconstruction.csv"
    if not path.is_file():
        return _note("No figures in this checkout", "Run `make run`, then rebuild the site.")
    counts: dict[str, dict[str, float]] = {}
    for r in _rows(path):
        if "recovered" not in r["outcome"]:
            counts.setdefault(r["source"], {})[r["outcome"]] = float(r["units"])
    observed = counts.pop("observed")
    off = {source: sum(abs(v[o] - observed[o]) for o in observed) for source, v in counts.items()}
    closest = min(off, key=off.get)
    listed = "; ".join(f"{source}: off by {n:.0f} units in all" for source, n in off.items())
    return (f"{_source(folder)}: of {sum(observed.values()):.0f} units, "
            + ", ".join(f"{n:.0f} {o}" for o, n in observed.items())
            + f" observed; {listed}. The closest: {closest}.\n")


# --------------------------------------------------------------------------------------
#: Canary counts of the one-run limits' table (the Steinke cap's delta term makes 10^6 slow).
LIMIT_COUNTS = (100, 1_000, 10_000, 100_000)


def render_one_run_limits(delta: float = 1e-5, alpha: float = 0.05) -> str:
    """Perfect guessing of m canaries, per m: the limit of any valid test (k = 2 and 16), and
    what the two procedures report from it with their search over guess counts."""
    from subaudit.estimation.guesses import default_guess_grid
    from subaudit.estimation.one_run import perfect_guess_limit
    from subaudit.estimation.procedures import perfect_epsilon

    rows = [(f"{m:,}", perfect_guess_limit(m, delta, alpha), perfect_guess_limit(m, delta, alpha, 16),
             perfect_epsilon("mahloujifar", m, delta, alpha), perfect_epsilon("steinke", m, delta, alpha))
            for m in LIMIT_COUNTS]
    header = ["canaries m", "limit of any valid test (k = 2)", "k = 16", "mahloujifar (f-DP), searched",
              "steinke, searched"]
    intro = (f"Every guess right, delta = {delta:g}, confidence {1 - alpha:g}; 'searched': the "
             f"procedures' Bonferroni search over the {len(default_guess_grid(max(LIMIT_COUNTS)))} guess "
             "counts of `default_guess_grid`.")
    return "\n".join([intro, "", *_table(header, rows)])


# MkDocs entry points
# --------------------------------------------------------------------------------------


def renderers(root: Path) -> dict[str, Callable[[str], str]]:
    """Marker name -> function of the marker's argument, for a repository at ``root``."""
    return {
        "cli": lambda _arg: render_cli(_cli_parser()),
        "run": render_run,
        "params": lambda arg: render_params(root / "params.yaml", arg),
        # this checkout's run, else the default's reference results kept in git
        "report": lambda _arg: render_report(next((p for p in (root / "results" / "report.json",
                                                              root / "reference" / "report.json") if p.is_file()),
                                                  root / "results" / "report.json")),
        "bench": lambda _arg: render_bench(root / "logs" / "bench.json"),
        "job-seconds": lambda _arg: render_job_seconds(root / "logs" / "benchmarks"),
        "claims": lambda _arg: render_claims(),
        "one-run-limits": lambda _arg: render_one_run_limits(),
        "figures": lambda _arg: render_figures(),
        # findings of this checkout's run, else of the default's reference figures kept in git
        "finding": lambda arg: FINDINGS[arg.split()[0]](_figures_folder(root), *arg.split()[1:]),
    }


#: ``<!-- subaudit:finding NAME [ARG] -->``: what the run's figure CSVs say (``finding`` marker).
FINDINGS: dict[str, Callable[..., str]] = {
    "scenario": render_scenario_finding,
    "one-run": render_one_run_finding,
    "reconstruction": render_reconstruction_finding,
}


def _figures_folder(root: Path) -> Path:
    """``results/figures`` of this checkout's run when it has one, else ``reference/figures``."""
    mine = root / "results" / "figures"
    return mine if (mine / "fig3.csv").is_file() else root / "reference" / "figures"


def expand(markdown: str, root: Path) -> str:
    """Replace every marker in ``markdown``; an unknown marker is an error, not a silent gap."""
    table = renderers(root)

    def one(m: re.Match) -> str:
        if m.group(1) not in table:
            raise KeyError(f"unknown docs marker {m.group(0)!r}; known: {sorted(table)}")
        return table[m.group(1)](m.group(2) or "")

    return MARKER.sub(one, markdown)


def on_config(config: Any) -> Any:
    """Make ``src/`` importable, so the build documents this checkout's code, and resolve
    snippet includes (``--8<--``) from the repository root wherever mkdocs runs."""
    root = Path(config.config_file_path).resolve().parent
    if str(root / "src") not in sys.path:
        sys.path.insert(0, str(root / "src"))
    snippets = config.mdx_configs.get("pymdownx.snippets")
    if snippets is not None:
        snippets["base_path"] = [str(root)]
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return expand(markdown, Path(config.config_file_path).parent)


# --------------------------------------------------------------------------------------
# Griffe: Sphinx roles in docstrings
# --------------------------------------------------------------------------------------

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|data|attr|meth|obj|exc|const):`~?([^`]+)`")
CODE_SPAN = re.compile(r"(`+).*?\1")


def _escape_references(line: str) -> str:
    """``a[i][j]`` outside code is a Markdown reference link to ``j``, which autorefs cannot
    resolve (an error under --strict): escape the second bracket, outside code spans."""
    out, last = [], 0
    for m in CODE_SPAN.finditer(line):
        out += [line[last:m.start()].replace("][", "]\\["), m.group(0)]
        last = m.end()
    return "".join(out + [line[last:].replace("][", "]\\[")])


def markdown_docstring(text: str) -> str:
    """A docstring of free text with Sphinx roles, made safe to render as Markdown: roles
    become code spans, and reference-link brackets are escaped except in indented code."""
    text = ROLE.sub(r"`\1`", text)
    return "\n".join(line if line.startswith("    ") else _escape_references(line)
                     for line in text.split("\n"))


class RstRoles(griffe.Extension):
    """Docstrings rendered as Markdown (mkdocstrings' ``docstring_style: null``), through
    :func:`markdown_docstring`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
