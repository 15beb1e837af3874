"""An installer's run: its output shown as it comes, indented under our own lines, and its
last lines kept for the line that says why it failed."""

import collections
import re
import subprocess
import sys

from .requirement import canonical

KEPT_LINES = 8


def run(command, cwd=None, env=None):
    """(exit status, last lines) of `command`, its output shown on our stdout."""
    last = collections.deque(maxlen=KEPT_LINES)
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, text=True, errors="replace") as child:
        for line in child.stdout:
            line = line.rstrip()
            if line.strip():
                print(f"    {line}", flush=True)
                last.append(line.strip())
    return child.returncode, list(last)


def tail(lines):
    return " | ".join(lines[-3:]) if lines else "no output"


def blame(lines, names):
    """The first of `names` (distribution names) the installer's output names, read from its
    last line up: the requirement it failed on."""
    for line in reversed(lines):
        text = canonical(line.replace(" ", "~"))
        for name in sorted(names, key=len, reverse=True):
            if re.search(rf"(?<![a-z0-9]){re.escape(name)}(?![a-z0-9])", text):
                return name
    return None


def say(line):
    print(line, flush=True)


def refuse_line(line):
    print(f"comfyctl pack: {line}", file=sys.stderr, flush=True)
