"""The run's report: every figure with a table of its final-step numbers, and one verdict per
claim of the paper (:mod:`subaudit.reporting.claims`), as Markdown, HTML and a metrics JSON.

The document is built once as a list of blocks (headings, paragraphs, tables, images) and
rendered to both formats, so the two say the same.  The metrics JSON holds the verdicts as
codes (1 supported, 0 cannot tell, -1 refuted) with the numbers that decide them, and the
final-step audits, so ``dvc metrics diff`` compares two versions of a run.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from subaudit import accounting
from subaudit.estimation.ceilings import final_iterate_epsilon
from subaudit.reporting.claims import CLAIM_SCORE, CLAIMS, Evidence, final_audits, format_audit, judge_all
from subaudit.estimation import ESTIMATORS, finite_r_ceiling
from subaudit.reporting.figures import PANEL_LABELS
from subaudit.scenarios import SCENARIOS
from subaudit.reporting.tables import CEILING, EPS_AR, EPS_GROUP, EPS_S, deep_summary
from subaudit.reporting.compare import PRINTED

__all__ = ["SECTIONS", "FigureInfo", "Report", "Section", "SectionContext", "build", "final_step_table", "to_html",
           "to_markdown"]


@dataclass(frozen=True)
class FigureInfo:
    """What the report says about one figure: its name, plot kind, caption, place in the
    paper, and for a natural-data or ablation figure the knob of its panels."""

    name: str
    kind: str
    caption: str
    paper: str = ""
    panel: str = "q"


@dataclass
class Report:
    """The report's blocks (kind, content) and its metrics."""

    blocks: list[tuple[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    def add(self, kind: str, content: Any) -> None:
        self.blocks.append((kind, content))


def final_step_table(table: pd.DataFrame, estimator: str, runs: int, delta: float, alpha: float,
                     panel: str = "q") -> pd.DataFrame:
    """A natural-data or ablation figure's final step, one row per (panel value, scenario):
    the audit of ``estimator`` (its repeats pooled, beside their range) against eps_AR, eps_S by the
    accountant and by group privacy, the final-iterate ceiling (substitute) and the
    estimator's finite-R ceiling at ``runs`` runs."""
    f = final_audits(table, estimator, panel)
    finite = finite_r_ceiling(runs // 2, runs - runs // 2, delta, alpha, estimator)
    cache: dict[tuple[float, float, int], tuple[float, float]] = {}
    rows = []
    for _, r in f.iterrows():
        key = (float(r["sigma"]), float(r["q"]), int(r["step"]))
        if key not in cache:
            group = accounting.epsilon(*key, delta, "group").epsilon
            cache[key] = (group, final_iterate_epsilon(*key, delta, "substitute"))
        group, ceiling = cache[key]
        rows.append({PANEL_LABELS[panel]: f"{r[panel]:g}", "scenario": SCENARIOS[r["scenario"]].title,
                     f"audit ({estimator})": format_audit(r), "repeats": int(r["n_repeats"]),
                     "runs": int(r["n_runs"]), "eps_AR": f"{r['eps_AR']:{PRINTED}}",
                     "eps_S (accountant)": f"{r['eps_S']:{PRINTED}}",
                     "eps_S (group privacy)": f"{group:{PRINTED}}",
                     "final-iterate ceiling": f"{ceiling:{PRINTED}}",
                     f"finite-R ceiling (R = {runs})": f"{finite:{PRINTED}}",
                     "T": int(r["step"])})
    return pd.DataFrame(rows)


def _s1_table(table: pd.DataFrame, estimator: str) -> pd.DataFrame:
    acc = table[table["estimator"].fillna("") == ""].pivot_table(
        index=["q", "target_epsilon"], columns="series", values="epsilon")
    audit = table[table["estimator"] == estimator].set_index(["q", "target_epsilon"])
    ceiling = [c for c in acc.columns if c.startswith(CEILING.split("(")[0])]
    rows = []
    for (q, target), a in acc.sort_index(ascending=[False, True]).iterrows():
        au = audit.loc[(q, target)] if (q, target) in audit.index else None
        rows.append({"q": f"{q:g}", "target eps_S": f"{target:g}",
                     f"audit ({estimator})": format_audit(au) if au is not None else "n/a",
                     "eps_AR": f"{a[EPS_AR]:{PRINTED}}", "eps_S (accountant)": f"{a[EPS_S]:{PRINTED}}",
                     "eps_S (group privacy)": f"{a[EPS_GROUP]:{PRINTED}}",
                     "final-iterate ceiling": f"{a[ceiling[0]]:{PRINTED}}" if ceiling else "n/a"})
    return pd.DataFrame(rows)


def _runs_table(table: pd.DataFrame, estimator: str) -> pd.DataFrame:
    audits = table[(table["estimator"] == estimator) & (table["scenario"].fillna("") != "")]
    finite = table[table["series"].str.startswith("finite-R") & (table["estimator"] == estimator)]
    rows = []
    for (q, runs), d in audits.groupby(["q", "runs"], sort=False):
        row: dict[str, Any] = {"q": f"{q:g}", "R'": int(runs)}
        for _, r in d.sort_values("scenario").iterrows():
            row[r["scenario"]] = format_audit(r, "mean")
        ceil = finite[(finite["q"] == q) & (finite["runs"] == runs)]["epsilon"]
        row[f"finite-R ceiling ({estimator})"] = f"{float(ceil.iloc[0]):{PRINTED}}" if len(ceil) else "n/a"
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["q", "R'"], ascending=[False, True]) if rows else pd.DataFrame()


@dataclass(frozen=True)
class SectionContext:
    """What every figure's section is judged by: the report's estimator, the runs R of an
    audit, delta and alpha."""

    estimator: str
    runs: int
    delta: float
    alpha: float


Section = Callable[[Report, FigureInfo, pd.DataFrame, SectionContext], "Mapping[str, float] | None"]
"""A plot kind's part of the report under its figure: adds its paragraphs and tables to the
report from the figure's table, and returns the final-step audits it contributes to the
metrics JSON (``final_step``), or None."""


def _final_step_section(rep: Report, fig: FigureInfo, table: pd.DataFrame, c: SectionContext) -> dict[str, float]:
    audits = {f"{r[fig.panel]:g}_{r['scenario']}": float(r["epsilon"])
              for _, r in final_audits(table, c.estimator, fig.panel).iterrows()}
    rep.add("p", f"Final step, {c.estimator} estimator:")
    rep.add("table", final_step_table(table, c.estimator, c.runs, c.delta, c.alpha, fig.panel))
    return audits


def _s1_section(rep: Report, fig: FigureInfo, table: pd.DataFrame, c: SectionContext) -> None:
    rep.add("p", f"Final step, S1 canaries, {c.estimator} estimator:")
    rep.add("table", _s1_table(table, c.estimator))


def _reconstruction_section(rep: Report, fig: FigureInfo, table: pd.DataFrame, c: SectionContext) -> None:
    rep.add("p", "Trap units by outcome, observed and predicted:")
    counts = table.pivot(index="outcome", columns="source", values="units").round(1)
    rep.add("table", counts.astype(object).where(counts.notna(), "-").reset_index())


def _deep_section(rep: Report, fig: FigureInfo, table: pd.DataFrame, c: SectionContext) -> None:
    score = CLAIM_SCORE if CLAIM_SCORE in set(table["score"]) else str(table["score"].iloc[0])
    for game, sub in deep_summary(table, score).groupby("game", sort=False):
        rep.add("p", f"{game} game: one-run lower bounds, average and median over audits "
                     f"(input kinds scored by {score}; gradient canaries by their update), "
                     "beside the most their m canaries can show (cap: every guess right), the "
                     "final-iterate ceiling (gradient canaries) and the accountant's epsilon of the "
                     "same trainings; family: the trade-off curve the bound tests ((eps, delta)-DP: "
                     "valid for every mechanism; a mu-GDP test holds only for Gaussian mechanisms):")
        shown = sub.drop(columns="game").round(3)
        rep.add("table", shown.astype(object).where(shown.notna(), "-"))


def _runs_section(rep: Report, fig: FigureInfo, table: pd.DataFrame, c: SectionContext) -> None:
    rep.add("p", f"Final step against the runs R' of each audit, {c.estimator} estimator:")
    rep.add("table", _runs_table(table, c.estimator))


#: Each plot kind's section under its figure (None: the figure and its CSV only). Every kind of
#: :data:`~subaudit.reporting.figure_registry.PLOT_KINDS` is listed (a test holds it): a new
#: plot kind says here what the report shows of it.
SECTIONS: dict[str, Section | None] = {
    "epsilon-vs-target": _s1_section,
    "epsilon-vs-step": _final_step_section,
    "ablation": _final_step_section,
    "epsilon-vs-runs": _runs_section,
    "reconstruction": _reconstruction_section,
    "deep-one-run": _deep_section,
    "ratio-grid": None,
    "utility": None,
    "one-run": None,
}


def build(tables: Mapping[str, pd.DataFrame], figures: Sequence[FigureInfo], *, estimator: str,
          natural: Mapping[str, bool], ablations: Mapping[str, str], base: Mapping[str, float],
          runs: int, delta: float, alpha: float, settings: Mapping[str, Any]) -> Report:
    """The report of one run from its figures' tables (by figure name); ``base``: the ablated
    experiment's own value of each ablated knob."""
    if estimator not in ESTIMATORS or not ESTIMATORS[estimator].valid:
        raise ValueError(f"verdicts need a valid estimator, not {estimator!r}")
    verdicts = judge_all(Evidence(tables, estimator, natural, ablations, base))
    rep = Report()
    rep.add("h1", "subaudit report")
    rep.add("p", "Every number below is read from the CSV beside its figure in results/figures/; "
                 "every verdict is computed from those numbers by the rule stated with it "
                 "(subaudit.reporting.claims), never written by hand. Audits are empirical lower bounds "
                 f"on epsilon at confidence {1 - alpha:g} from the {estimator} estimator "
                 f"({ESTIMATORS[estimator].description}). An audit's bound uses all its runs, its "
                 "repeats pooled into one audit; beside it, the range of the repeats' own bounds.")
    rep.add("table", pd.DataFrame([{"setting": k, "value": str(v)} for k, v in settings.items()]))
    for heading, beyond in (("Claims of the paper", False), ("Claims beyond the paper", True)):
        mine = [v for v in verdicts if CLAIMS[v.claim].beyond == beyond]
        if mine:
            rep.add("h2", heading)
            rep.add("table", pd.DataFrame([{
                "#": v.claim, "claim": CLAIMS[v.claim].text, "verdict": v.status.upper(),
                "numbers that decide it": v.reason} for v in mine]))
    rep.add("h3", "Rules")
    rep.add("list", [f"Claim {c.number}: {c.rule}." for c in CLAIMS.values()])
    rep.add("p", "An audit is 'above' a reference when its pooled bound (valid at the stated "
                 "confidence) exceeds it, and 'below' when the 95% t interval (n - 1 degrees of "
                 "freedom) of its repeats' mean bound ends under it. Two audits are compared by the "
                 "Welch 95% t interval of the difference of their repeats' means. With one repeat "
                 "there is no interval, and a comparison that needs one cannot tell.")
    final: dict[str, Any] = {}
    context = SectionContext(estimator, runs, delta, alpha)
    rep.add("h2", "Figures")
    for fig in figures:
        if fig.name not in tables:
            continue
        rep.add("h3", f"{fig.name}: {fig.caption}" + (f" (paper: {fig.paper})" if fig.paper else ""))
        rep.add("img", (f"figures/{fig.name}.png", fig.caption))
        section = SECTIONS[fig.kind]
        if section is not None:
            audits = section(rep, fig, tables[fig.name], context)
            if audits is not None:
                final[fig.name] = audits
        rep.add("p", f"Numbers: figures/{fig.name}.csv")
    rep.metrics = {
        "claims": {str(v.claim): {"verdict": v.status, "code": v.code,
                                  **{k: _number(x) for k, x in v.numbers.items()}}
                   for v in verdicts},
        "supported": sum(v.status == "supported" for v in verdicts),
        "refuted": sum(v.status == "refuted" for v in verdicts),
        "cannot_tell": sum(v.status == "cannot tell" for v in verdicts),
        "final_step": final,
        "estimator": estimator,
    }
    return rep


def _number(x: Any) -> Any:
    return float(x) if isinstance(x, (float, np.floating)) else int(x) if isinstance(x, (int, np.integer)) else x


def _md_cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def to_markdown(report: Report) -> str:
    """The report as GitHub-flavoured Markdown."""
    out: list[str] = []
    for kind, content in report.blocks:
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + content)
        elif kind == "p":
            out.append(content)
        elif kind == "list":
            out.append("\n".join(f"- {item}" for item in content))
        elif kind == "img":
            out.append(f"![{content[1]}]({content[0]})")
        elif kind == "table":
            if content.empty:
                continue
            cols = list(content.columns)
            lines = ["| " + " | ".join(_md_cell(c) for c in cols) + " |",
                     "|" + "---|" * len(cols)]
            lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |"
                      for row in content.itertuples(index=False)]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


