"""The fork of a pack worker from the template, and the set-up that makes it the process the
supervisor's own spawner would have started (supervisor/lifecycle/process_spawner.cpp).

The worker must be the supervisor's child: the supervisor reaps it, reads its exit status
and watches its pidfd, as for a worker it spawned itself. So the template forks twice: the
middle process forks the worker and exits at once, and the worker, an orphan, goes to the
nearest subreaper above it, the supervisor (the template gave up being one itself). The
worker waits until it is the supervisor's before it does anything, and only then asks to
die with it (PR_SET_PDEATHSIG is about the parent of the moment).
"""

import ctypes
import fcntl
import os
import signal
import time

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
# How long a new worker waits to be the supervisor's child: its middle process exits at
# once, so only a stopped machine takes this long.
REPARENT_WAIT_S = 5.0
EXIT_SETUP_FAILED = 127  # as a spawn whose set-up failed

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option, value):
    if _libc.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


def name_process(name, title):
    """The process's name (comm: what top and `ps -o comm` show, 15 bytes) and its command
    line (/proc/PID/cmdline: what ps and htop show), which would stay the template's: the
    title is written over the room its arguments took at its exec (the supervisor gives
    it a blank argument for that room), cut to it, the rest zeroed."""
    _libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), ctypes.c_ulong(0), ctypes.c_ulong(0),
                ctypes.c_ulong(0))
    try:
        with open("/proc/self/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start and arg_end, fields 48 and 49
    except (OSError, IndexError, ValueError):
        return  # a kernel that does not say where they lie: the template's line stays
    room = end - start
    if room > 1:
        ctypes.memmove(start, title.encode()[:room - 1].ljust(room, b"\0"), room)


def give_up_subreaping():
    """The supervisor's spawner made the template the subreaper of what it starts: a worker
    it forks would come back to it, not to the supervisor."""
    _prctl(PR_SET_CHILD_SUBREAPER, 0)


def fork_worker():
    """Forks a worker through a middle process. In the template: the worker's pid. In the
    worker: None (its set-up is become_worker's). Raises OSError when a fork failed."""
    read_end, write_end = os.pipe()
    try:
        middle = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        raise
    if middle == 0:
        os.close(read_end)
        try:
            worker = os.fork()
            if worker == 0:
                os.close(write_end)
                return None
            os.write(write_end, str(worker).encode())
        except BaseException:  # noqa: BLE001 (nothing of the middle process may reach the template's loop)
            pass
        os._exit(0)
    os.close(write_end)
    said = b""
    while chunk := os.read(read_end, 32):
        said += chunk
    os.close(read_end)
    os.waitpid(middle, 0)  # once reaped, the worker is the supervisor's, or a zombie it reaps
    if not said:
        raise OSError("the middle process could not fork the worker")
    return int(said)


def become_worker(supervisor, targets, fds, output, cwd, environment):
    """In a new worker: the supervisor's child, in a process group of its own, dying with the
    supervisor, the subreaper of what it starts, with every signal unblocked; stdin from
    /dev/null, stdout and stderr `output`, each of `fds` at the number of `targets` it
    had in the supervisor, and nothing else open; in `cwd`, with `environment` as its
    whole environment (os.environ and the C library's both). Exits 127 where the
    supervisor's spawner would have failed."""
    deadline = time.monotonic() + REPARENT_WAIT_S
    while os.getppid() != supervisor:
        if time.monotonic() > deadline:
            os._exit(EXIT_SETUP_FAILED)  # the supervisor is gone: nobody waits for this worker
        time.sleep(0.0002)
    try:
        os.setpgid(0, 0)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != supervisor:
            os._exit(EXIT_SETUP_FAILED)  # it died before the request took hold
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        _place_descriptors(targets, fds, output)
        os.chdir(cwd)
    except OSError:
        os._exit(EXIT_SETUP_FAILED)
    os.environ.clear()
    os.environ.update(environment)


def _place_descriptors(targets, fds, output):
    """Each of `fds` at its target's number, above them first so that none is overwritten
    before it moved; then every descriptor but those and the standard three closed."""
    lowest = max([*targets, 2]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, lowest) for fd in [*fds, output]]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(moved[-1], 1)
    os.dup2(moved[-1], 2)
    for target, fd in zip(targets, moved):
        os.dup2(fd, target)  # inheritable: an exec to a cold start keeps it, as the spawner's
    keep = sorted({0, 1, 2, *targets})
    for low, high in zip(keep, [*keep[1:], None]):
        if high is None:
            os.closerange(low + 1, os.sysconf("SC_OPEN_MAX"))
        elif high > low + 1:
            os.closerange(low + 1, high)
