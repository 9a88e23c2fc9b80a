"""sphinx-gallery's JUnit report of the real build: every script ran, none failed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from docbuild import gallery_scripts


def test_report_lists_every_gallery_script_and_no_failure(junit_report: Path):
    suite = ET.parse(junit_report).getroot()
    cases = suite.findall("testcase")
    ran = sorted(Path(case.get("file")).name for case in cases)

    assert gallery_scripts(), "gallery/ has no scripts"
    # A build limited by ATTENTION_GALLERY_PATTERN, or one that skipped unchanged scripts,
    # lists fewer: `make test` builds clean and runs them all.
    assert ran == sorted(Path(script).name for script in gallery_scripts())
    failed = {
        Path(case.get("file")).name: case.find("failure").get("message")
        for case in cases
        if case.find("failure") is not None
    }
    assert failed == {}
    assert suite.get("failures") == "0"
    assert suite.get("errors") == "0"
