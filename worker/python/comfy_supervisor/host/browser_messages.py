"""A pack's messages to the browser (its PromptServer.send_sync in its worker), sent on by
this ComfyUI's PromptServer as the pack would send them in one process, within bounds.

The worker is the pack's code, and upstream's queue to the browser has no bound: before,
100,000 messages, and three of 60 MiB, were all forwarded. Here, per pack (BrowserGate):

- a message whose frame on the call socket is over `max_bytes` is refused;
- at most `per_second` messages and `bytes_per_second` bytes a second pass, a second's
  worth at once (a token bucket each): past either, messages are refused until it refills;
- a message without an event name of at most MAX_EVENT_NAME characters, or with a sid
  that is not a string, is refused as malformed.

The supervisor's config sets the limits (comfyui.browser_messages, told in the packs
event; Limits.from_event); config.hpp's BrowserMessageLimits says why the defaults are
what they are. Each refusal is counted, and said in a line per pack and period: how many
were refused in the period, of which kind, and how many in all. A period begins at a
refusal not said yet and ends FIRST_LINE_AFTER_S later, or LOG_EVERY_S after the last line
if that is later: a lone refusal is said within a second, and a flood costs a line every
LOG_EVERY_S, each with its period's real count, never a first line of "refused 1" that
stands for the whole flood until the next.
"""

import logging
import threading
import time

from ..upstream.comfyui_startup import prompt_server

log = logging.getLogger("comfy_supervisor")

MAX_EVENT_NAME = 200      # a browser message's event name from a worker, at most
FIRST_LINE_AFTER_S = 1.0  # a period's line comes this long after its first refusal at the soonest
LOG_EVERY_S = 10.0        # and this long after the pack's last line at the soonest


class Limits:
    """What passes of one pack's messages; the defaults are config.hpp's."""

    KEYS = ("max_bytes", "per_second", "bytes_per_second")

    def __init__(self, max_bytes=1 << 20, per_second=100, bytes_per_second=16 << 20):
        self.max_bytes, self.per_second, self.bytes_per_second = max_bytes, per_second, bytes_per_second

    @classmethod
    def from_event(cls, given):
        """The limits the supervisor's packs event gives; a default for each it does not
        (an older supervisor, or a value that is not a positive whole number)."""
        limits = cls()
        for key in cls.KEYS if isinstance(given, dict) else ():
            value = given.get(key)
            if type(value) is int and value > 0:
                setattr(limits, key, value)
        return limits


class _Bucket:
    """`rate` a second, at most `rate` saved up."""

    def __init__(self, rate, now):
        self.rate, self.level, self.at = rate, float(rate), now

    def refill(self, now):
        self.level = min(float(self.rate), self.level + (now - self.at) * self.rate)
        self.at = now


class BrowserGate:
    """One pack's messages to the browser: what passes of them, and the refusals counted."""

    REASONS = ("size", "rate", "malformed")

    def __init__(self, pack, limits=None, clock=time.monotonic):
        self.pack = pack
        self.clock = clock
        self.lock = threading.Lock()  # between the thread reading the pack's session and the line's timer
        self.refused = dict.fromkeys(self.REASONS, 0)  # since the pack's first life
        self.unsaid = dict.fromkeys(self.REASONS, 0)   # in the period now: since the last line said
        self.period_began = None  # the period's first refusal
        self.said_at = None       # when the last line was said
        self.line_due = False     # the period's line is scheduled
        self.set_limits(limits or Limits())

    def set_limits(self, limits):
        with self.lock:
            self.limits = limits
            now = self.clock()
            self.messages = _Bucket(limits.per_second, now)
            self.bytes = _Bucket(limits.bytes_per_second, now)

    def forward(self, message, nbytes):
        """Sends `message` (a "ui" message of the pack's, whose frame was `nbytes`) to the
        browser through this ComfyUI's PromptServer, or refuses it."""
        event, sid = message.get("event"), message.get("sid")
        with self.lock:
            if not isinstance(event, str) or len(event) > MAX_EVENT_NAME or not (sid is None or isinstance(sid, str)):
                reason = "malformed"
            elif nbytes > self.limits.max_bytes:
                reason = "size"
            else:
                now = self.clock()
                self.messages.refill(now)
                self.bytes.refill(now)
                if self.messages.level < 1 or self.bytes.level < nbytes:
                    reason = "rate"
                else:
                    self.messages.level -= 1
                    self.bytes.level -= nbytes
                    reason = None
            if reason is not None:
                self.refuse(reason)
                return
        server = prompt_server()
        if server is not None:
            server.send_sync(event, message.get("data"), sid)

    def refuse(self, reason):
        """Counts a refusal (the lock held); the first of a period schedules the period's line."""
        self.refused[reason] += 1
        self.unsaid[reason] += 1
        if self.line_due:
            return
        now = self.clock()
        self.period_began = now
        due = now + FIRST_LINE_AFTER_S
        if self.said_at is not None:
            due = max(due, self.said_at + LOG_EVERY_S)
        self.line_due = True
        timer = threading.Timer(due - now, self.say_due)
        timer.daemon = True
        timer.start()

    def say_due(self):
        with self.lock:
            self.line_due = False
            self.say()

    def say(self):
        """The period's line: what was refused in it, and in all (the lock held)."""
        count = sum(self.unsaid.values())
        if not count:
            return
        now = self.clock()
        kinds = {"size": f"{self.unsaid['size']} over {_size(self.limits.max_bytes)}",
                 "rate": f"{self.unsaid['rate']} past {self.limits.per_second} messages or "
                         f"{_size(self.limits.bytes_per_second)} a second",
                 "malformed": f"{self.unsaid['malformed']} malformed"}
        why = ", ".join(kinds[reason] for reason in self.REASONS if self.unsaid[reason])
        log.warning("comfy-supervisor: pack %s: refused %d of its messages to the browser in the last %.1f s (%s), "
                    "%d in all since it started: raise comfyui.browser_messages in the supervisor's config if the "
                    "pack needs more", self.pack, count, now - self.period_began, why, sum(self.refused.values()))
        self.unsaid = dict.fromkeys(self.REASONS, 0)
        self.said_at = now


def _size(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} bytes"
