"""Runs the REPL's test suites and reports one JSON line per test on stdout.

    python3 run.py --suite pipe     # REPL as a subprocess (run inside the image)
    python3 run.py --suite docker   # `docker run -i` of the image (run on the host)

Each line: {"name", "status": pass|fail|error|skip, "duration_ms", "detail"}.
The last line is {"summary": {...}}. Exit code 0 when nothing failed.
"""

import argparse
import json
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SUITES = {
    "pipe": ["test_semantics", "test_output", "test_channel", "test_interrupt_streams", "test_helpers", "test_bash", "test_processes",
             "test_fileio", "test_terminal"],
    "docker": ["test_docker"],
}


class JsonLinesResult(unittest.TestResult):
    def __init__(self, out, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.out = out
        self.counts = {"pass": 0, "fail": 0, "error": 0, "skip": 0}
        self._started = {}

    def _emit(self, test, status, detail=""):
        started = self._started.pop(test.id(), time.monotonic())
        self.counts[status] += 1
        line = {"name": test.id(), "status": status,
                "duration_ms": int((time.monotonic() - started) * 1000), "detail": detail}
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()

    def startTest(self, test):
        super().startTest(test)
        self._started[test.id()] = time.monotonic()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._emit(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._emit(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._emit(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._emit(test, "skip", reason)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:  # failed subtests are reported as their own lines
            status = "fail" if issubclass(err[0], test.failureException) else "error"
            self._emit(subtest, status, self._exc_info_to_string(err, test))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._emit(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._emit(test, "fail", "unexpected success")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", choices=sorted(SUITES) + ["all"], default="pipe")
    parser.add_argument("-k", dest="patterns", action="append", default=None,
                        help="only tests whose id contains this substring")
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    loader = unittest.TestLoader()
    if args.patterns:
        loader.testNamePatterns = ["*%s*" % p for p in args.patterns]
    names = sum((SUITES[s] for s in SUITES if args.suite in (s, "all")), [])
    suite = unittest.TestSuite(loader.loadTestsFromName(n) for n in names)
    result = JsonLinesResult(sys.stdout)
    started = time.monotonic()
    suite.run(result)
    summary = dict(result.counts, duration_s=round(time.monotonic() - started, 1))
    sys.stdout.write(json.dumps({"summary": summary}) + "\n")
    sys.stderr.write("%(pass)d passed, %(fail)d failed, %(error)d errors, %(skip)d skipped in %(duration_s)ss\n" % summary)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
