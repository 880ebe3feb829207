"""Privacy accounting for DP-SGD (Poisson-sampled Gaussian) under three adjacencies.

Clip norm C = 1 without loss of generality, noise multiplier ``sigma``, Poisson rate
``q`` in (0, 1], ``steps`` compositions, target ``delta``.

* ``"substitute"`` (replace one record): the pair
  P = q N(+1, s^2) + (1 - q) N(0, s^2) vs Q = q N(-1, s^2) + (1 - q) N(0, s^2), s = sigma.
  The pair is symmetric (x -> -x swaps P and Q), so one privacy-loss random variable (PRV)
  covers both directions; its inverse loss has a closed form (:mod:`.prv`). At q = 1 it
  is the Gaussian PRV of sensitivity 2.
* ``"add-remove"``: the worse of the "remove" direction (q N(1) + (1-q) N(0) vs N(0),
  prv-accountant's ``PoissonSubsampledGaussianMechanism``) and the "add" direction
  (N(0) vs the mixture), each self-composed ``steps`` times; dp-accounting's
  ``ADD_OR_REMOVE_ONE`` does the same.
  Finding: over 458 settings (q in {0.99, 0.9, 0.5, 0.25, 0.0625, 0.01}, T in
  {1, 10, 100, 500, 2000}, sigma in {0.5 .. 30}, delta in {1e-5, 1e-8}; epsilon from
  5e-4 to 600) the add direction never gave a larger epsilon than the remove direction.
  The two come within 1e-4 of each other only where they nearly coincide (q -> 1, or
  sigma so large that epsilon is tiny). There is no proof of dominance for all
  parameters, and a valid add/remove guarantee needs both directions, so for q < 1 both
  are composed and the larger epsilon is returned (this roughly doubles the cost); at
  q = 1 both are the same Gaussian and one is computed.
  tests/accounting/test_composition.py re-checks dominance on a 12-point grid.
* ``"group"`` (Theorem 4.1 of the paper): a substitution is a removal plus an addition,
  so eps_S = 2 eps_AR(delta') with delta' solving (1 + exp(eps_AR(delta'))) delta' =
  delta. An upper bound on the substitute epsilon, never tighter than it.

Numerics. prv-accountant's machinery is used (the ``PrivacyRandomVariable`` interface,
``compute_safe_domain_size`` for the RDP based domain, ``Domain``, the ``Fourier``
composer, ``DiscretePrivacyRandomVariable`` and the error bounds of Gopi et al. 2021,
Thm 5.5), with changes for speed, and for accuracy at small delta / large epsilon, each
described in the module that makes it. Modules, one concept each (bottom first; each
imports only those above it):

* :mod:`.prv`: the PRVs (:class:`SubstitutePoissonGaussian`,
  :class:`RemovePoissonGaussian`, :class:`AddPoissonGaussian`), closed-form CDFs, RDP
  and mean by quadrature, :data:`Segment`;
* :mod:`.rdp`: the RDP upper bound on epsilon (first-pass scale, brackets);
* :mod:`.discretisation`: domain sizing (both tails), mesh, cell-centred PMF,
  :class:`AccountingRangeError`;
* :mod:`.composition`: Fourier composition (homogeneous and over a history of
  segments), round-off control, epsilon(delta) curves, caches (:func:`clear_cache`);
* :mod:`.error_budget`: eps_error and delta_error relative to the answer;
* :mod:`.group`: delta' of Theorem 4.1;
* :mod:`.accountant`: the public API (:class:`Epsilon`, :func:`epsilon`,
  :func:`epsilon_of_history`, :func:`epsilon_over_steps`, :func:`epsilon_profile`, :data:`ADJACENCIES`,
  :data:`ADJACENCY_ALIASES`, :func:`canonical_adjacency`);
* :mod:`.calibration`: :func:`calibrate_sigma`;
* :mod:`.gdp`: mu-GDP as (epsilon, delta) (:func:`gdp_delta`, :func:`gdp_epsilon`);
* :mod:`.statement`: the privacy statement of a training (:class:`Statement`,
  :func:`privacy_statement`);
* :mod:`.grids`: the accountants over the workflow's grids of settings (S1 calibrations,
  the ratio grid, epsilon per checkpoint), as records and tables.

Range (measured): epsilon up to several hundred (privacy losses must stay below 700),
delta down to about 1e-12 (T = 2250) for substitute/add-remove; group privacy needs
eps_AR at delta' ~ delta * exp(-eps_AR), which limits it to eps_S of about 35 at
delta = 1e-5, T = 500. Cost: 0.1-0.5 s per call on 2 cores (two directions for
add/remove), about 1 s per calibration.

Requests beyond what the numerics deliver raise :class:`AccountingRangeError`
(a ``ValueError``) with an explanation instead of returning a wrong number.

May import: only the base modules :mod:`subaudit.validation` and :mod:`subaudit.seeding`
and the third-party packages numpy, scipy, pandas (:mod:`.grids`, lazily), prv_accountant
and dp_accounting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from subaudit.accounting.accountant import (
        ADJACENCIES,
        ADJACENCY_ALIASES,
        Epsilon,
        canonical_adjacency,
        epsilon,
        epsilon_of_history,
        epsilon_over_steps,
        epsilon_profile,
    )
    from subaudit.accounting.calibration import calibrate_sigma
    from subaudit.accounting.composition import clear_cache
    from subaudit.accounting.discretisation import AccountingRangeError
    from subaudit.accounting.error_budget import MIN_EPS_ERROR, REL_DELTA_ERROR, REL_EPS_ERROR
    from subaudit.accounting.gdp import gdp_delta, gdp_epsilon
    from subaudit.accounting.prv import (
        AddPoissonGaussian,
        RemovePoissonGaussian,
        Segment,
        SubstitutePoissonGaussian,
    )
    from subaudit.accounting.statement import Statement, privacy_statement

# Where each name lives (__all__ and the imports above, literal for linters and type checkers,
# name the same ones; a test checks): they are imported on first use (PEP 562), so that importing
# subaudit.accounting.gdp (the estimators do, and the workflow's Snakefile imports those while
# Snakemake parses) does not import prv_accountant and SciPy's signal and FFT modules.
_HOME = {
    **dict.fromkeys(("ADJACENCIES", "ADJACENCY_ALIASES", "Epsilon", "canonical_adjacency", "epsilon",
                     "epsilon_of_history", "epsilon_over_steps", "epsilon_profile"), "accountant"),
    "calibrate_sigma": "calibration",
    "clear_cache": "composition",
    "AccountingRangeError": "discretisation",
    **dict.fromkeys(("MIN_EPS_ERROR", "REL_DELTA_ERROR", "REL_EPS_ERROR"), "error_budget"),
    **dict.fromkeys(("gdp_delta", "gdp_epsilon"), "gdp"),
    **dict.fromkeys(("AddPoissonGaussian", "RemovePoissonGaussian", "Segment", "SubstitutePoissonGaussian"), "prv"),
    **dict.fromkeys(("Statement", "privacy_statement"), "statement"),
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


__all__ = [
    "ADJACENCIES",
    "ADJACENCY_ALIASES",
    "MIN_EPS_ERROR",
    "REL_DELTA_ERROR",
    "REL_EPS_ERROR",
    "AccountingRangeError",
    "AddPoissonGaussian",
    "Epsilon",
    "RemovePoissonGaussian",
    "Segment",
    "Statement",
    "SubstitutePoissonGaussian",
    "calibrate_sigma",
    "canonical_adjacency",
    "clear_cache",
    "epsilon",
    "epsilon_of_history",
    "epsilon_over_steps",
    "epsilon_profile",
    "gdp_delta",
    "gdp_epsilon",
    "privacy_statement",
]
