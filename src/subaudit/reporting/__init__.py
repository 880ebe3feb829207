"""Reporting: what a run's numbers look like to a reader.

* :mod:`~subaudit.reporting.tables`: tidy tables behind every figure (accountants beside
  audits, per step, per number of runs, utility, one-run audits), pure functions from
  records to DataFrames;
* :mod:`~subaudit.reporting.figure_registry`: the figures the workflow draws, a registry by
  name (adding a figure is an entry, a plot kind and its tests);
* :mod:`~subaudit.reporting.figures`: the plot kinds, rendered with seaborn, with labelled
  axes and units, legends naming the estimator and the adjacency, and error bars that say
  what they are; a CSV beside every figure;
* :mod:`~subaudit.reporting.claims`: the paper's claims, each judged from the figures'
  tables (a registry of :class:`~subaudit.reporting.claims.Claim`);
* :mod:`~subaudit.reporting.report`: the report (Markdown, HTML and a metrics JSON);
* :mod:`~subaudit.reporting.compare`: a run's figure CSVs and ``report.json`` against a
  reference's, number by number (``subaudit compare``).

Submodules are imported by name (``from subaudit.reporting import figures``): the figures
need matplotlib, which nothing else should load.

May import: :mod:`subaudit.accounting`, :mod:`subaudit.estimation`,
:mod:`subaudit.scenarios` (the registry of names, labels and colours) and the base modules;
not :mod:`subaudit.pipeline` nor the engine.
"""
