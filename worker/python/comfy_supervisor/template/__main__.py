"""The warm template's server (package docstring). Its socket, COMFY_SV_TEMPLATE_FD (a
SOCK_SEQPACKET end the supervisor made), carries one JSON object a datagram:

- from the template, once: {"ready": {"import_ms", "pid"}} when the imports are done and
  frozen, or {"failed": LINE} when they cannot be, and it exits;
- from the supervisor: {"fork": ID, "argv", "env", "cwd", "targets"}, with the descriptors
  of `targets` in order, then the one for the worker's stdout and stderr (SCM_RIGHTS);
- from the template: {"forked": ID, "pid"} once the worker is the supervisor's child, or
  {"refused": ID, "why": LINE}, and the supervisor starts that worker cold itself.

The supervisor is the only peer, and what it sends is still checked: a malformed request is
refused with one line, never forked. The template ends when the supervisor closes its end.
"""

import gc
import importlib
import json
import os
import socket
import sys
import time

from . import forking, warm_start

MAX_REQUEST_BYTES = 1 << 20  # a worker's argv and environment
MAX_DESCRIPTORS = 16
# What every pack worker imports before its pack: torch and numpy, and the worker's own
# modules (pack_worker/__main__.py imports the rest of this package it needs).
PRELOAD = ("numpy", "torch", "comfy_supervisor.pack_worker.__main__")
# What ComfyUI's start-up in each worker imports too (server.py's aiohttp, the image
# library), where the interpreter has them.
PRELOAD_WHERE_FOUND = ("aiohttp", "PIL.Image")


def say(channel, message):
    channel.sendall(json.dumps(message).encode())


def preload():
    """The imports, then the worker's __main__ forgotten: runpy runs it afresh in each worker,
    as `-m` does, and would warn of one found already imported."""
    for name in PRELOAD:
        importlib.import_module(name)
    for name in PRELOAD_WHERE_FOUND:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    del sys.modules["comfy_supervisor.pack_worker.__main__"]


def threads():
    return len(os.listdir("/proc/self/task"))


def read_request(data, fds):
    """The request's fields, checked: (id, argv, env, cwd, targets, fds, output)."""
    request = json.loads(data)
    if not isinstance(request, dict) or type(request.get("fork")) is not int:
        raise ValueError("not a fork request")
    argv, env, cwd, targets = request.get("argv"), request.get("env"), request.get("cwd"), request.get("targets")
    if not (isinstance(argv, list) and argv and all(isinstance(arg, str) for arg in argv)):
        raise ValueError("argv is not a list of strings")
    if not (isinstance(env, dict) and all(isinstance(value, str) for value in env.values())):
        raise ValueError("env is not an object of strings")
    if not isinstance(cwd, str):
        raise ValueError("cwd is not a string")
    if not (isinstance(targets, list) and all(type(fd) is int and fd > 2 for fd in targets)):
        raise ValueError("targets is not a list of descriptor numbers above 2")
    if len(fds) != len(targets) + 1:
        raise ValueError(f"{len(fds)} descriptors came for {len(targets)} targets and the output")
    return request["fork"], argv, env, cwd, targets, fds[:-1], fds[-1]


def serve(channel, supervisor):
    """Forks a worker for each request. Returns, in a new worker only, what it is to be:
    (argv, env); returns None in the template when the
    supervisor closed its end."""
    while True:
        data, fds, _, _ = socket.recv_fds(channel, MAX_REQUEST_BYTES, MAX_DESCRIPTORS)
        if not data:
            return None
        try:
            number, argv, env, cwd, targets, passed, output = read_request(data, fds)
        except ValueError as error:
            say(channel, {"refused": None, "why": f"a malformed request: {error}"})
            for fd in fds:
                os.close(fd)
            continue
        try:
            pid = forking.fork_worker()
        except OSError as error:
            pid = error
        if pid is None:  # the new worker
            channel.detach()  # its descriptor is closed with the others: no object may close it again
            forking.become_worker(supervisor, targets, passed, output, cwd, env)
            return argv, env
        for fd in fds:
            os.close(fd)
        if isinstance(pid, OSError):
            say(channel, {"refused": number, "why": f"cannot fork: {pid.strerror or pid}"})
        else:
            say(channel, {"forked": number, "pid": pid})


def main():
    if "COMFY_SV_TEMPLATE_FD" not in os.environ:
        print("comfy_supervisor.template: the supervisor runs this, with its socket in COMFY_SV_TEMPLATE_FD",
              file=sys.stderr)
        return 2
    channel = socket.socket(fileno=int(os.environ.pop("COMFY_SV_TEMPLATE_FD")))
    forking.name_process("warm template", f"{sys.executable} -m comfy_supervisor.template")  # without the room
    supervisor = os.getppid()
    template_environment = dict(os.environ)
    started = time.monotonic()
    try:
        forking.give_up_subreaping()
        preload()
    except Exception as error:  # noqa: BLE001 (whatever an import raises is why there is no template)
        say(channel, {"failed": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"})
        return 1
    if threads() != 1:
        say(channel, {"failed": f"its imports started {threads() - 1} thread(s), which a fork would not take along"})
        return 1
    gc.collect()
    gc.freeze()  # the collector leaves the template's objects alone: their pages stay shared
    say(channel, {"ready": {"import_ms": round((time.monotonic() - started) * 1000), "pid": os.getpid()}})
    worker = serve(channel, supervisor)
    if worker is None:
        return 0
    argv, env = worker
    warm_start.run(argv, env, template_environment)
    return 0


if __name__ == "__main__":
    sys.exit(main())
