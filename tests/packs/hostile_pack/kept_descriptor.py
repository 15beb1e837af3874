"""A pack that keeps the host's weights past a mirror's revocation, as a compromised pack
could: KeepMirror reads the host MODEL's diffusion model (a mirror over a memfd the host
sent) and keeps what it can of that memfd: a dup of the descriptor it arrived on (taken
by wrapping the worker's own grant of mirrors, from its import on), that descriptor reopened through /proc/self/fd, the
mirror's mapping reopened through /proc/self/map_files (which needs CAP_SYS_ADMIN: root
outside a sandbox), the host's own descriptor of it through /proc/PID/fd (outside a
sandbox), and a shared mapping of its own. ReadKept, in a later call, reads them all.
tests/host/mirror_checks.py's mirror-kept-descriptor checks that after revocation they
read zeros and the host's pages are freed (docs/SECURITY.md)."""

import json
import mmap
import os

CATEGORY = "comfy-supervisor tests"
_MEMFD = "/memfd:comfy-sv-mirror"
_kept = {}  # how it was kept -> a descriptor, or a mapping


def _nonzero(kept):
    data = kept[:] if isinstance(kept, mmap.mmap) else os.pread(kept, os.fstat(kept).st_size, 0)
    return len(data) - data.count(0)


def _blocks(kept):
    """The memfd's blocks (a mapping's, through the dup it was made from)."""
    return os.fstat(_kept["dup"] if isinstance(kept, mmap.mmap) else kept).st_blocks


def _dup_as_they_arrive():
    """Wraps the worker's grant of a mirror so that each descriptor a mirror arrives on (the
    host's MODEL arrives as a replica, whose mirror is granted before the node runs) is
    dup'ed first."""
    from comfy_supervisor.bridge import mirror
    original = mirror.Mirrors._grant

    def keeping(self, *args, **kwargs):
        description, fd = original(self, *args, **kwargs)
        if fd is not None:
            _arrived.append(os.dup(fd))
        return description, fd

    mirror.Mirrors._grant = keeping


_arrived = []  # each descriptor a mirror arrived on, dup'ed, until a KeepMirror keeps it


def _owners_descriptors(kept):
    """Where /proc shows this process (outside a sandbox) another's descriptor of the memfd
    `kept` is one of: the host's own, of this very memfd, never another host's that shares
    the machine (a test running beside this one)."""
    mine = os.fstat(kept)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                path = f"/proc/{pid}/fd/{fd}"
                if os.readlink(path).startswith(_MEMFD) and os.path.samestat(os.stat(path), mine):
                    found.append(path)
        except OSError:
            continue
    return found


def _opened(path, flags=os.O_RDONLY):
    try:
        return os.open(path, flags | os.O_CLOEXEC)
    except OSError as error:
        return type(error).__name__


class KeepMirror:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def run(self, model):
        unet = model.model.diffusion_model
        dups = _arrived[-1:]
        for extra in _arrived[:-1]:
            os.close(extra)
        _arrived.clear()
        norm = float(sum(float(p.double().abs().sum()) for p in unet.parameters()))
        tried = {}
        if dups:
            tried["dup"] = dups[0]
            tried["reopened"] = _opened(f"/proc/self/fd/{dups[0]}")
            tried["mapping"] = mmap.mmap(dups[0], os.fstat(dups[0]).st_size, mmap.MAP_SHARED, mmap.PROT_READ)
        with open("/proc/self/maps") as maps:
            ranges = [line.split()[0] for line in maps if "comfy-sv-mirror" in line and line.split()[1][3] == "p"]
        tried["map_files"] = _opened(f"/proc/self/map_files/{ranges[0]}") if ranges else "no mapping"
        for number, path in enumerate(_owners_descriptors(dups[0]) if dups else ()):
            tried[f"owner_fd_{number}"] = _opened(path)
        _kept.update((how, kept) for how, kept in tried.items() if not isinstance(kept, str))
        return (json.dumps({"norm": norm, "kept": {how: _nonzero(kept) if how in _kept else kept
                                                   for how, kept in tried.items()}}),)


class ReadKept:
    """What each kept descriptor and mapping holds now: its blocks (read first: reading a
    mapping of a hole allocates zeros) and its bytes that are not zero. Lets go of them."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        blocks = {how: _blocks(kept) for how, kept in _kept.items()}
        read = {how: [blocks[how], _nonzero(kept)] for how, kept in _kept.items()}
        for kept in _kept.values():
            kept.close() if isinstance(kept, mmap.mmap) else os.close(kept)
        _kept.clear()
        return (json.dumps(read),)


_dup_as_they_arrive()
NODE_CLASS_MAPPINGS = {"KeepMirror": KeepMirror, "ReadKept": ReadKept}
