"""subaudit inside the tools practitioners already use.

* :mod:`~subaudit.integrations.opacus`: subaudit's substitute and add/remove accountants
  registered with Opacus (``PrivacyEngine(accountant="substitute")``); the public import
  path is ``import subaudit.opacus``;
* :mod:`~subaudit.integrations.audit`: one-run audits of a user's own Opacus training
  (:class:`~subaudit.integrations.audit.OneRunAudit`, both games, input and gradient canaries);
* :mod:`~subaudit.integrations.networks`: the networks the deep-network audits train with
  Opacus (Opacus' MNIST CNN, WRN-16-4);
* :mod:`~subaudit.integrations.deep`: the deep-network audit experiments of the workflow
  (a CNN trained from scratch and a pretrained one fine-tuned, every canary kind of
  :mod:`subaudit.scenarios.deep_canaries`, both games).

May import: :mod:`subaudit.scenarios`, :mod:`subaudit.estimation`, :mod:`subaudit.accounting`,
:mod:`subaudit.data` and the base modules, and the integrated library.
"""
