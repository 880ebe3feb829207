"""``import subaudit.opacus``: subaudit inside Opacus.

The public entry point of :mod:`subaudit.integrations`:

* importing it registers subaudit's accountants (:mod:`subaudit.integrations.opacus`):
  ``PrivacyEngine(accountant="substitute")`` or ``accountant="add-remove"``;
* :class:`OneRunAudit` audits a user's own Opacus training in one run, in the membership
  or the substitute game (:mod:`subaudit.integrations.audit`).
"""

from subaudit.integrations.audit import AuditError, AuditReport, OneRunAudit
from subaudit.integrations.opacus import (  # noqa: F401  (importing registers them)
    AddRemoveAccountant,
    NotPoissonWarning,
    SubstituteAccountant,
    is_poisson,
    register,
)

__all__ = ["AddRemoveAccountant", "AuditError", "AuditReport", "NotPoissonWarning", "OneRunAudit",
           "SubstituteAccountant", "is_poisson", "register"]
