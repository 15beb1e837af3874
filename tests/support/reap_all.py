"""Runs a command and waits for every process it leaves behind, not just the command.

A browser's helpers can outlive it for a moment; as a subreaper, this process inherits
them and waits for them, so a test that runs it finds no orphan of its own afterwards.
Usage: reap_all.py COMMAND [ARGS...]; exits with the command's status."""
import ctypes
import os
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36

if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit("reap_all.py: prctl(PR_SET_CHILD_SUBREAPER) failed: " + os.strerror(ctypes.get_errno()))
status = subprocess.call(sys.argv[1:])
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
sys.exit(status)