_CSS = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto;line-height:1.4}"
        "table{border-collapse:collapse;margin:1em 0;font-size:90%}"
        "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}th{background:#f4f4f4}"
        "img{max-width:100%}.SUPPORTED{color:#1a7f37;font-weight:bold}"
        ".REFUTED{color:#cf222e;font-weight:bold}.CANNOT{color:#9a6700;font-weight:bold}")


def to_html(report: Report) -> str:
    """The report as one HTML page (figures linked relative to results/)."""
    e = html.escape
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>subaudit report</title>",
           f"<style>{_CSS}</style></head><body>"]
    for kind, content in report.blocks:
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{e(content)}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{e(content)}</p>")
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{e(i)}</li>" for i in content) + "</ul>")
        elif kind == "img":
            out.append(f"<p><a href='{e(content[0])}'><img src='{e(content[0])}' alt='{e(content[1])}'></a></p>")
        elif kind == "table":
            if content.empty:
                continue
            head = "".join(f"<th>{e(str(c))}</th>" for c in content.columns)
            rows = []
            for row in content.itertuples(index=False):
                cells = []
                for v in row:
                    text = str(v)
                    cls = text.split()[0] if text in ("SUPPORTED", "REFUTED", "CANNOT TELL") else ""
                    cells.append(f"<td class='{cls}'>{e(text)}</td>" if cls else f"<td>{e(text)}</td>")
                rows.append("<tr>" + "".join(cells) + "</tr>")
            out.append(f"<table><tr>{head}</tr>{''.join(rows)}</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
