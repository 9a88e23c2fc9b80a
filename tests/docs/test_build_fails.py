"""The build is the integration test: a failing example or a Sphinx warning fails it.

Each test builds a copy of the site with one extra gallery script and executes only that
script, so it takes seconds; the rest of the site is built around it as usual.
"""

from __future__ import annotations

import re

from docbuild import build_site_copy

RAISES = '''"""
A page whose second cell raises
===============================

Written by the test suite: the build must fail because of this page, and say so.
"""

# %%
# The first cell runs.
value = 1 + 1

# %%
# The second cell raises.
raise RuntimeError("deliberate failure in the second cell")
'''

BROKEN_REFERENCES = '''"""
A page with broken references
=============================

Written by the test suite. It links to :ref:`a-label-that-does-not-exist` and to
:func:`attention.no_such_function`, two broken cross-references.
"""

# %%
value = 1 + 1
'''


def test_an_example_that_raises_fails_the_build_and_is_named(tmp_path):
    name = "99_raises_in_second_cell.py"
    proc = build_site_copy(tmp_path, {name: RAISES}, pattern=r"99_raises_in_second_cell")

    assert proc.returncode != 0, proc.output[-3000:]
    # sphinx-gallery's summary names the script and shows its traceback.
    assert re.search(rf"{re.escape(name)} failed leaving traceback", proc.output), proc.output[
        -3000:
    ]
    assert "RuntimeError: deliberate failure in the second cell" in proc.output
    assert "Error 2" in proc.output or "Error 1" in proc.output  # make reports the failure


def test_a_sphinx_warning_fails_the_build(tmp_path):
    name = "99_broken_references.py"
    proc = build_site_copy(tmp_path, {name: BROKEN_REFERENCES}, pattern=r"99_broken_references")

    assert proc.returncode != 0, proc.output[-3000:]
    assert "warnings treated as errors" in proc.output
    # Both broken references are reported (--keep-going), each with the page it is on.
    assert re.search(r"99_broken_references\.rst.*undefined label", proc.output), proc.output[
        -3000:
    ]
    assert re.search(
        r"99_broken_references\.rst.*reference target not found: attention\.no_such_function",
        proc.output,
    ), proc.output[-3000:]
