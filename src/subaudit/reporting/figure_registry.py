"""The figures the workflow draws: a registry by name, each with its plot kind and inputs.

A figure is one of a few plot kinds (:data:`PLOT_KINDS`, drawn by
:mod:`subaudit.reporting.figures`) applied to one set of inputs: the S1 audit, the ratio grid, or
one natural-data experiment.  Each registered figure also says where it stands in the
paper, whose two texts number the main figures differently: the ICLR 2026 text (the
copy in shared/papers) starts with the S1 audit as Figure 1, the arXiv text one later;
file names follow the arXiv text (``fig2`` is ICLR Figure 1), the appendix figures are
numbered alike in both.  An experiment without a registered figure (a fourth one, a
user's own data) gets an epsilon-vs-step figure named ``audit-<experiment>``.

Importable without torch or matplotlib: the workflow reads it while it parses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from subaudit.validation import check_choice

__all__ = ["FIGURES", "INPUTS", "PLOT_KINDS", "Figure", "experiment_figure", "figures_for"]

#: Plot kinds and what each shows (renderers: subaudit.reporting.figures.PLOTS).
PLOT_KINDS: dict[str, str] = {
    "epsilon-vs-target": "audited and accounted epsilon against the target eps_S, one panel per q",
    "epsilon-vs-step": "audited epsilon per scenario and estimator against the training step, "
                       "with eps_S and eps_AR of the same step, one panel per q",
    "ratio-grid": "eps_S / eps_AR over a grid of q and sigma at one delta",
    "utility": "test accuracy over training with the target and with the canary",
    "one-run": "one-run audits beside the R-run audit, the ceiling and the accountants, per q",
    "ablation": "audited epsilon per scenario and estimator against the training step, one panel "
                "per value of the ablated knob (clip bound, steps, learning rate)",
    "epsilon-vs-runs": "final-step audited epsilon against the number of runs R', with the "
                       "finite-R and final-iterate ceilings and the accountants, per q",
    "reconstruction": "trap units capturing one image, several or none against the construction's "
                      "prediction, and recovered training images beside their originals",
    "deep-one-run": "one-run audits of deep networks trained with Opacus: the bound per canary kind and "
                    "procedure, one panel per case and game, beside the accountant's epsilon",
}

#: What a figure reads: the S1 audit, the ratio grid, one experiment's audits, the
#: one-run audits (params.yaml ``one_run``), the ablations (params.yaml ``ablations``) or
#: the data-trap reconstruction (params.yaml ``reconstruction``) or the deep-network audits
#: (params.yaml ``deep``).
INPUTS = ("s1", "ratio_grid", "experiment", "one_run", "ablation", "reconstruction", "deep")


@dataclass(frozen=True)
class Figure:
    """One figure: file stem, plot kind, inputs (and experiment, or the ablated knob), place
    in the paper."""

    name: str
    kind: str
    inputs: str
    caption: str
    experiment: str | None = None
    iclr: str | None = None
    arxiv: str | None = None
    knob: str | None = None

    def __post_init__(self) -> None:
        check_choice(self.kind, "figure kind", PLOT_KINDS)
        check_choice(self.inputs, "figure inputs", INPUTS)
        if (self.inputs == "experiment") != (self.experiment is not None):
            raise ValueError(f"figure {self.name}: an experiment exactly when inputs = experiment")
        if (self.kind == "ablation") != (self.knob is not None):
            raise ValueError(f"figure {self.name}: a knob exactly when kind = ablation")

    @property
    def paper(self) -> str:
        """Its number in both texts of the paper ('' for a figure not in the paper)."""
        if self.iclr is None:
            return ""
        if self.iclr == self.arxiv:
            return self.iclr
        return f"{self.iclr} (ICLR text), {self.arxiv} (arXiv text)"


#: The paper's figures, by file stem.
FIGURES: dict[str, Figure] = {f.name: f for f in (
    Figure("fig2", "epsilon-vs-target", "s1", iclr="Figure 1", arxiv="Figure 2",
           caption="S1 worst-case dataset canaries against the accountants"),
    Figure("fig3", "epsilon-vs-step", "experiment", experiment="image", iclr="Figure 2",
           arxiv="Figure 3", caption="natural-data audits, fine-tuned image head"),
    Figure("fig4", "epsilon-vs-step", "experiment", experiment="tabular", iclr="Figure 3",
           arxiv="Figure 4", caption="natural-data audits, MLP trained from scratch"),
    Figure("figA1", "utility", "experiment", experiment="image", iclr="Figure A1",
           arxiv="Figure A1", caption="test accuracy with and without the canary"),
    Figure("figA5", "ratio-grid", "ratio_grid", iclr="Figure A5", arxiv="Figure A5",
           caption="eps_S / eps_AR over q and sigma at the same delta"),
    Figure("figA6", "epsilon-vs-step", "experiment", experiment="text", iclr="Figure A6",
           arxiv="Figure A6", caption="natural-data audits, fine-tuned text head"),
    Figure("fig5", "epsilon-vs-runs", "ablation", iclr="Figure 4", arxiv="Figure 5",
           caption="effect of the number of runs R on the audit, final step"),
    Figure("figA2", "ablation", "ablation", knob="clip", iclr="Figure A2", arxiv="Figure A2",
           caption="effect of the clip bound C on the audits S2-S5"),
    Figure("figA3", "ablation", "ablation", knob="steps", iclr="Figure A3", arxiv="Figure A3",
           caption="effect of the number of steps T at a fixed q and eps_S on the audits S2-S5"),
    Figure("figA4", "ablation", "ablation", knob="lr", iclr="Figure A4", arxiv="Figure A4",
           caption="effect of the learning rate on the audits S2-S5"),
    Figure("one-run", "one-run", "one_run",
           caption="one-run audits (m canaries, one training) beside R-run audits and the ceiling"),
    Figure("reconstruction", "reconstruction", "reconstruction",
           caption="data-trap reconstruction: training images read back from a crafted model's "
                   "weight change (beyond the paper)"),
    Figure("deep-one-run", "deep-one-run", "deep",
           caption="one-run audits of deep networks trained with Opacus, shaped like Table 2 of the "
                   "canary-optimisation paper (beyond the paper)"),
)}


def experiment_figure(experiment: str) -> Figure:
    """The epsilon-vs-step figure of an experiment: the paper's, or ``audit-<experiment>``."""
    for f in FIGURES.values():
        if f.kind == "epsilon-vs-step" and f.experiment == experiment:
            return f
    return Figure(f"audit-{experiment}", "epsilon-vs-step", "experiment", experiment=experiment,
                  caption=f"natural-data audits of experiment {experiment}")


def figures_for(experiments: Iterable[str], reconstruction: bool = True, deep: bool = True) -> list[Figure]:
    """The figures of a configuration: S1, the ratio grid, the one-run audits and the
    ablations, the data-trap reconstruction (unless ``reconstruction`` is False), the
    deep-network audits (unless ``deep`` is False), each experiment's epsilon-vs-step figure,
    and the registered figures of its experiments, by name."""
    names = list(experiments)
    out = {f.name: f for f in FIGURES.values() if (f.experiment is None or f.experiment in names)
           and (reconstruction or f.inputs != "reconstruction") and (deep or f.inputs != "deep")}
    for exp in names:
        fig = experiment_figure(exp)
        out[fig.name] = fig
    return sorted(out.values(), key=lambda f: f.name)
