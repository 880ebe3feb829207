"""The figure registry: names, plot kinds with a renderer each, inputs, paper numbers."""

from __future__ import annotations

import pytest

from subaudit.reporting import figures
from subaudit.reporting.figure_registry import FIGURES, PLOT_KINDS, Figure, experiment_figure, figures_for


def test_every_plot_kind_has_a_renderer_and_says_what_the_report_shows_of_it():
    from subaudit.reporting.report import SECTIONS

    assert set(figures.PLOTS) == set(PLOT_KINDS) == set(SECTIONS)
    assert {f.kind for f in FIGURES.values()} == set(PLOT_KINDS)


def test_the_default_configuration_draws_the_papers_figures():
    names = [f.name for f in figures_for(["image", "text", "tabular"])]
    assert names == ["deep-one-run", "fig2", "fig3", "fig4", "fig5", "figA1", "figA2", "figA3", "figA4", "figA5",
                     "figA6", "one-run", "reconstruction"]
    assert FIGURES["fig5"].paper == "Figure 4 (ICLR text), Figure 5 (arXiv text)"
    assert {FIGURES[f].knob for f in ("figA2", "figA3", "figA4")} == {"clip", "steps", "lr"}
    assert FIGURES["one-run"].paper == "" == FIGURES["deep-one-run"].paper  # beyond the paper
    assert FIGURES["fig2"].paper == "Figure 1 (ICLR text), Figure 2 (arXiv text)"
    assert FIGURES["figA6"].paper == "Figure A6"
    assert {f.experiment for f in FIGURES.values() if f.inputs == "experiment"} == {
        "image", "text", "tabular"}


def test_other_experiments_get_their_own_figure():
    names = [f.name for f in figures_for(["tabular", "mine"], reconstruction=False, deep=False)]
    assert names == ["audit-mine", "fig2", "fig4", "fig5", "figA2", "figA3", "figA4", "figA5",
                     "one-run"]  # no image: no Fig A1
    mine = experiment_figure("mine")
    assert (mine.kind, mine.experiment, mine.paper) == ("epsilon-vs-step", "mine", "")
    assert experiment_figure("image") is FIGURES["fig3"]


def test_bad_entries_are_refused():
    with pytest.raises(ValueError, match="figure kind"):
        Figure("x", "pie", "s1", caption="")
    with pytest.raises(ValueError, match="an experiment exactly"):
        Figure("x", "utility", "experiment", caption="")
    with pytest.raises(ValueError, match="a knob exactly"):
        Figure("x", "ablation", "ablation", caption="")
