#!/usr/bin/python3
"""Runs a Python unittest file under Bazel and reports each case in $XML_OUTPUT_FILE (JUnit),
so the CI summary counts test cases, not just the target."""

import importlib.util
import os
import sys
import time
import unittest
import xml.etree.ElementTree as ET


class _Recorder(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = []  # (name, seconds, outcome, message)
        self._start = 0.0

    def startTest(self, test):
        self._start = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, message=""):
        self.cases.append((test.id(), time.monotonic() - self._start, outcome, message))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)


def main(path, args):
    sys.argv = [path] + args  # the test reads its own arguments (e.g. binaries' paths)
    spec = importlib.util.spec_from_file_location("test_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = unittest.TextTestRunner(resultclass=_Recorder, verbosity=2).run(suite)
    out = os.environ.get("XML_OUTPUT_FILE")
    if out:
        failures = sum(1 for c in result.cases if c[2] in ("failure", "error"))
        suite_el = ET.Element("testsuite", name=os.path.basename(path), tests=str(len(result.cases)),
                              failures=str(failures))
        for name, seconds, outcome, message in result.cases:
            case = ET.SubElement(suite_el, "testcase", name=name, time=f"{seconds:.3f}")
            if outcome != "passed":
                ET.SubElement(case, outcome, message=message[:200]).text = message
        root = ET.Element("testsuites")
        root.append(suite_el)
        ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
