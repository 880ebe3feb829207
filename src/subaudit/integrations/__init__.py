"""subaudit inside the tools practitioners already use.

* :mod:`~subaudit.integrations.opacus`: subaudit's substitute and add/remove accountants
  registered with Opacus (``PrivacyEngine(accountant="substitute")``); the public import
  path is ``import subaudit.opacus``.

May import: :mod:`subaudit.accounting` and the base modules, and the integrated library.
"""
