"""The build is the integration test: a failing example or a Sphinx warning fails it.

Two builds of a copy of the site, each executing only its extra gallery scripts (the rest of
the site is built around them as usual): one with two scripts that raise, one with a script
whose only fault is two broken references, so that the warnings alone fail it (a failing
example ends the build before Sphinx counts its warnings).
"""

from __future__ import annotations

import re

import pytest
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


WRONG_SOLUTION = '''"""
A page whose solution is wrong
==============================

.. prerequisites::
   :assumes: nothing

Written by the test suite.
"""

# %%
# Exercises
# ---------
#
# 1. **Double.** What is twice 21?
#
# .. solution 1

answer = 2 * 21
assert answer == 41
'''

#: The pages of the build whose examples fail, each in its own way, in one build of a copy of
#: the site (a build of the copy takes most of a minute: one is enough for the two).
FAILING = {
    "99_raises_in_second_cell.py": RAISES,
    "1_foundations/99_wrong_solution.py": WRONG_SOLUTION,
}


@pytest.fixture(scope="module")
def failed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("failing")
    return build_site_copy(tmp, FAILING, pattern=r"99_")


@pytest.fixture(scope="module")
def warned(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("warning")
    return build_site_copy(tmp, {"99_broken_references.py": BROKEN_REFERENCES}, pattern=r"99_")


# The tests that read one build run on one xdist worker (--dist loadgroup), which builds it once.
@pytest.mark.xdist_group("failing-build")
def test_an_example_that_raises_fails_the_build_and_is_named(failed):
    name = "99_raises_in_second_cell.py"
    assert failed.returncode != 0, failed.output[-3000:]
    # sphinx-gallery's summary names the script and shows its traceback.
    assert re.search(rf"{re.escape(name)} failed leaving traceback", failed.output), failed.output[
        -3000:
    ]
    assert "RuntimeError: deliberate failure in the second cell" in failed.output
    assert "Error 2" in failed.output or "Error 1" in failed.output  # make reports the failure


@pytest.mark.xdist_group("warning-build")
def test_a_sphinx_warning_fails_the_build(warned):
    output = warned.output
    assert warned.returncode != 0, output[-3000:]
    assert "failed leaving traceback" not in output, "an example failed, not only a warning"
    assert re.search(r"\d+ warnings? \(with warnings treated as errors\)", output), output[-3000:]
    # Both broken references are reported (--keep-going), each with the page it is on.
    assert re.search(r"99_broken_references\.rst.*undefined label", output), output[-3000:]
    assert re.search(
        r"99_broken_references\.rst.*reference target not found: attention\.no_such_function",
        output,
    ), output[-3000:]


@pytest.mark.xdist_group("failing-build")
def test_a_solution_whose_assert_fails_fails_the_build(failed):
    # A page in a part of the gallery, as the pages are.
    assert re.search(r"99_wrong_solution\.py failed leaving traceback", failed.output)
    assert "assert answer == 41" in failed.output
