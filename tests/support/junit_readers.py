"""What three JUnit readers from PyPI make of one junit.xml, as JSON on stdout.

Used by tests/suite/junit_readers.rs with the venv it installs (xunitparser, junitparser,
junit2html). Any reader's exception fails the script, and so the test.
"""
import json
import os
import subprocess
import sys

import junitparser.xunit2 as xunit2
import xunitparser
from junit2htmlreport import parser as junit2html
from junit2htmlreport.case_result import CaseResult


def xunitparser_view(path):
    with open(path, "rb") as f:
        suite, result = xunitparser.parse(f)
    return {
        "tests": result.testsRun,
        "failures": [case.methodname for case, _ in result.failures],
        "errors": [case.methodname for case, _ in result.errors],
        "texts": {case.methodname: case.trace for case in suite},
    }


def junitparser_view(path):
    xml = xunit2.JUnitXml.fromfile(path)
    view = {"suites": [], "cases": [], "failures": [], "errors": [], "flaky": [], "traces": []}
    for suite in xml:
        view["suites"].append({"name": suite.name, "tests": suite.tests, "failures": suite.failures, "errors": suite.errors})
        for case in suite:
            view["cases"].append(case.name)
            kinds = [type(r).__name__ for r in case.result]
            if "Failure" in kinds:
                view["failures"].append(case.name)
            if "Error" in kinds:
                view["errors"].append(case.name)
            if case.flaky_failures() or case.flaky_errors():
                view["flaky"].append(case.name)
            for interim in case.flaky_failures() + case.flaky_errors() + case.rerun_failures() + case.rerun_errors():
                view["traces"].append(interim.stack_trace)
    return view


def junit2html_view(path):
    report = junit2html.Junit(path)
    cases = [case for suite in report.suites for case in suite.all()]
    page = path + ".junit2html.html"
    subprocess.run([sys.executable, "-m", "junit2htmlreport", path, page], check=True)
    return {
        "cases": len(cases),
        "passed": [case.name for case in cases if case.outcome() == CaseResult.PASSED],
        "html_bytes": os.path.getsize(page),
    }


path = sys.argv[1]
print(json.dumps({"xunitparser": xunitparser_view(path), "junitparser": junitparser_view(path), "junit2html": junit2html_view(path)}))
