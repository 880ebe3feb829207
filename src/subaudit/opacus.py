"""``import subaudit.opacus`` registers subaudit's accountants with Opacus.

The public entry point of :mod:`subaudit.integrations.opacus` (where the accountants are
defined): ``PrivacyEngine(accountant="substitute")`` or ``accountant="add-remove"``.
"""

from subaudit.integrations.opacus import (  # noqa: F401  (importing registers them)
    AddRemoveAccountant,
    NotPoissonWarning,
    SubstituteAccountant,
    is_poisson,
    register,
)

__all__ = ["AddRemoveAccountant", "NotPoissonWarning", "SubstituteAccountant", "is_poisson", "register"]
