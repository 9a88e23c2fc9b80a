"""The build is the integration test: a failing example or a Sphinx warning fails it.

One build of a copy of the site, with three extra gallery scripts that each fail in their own
way, executes only those scripts; the rest of the site is built around them as usual. A failing
example ends that build before Sphinx counts its warnings, so that the warnings alone fail the
build is shown on a one-page project built with the Makefile's own Sphinx options.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from docbuild import ROOT, build_site_copy

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

#: The pages of the failing build, each failing in its own way, in one build of a copy of the
#: site (a build of the copy takes a minute or more: one is enough for the three).
FAILING = {
    "99_raises_in_second_cell.py": RAISES,
    "99_broken_references.py": BROKEN_REFERENCES,
    "1_foundations/99_wrong_solution.py": WRONG_SOLUTION,
}


@pytest.fixture(scope="module")
def failed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("failing")
    return build_site_copy(tmp, FAILING, pattern=r"99_")


def makefile_sphinx_options() -> list[str]:
    """The options ``make html`` gives Sphinx (the Makefile's SPHINXBUILD), without the
    configuration directory and the paths."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    line = re.search(r"^SPHINXBUILD := \$\(PY\) -m sphinx (.*)$", makefile, re.MULTILINE)
    assert line, "the Makefile has no SPHINXBUILD line"
    words = line.group(1).split()
    options = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "-c":
            skip = True  # the project's configuration: the test brings its own
        elif word.startswith("-"):
            options.append(word)
        elif options and options[-1] == "-b":
            options.append(word)
    return options


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


def test_a_sphinx_warning_alone_fails_the_build(tmp_path):
    options = makefile_sphinx_options()
    assert "-W" in options and "--keep-going" in options, options
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text("", encoding="utf-8")
    (src / "index.rst").write_text(
        "Page\n====\n\nA link to :ref:`a-label-that-does-not-exist`.\n", encoding="utf-8"
    )
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", *options, str(src), str(tmp_path / "out")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "1 warning (with warnings treated as errors)" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.xdist_group("failing-build")
def test_broken_references_are_reported_with_their_page(failed):
    # Both broken references are reported (--keep-going), each with the page it is on.
    output = failed.output
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
