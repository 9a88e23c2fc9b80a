"""Unit tests of the ``attention`` package (a package, so its helpers import as ``.helpers``)."""
