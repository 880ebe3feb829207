"""The accounting package's face (subaudit.accounting): its names resolve on first use."""

from __future__ import annotations

import ast
from pathlib import Path

import subaudit.accounting as accounting


def test_every_public_name_resolves_to_its_home_module_on_first_use():
    """``subaudit.accounting.X`` is the object of the module the lazy map names (PEP 562: the
    Snakefile imports the package without SciPy), and the literal lists that linters and type
    checkers read (``__all__``, the TYPE_CHECKING imports) name the same names, from the same
    modules, as the lazy map."""
    for name in accounting.__all__:
        module = __import__(f"subaudit.accounting.{accounting._HOME[name]}", fromlist=[name])
        assert getattr(accounting, name) is getattr(module, name)
    assert sorted(accounting._HOME) == sorted(accounting.__all__)
    tree = ast.parse(Path(accounting.__file__).read_text())
    typed = {alias.name: node.module.removeprefix("subaudit.accounting.")
             for block in tree.body if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
             for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert typed == accounting._HOME
