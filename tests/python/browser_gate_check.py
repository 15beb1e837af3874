"""A pack's messages to the browser through the host's gate (host/browser_messages.py), on a
clock and timers of the check's own: what passes, and the lines that say what was refused.
Each line covers a period and says how many were refused in it and in all: a flood is never
said as "refused 1" (before, its first refusal was said at once, alone, and the flood's
count came 10 s later, or never when the host ended first).

    browser_gate_check.py
"""

import logging
import os
import sys
import threading
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "host"))
sys.path.insert(0, os.path.join(ROOT, "worker", "python"))

from check_report import CheckReport  # noqa: E402

from comfy_supervisor.host import browser_messages  # noqa: E402


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Timers:
    """threading.Timer's stand-in: what the gate schedules waits here until the check fires it."""

    def __init__(self):
        self.waiting = []  # (seconds, function)

    def __call__(self, interval, function):
        timers = self

        class Timer:
            daemon = False

            def start(self):
                timers.waiting.append((interval, function))

        return Timer()

    def fire(self):
        """The intervals of what was waiting, after running each."""
        waiting, self.waiting = self.waiting, []
        for _, function in waiting:
            function()
        return [interval for interval, _ in waiting]


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.said = []

    def emit(self, record):
        self.said.append(record.getMessage())


class PromptServer:
    def __init__(self):
        self.sent = []

    def send_sync(self, event, data, sid):
        self.sent.append(event)


def line(count, seconds, why, total):
    return (f"comfy-supervisor: pack flood: refused {count} of its messages to the browser in the last {seconds} s "
            f"({why}), {total} in all since it started: raise comfyui.browser_messages in the supervisor's config "
            f"if the pack needs more")


def main():
    report = CheckReport("browser gate")
    server = PromptServer()
    sys.modules["server"] = types.SimpleNamespace(PromptServer=types.SimpleNamespace(instance=server))
    timers = Timers()
    threading.Timer = timers
    lines = Lines()
    logging.getLogger("comfy_supervisor").addHandler(lines)
    clock = Clock()
    gate = browser_messages.BrowserGate("flood", browser_messages.Limits(), clock)
    rate = "past 100 messages or 16 MiB a second"

    # A flood at one instant: a second's worth passes, 99,900 small and 3 large are refused.
    for _ in range(100_000):
        gate.forward({"event": "flood.small", "data": {}}, 100)
    for _ in range(3):
        gate.forward({"event": "flood.big", "data": {}}, 2 << 20)
    report.check(len(server.sent) == 100 and "flood.big" not in server.sent,
                 f"a second's worth of small messages passed, no large one: {len(server.sent)} passed")
    report.check(gate.refused == {"size": 3, "rate": 99_900, "malformed": 0}, f"every refusal counted: {gate.refused}")
    report.check(lines.said == [], f"nothing said before the period ends: {lines.said}")
    clock.now = 1.0
    report.check(timers.fire() == [1.0], "the period's line was due a second after its first refusal")
    report.check(lines.said == [line(99_903, "1.0", f"3 over 1 MiB, 99900 {rate}", 99_903)],
                 f"the period's line says the flood's count: {lines.said}")

    # More of it two seconds on: its line comes 10 s after the last, with this period's count.
    clock.now = 3.0
    for _ in range(600):
        gate.forward({"event": "flood.small", "data": {}}, 100)
    report.check(len(server.sent) == 200, f"the bucket refilled: {len(server.sent)} passed in all")
    clock.now = 11.0
    report.check(timers.fire() == [8.0], "the next line was due 10 s after the last")
    report.check(lines.said[1:] == [line(500, "8.0", f"500 {rate}", 100_403)],
                 f"the second period's line says its own count and the total: {lines.said[1:]}")

    # A lone refusal after a quiet spell is said within a second.
    clock.now = 100.0
    gate.forward({"event": None}, 10)
    clock.now = 101.0
    report.check(timers.fire() == [1.0], "a lone refusal's line was due a second after it")
    report.check(lines.said[2:] == [line(1, "1.0", "1 malformed", 100_404)], f"the lone refusal's line: {lines.said[2:]}")
    report.check(timers.fire() == [] and len(lines.said) == 3, "nothing more is due or said")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
