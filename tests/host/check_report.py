"""The PASS and FAIL lines of the standalone checks under tests/host (scripts/gpu-check's
and CTest's), and their last line: "NAME: N passed, M failed"."""


class CheckReport:
    def __init__(self, name):
        self.name = name
        self.results = []

    def check(self, ok, line):
        self.results.append(bool(ok))
        print(f"{'PASS' if ok else 'FAIL'} {line}", flush=True)

    def finish(self):
        """The summary line; the exit status: 1 on any failure."""
        passed = sum(self.results)
        print(f"{self.name}: {passed} passed, {len(self.results) - passed} failed", flush=True)
        return 0 if all(self.results) else 1
