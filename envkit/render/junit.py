"""JUnit XML for CI systems (``--junit FILE``): one test case per check.

fail -> <failure>, skip -> <skipped>, warn -> a passing case whose system-out says why (a failure
with --strict), pass -> a plain case. Jenkins, GitLab and GitHub test reporters all read this shape
(testsuites/testsuite/testcase; JUnit has no single official schema: unverified against each
reporter, the shape is the one the common XSDs share, e.g. https://github.com/windyroad/JUnit-Schema).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from envkit._files import write_output
from envkit.report import Status

if TYPE_CHECKING:
    from envkit.report import Report

__all__ = ["junit_xml", "write_junit"]


def junit_xml(report: Report, *, name: str = "envkit", strict: bool = False) -> str:
    counts = report.counts()
    failures = counts["fail"] + (counts["warn"] if strict else 0)
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=name,
        hostname=report.host or "",
        tests=str(len(report.checks)),
        failures=str(failures),
        errors="0",
        skipped=str(counts["skip"]),
        time=f"{report.duration_s or 0:.3f}",
        timestamp=report.created,
    )
    for check in report.checks:
        case = ET.SubElement(suite, "testcase", classname=f"{name}.{check.area}", name=check.id)
        body = "\n".join(part for part in (check.detail, f"fix: {check.fix}" if check.fix else "") if part)
        if check.status is Status.FAIL or (strict and check.status is Status.WARN):
            failure = ET.SubElement(case, "failure", message=check.summary, type=check.status.value)
            failure.text = body
        elif check.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=check.summary)
        elif check.status is Status.WARN:
            ET.SubElement(case, "system-out").text = f"warning: {check.summary}\n{body}".strip()
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(report: Report, path: str, *, name: str = "envkit", strict: bool = False) -> None:
    """Write the JUnit XML to ``path``; InputError (exit 2) when it cannot be written there."""
    write_output(path, junit_xml(report, name=name, strict=strict), label=f"--junit {path}")
