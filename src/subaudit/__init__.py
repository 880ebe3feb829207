"""subaudit: auditing differentially private training under substitute adjacency.

Packages, one concept each; imports run one way, from the top of this list down:

* :mod:`subaudit.cli` (the ``subaudit`` command), :mod:`subaudit.pipeline` (the workflow's
  vocabulary), :mod:`subaudit.reporting` (tables, figures, claims, report),
  :mod:`subaudit.integrations` (Opacus: accountants, one-run audits of Opacus training, the
  deep-network experiments; ``import subaudit.opacus``);
* :mod:`subaudit.scenarios` (S1-S7, one-run and deep-network canaries, the data-trap
  reconstruction);
* :mod:`subaudit.engine` (batched DP training), :mod:`subaudit.estimation` (lower bounds on
  epsilon from scores), :mod:`subaudit.accounting` (epsilon under add/remove, substitute and
  group privacy), :mod:`subaudit.data` (sources, splits, features);
* base modules that import nothing of the rest: :mod:`subaudit.validation` (parameter
  errors), :mod:`subaudit.seeding`, :mod:`subaudit.schedule`, :mod:`subaudit.artifacts`
  (atomic, checksummed files), :mod:`subaudit.devices`, :mod:`subaudit.job_requests` (a job's
  SLURM requests from its modelled work).

``tests/test_architecture.py`` holds the code to this layering.
"""

import os as _os

# Torch's OpenMP threads spin after each parallel region (libgomp's default) and take the
# cores the engine draws each run's random numbers on; passive threads sleep instead
# (measured on 2 cores: drawing 2.5x faster, training 1.1-1.2x).  Read when torch loads,
# so it applies where subaudit is imported first; a value already set is kept.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
