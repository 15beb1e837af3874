"""A hostile custom node pack for the node-call bridge's containment checks
(tests/host/bridge_checks.py, "snoop" and "frozen"): it runs as any pack does, in its own
worker, and uses what a pack's code can reach there against the host and the other packs.

- HostileSnoop looks for bytes the host sent another pack in everything it can map: every
  descriptor it holds, and with `everywhere` every descriptor of every process it can see
  (/proc/PID/fd) and every shared-memory name (/dev/shm). It reads files, never maps them,
  so that looking costs no memory where nothing was written.
- HostileHandover returns a tensor of ones it made, and the tensor it was given as it came;
  HostileRewrite then writes over what the worker's own arena lent and lately held
  (through the producer's own writable mapping, found among the worker's objects) and over every arena
  it was handed (reopened writable through /proc/self/fd, which a memfd's mode allows its
  owner): a pack that changes what it handed over after the call, and what it handed back.
"""

import gc
import os
import stat

import torch

CATEGORY = "comfy-supervisor tests (hostile)"
JUNK = 1.0e-34  # what the host's tensor read after the attack the issue reports


def regular_files_at(folder):
    """(path, descriptor opened read-only) of each regular file under `folder` we can open."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                yield path, fd
        finally:
            os.close(fd)


def data_extents(fd):
    """The ranges of a file that hold data (SEEK_DATA, SEEK_HOLE): a sparse arena's written pages."""
    size, offset = os.fstat(fd).st_size, 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, end
        offset = end


def holds(fd, needle):
    for start, end in data_extents(fd):
        at = start
        while at < end:
            chunk = os.pread(fd, min(end - at, 16 << 20) + len(needle), at)
            if needle in chunk:
                return True
            at += 16 << 20
    return False


def places():
    yield "/proc/self/fd"
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            yield f"/proc/{entry}/fd"
    yield "/dev/shm"


class HostileSnoop:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("*",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"needle": ("STRING", {}), "everywhere": ("BOOLEAN", {"default": False})}}

    def run(self, needle, everywhere):
        needle = bytes.fromhex(needle)
        found, looked = [], 0
        for folder in (places() if everywhere else ["/proc/self/fd"]):
            for path, fd in regular_files_at(folder):
                looked += 1
                if holds(fd, needle):
                    found.append(path)
        return ({"found": found, "looked_at": looked},)


class HostileHandover:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("IMAGE", "*")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"size": ("INT", {"default": 64}), "value": ("*",)}}

    def run(self, size, value):
        return (torch.ones(1, size, size, 3), value)


def junk_over(view):
    """Overwrites a writable buffer with JUNK floats."""
    whole = len(view) // 4 * 4
    if whole:
        torch.frombuffer(view, dtype=torch.float32, count=whole // 4).fill_(JUNK)


class HostileRewrite:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("*",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        import mmap
        rewritten = {"own_blocks": 0, "arenas": 0}
        # What it lent: through the worker's own writable mapping, its producer's; every
        # block in use, and the first 16 MiB, where what it lent lately lies, released or not.
        for arena in [obj for obj in gc.get_objects() if type(obj).__name__ == "OwnArena"]:
            ranges = [(mmap.PAGESIZE, min(arena.capacity - mmap.PAGESIZE, 16 << 20))] + list(arena.allocator.blocks.items())
            for offset, size in ranges:
                junk_over(memoryview(arena.map)[offset:offset + size])
            rewritten["own_blocks"] += len(arena.allocator.blocks)
        # Every arena it holds a descriptor of (what it was handed, and its own, which
        # Python's mmap keeps a descriptor of), reopened writable and mapped shared.
        for path, _ in list(regular_files_at("/proc/self/fd")):
            if "comfy-sv-arena" not in os.readlink(path):
                continue  # its own region and the device table are its own to break
            try:
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                size = os.fstat(fd).st_size
                mapping = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except (OSError, ValueError):
                os.close(fd)
                continue
            with mapping:
                for start, end in list(data_extents(fd)):
                    junk_over(memoryview(mapping)[max(start, mmap.PAGESIZE):end])
            os.close(fd)
            rewritten["arenas"] += 1
        return (rewritten,)


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (HostileSnoop, HostileHandover, HostileRewrite)}
