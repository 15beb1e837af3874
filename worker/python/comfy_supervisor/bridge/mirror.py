"""Mirrors: a model's torch module itself in the other process, built there by ComfyUI's
own code over a copy of its owner's weights mapped, not sent (docs/PACKS.md, "Mirrors").

Code that reaches into `model.model.diffusion_model` and runs torch on it cannot be served
by a proxy. Reading such an attribute of a remote object (the rules' mirrors, listed in
comfy_supervisor.crossing.kinds) asks the owner for a mirror:

- The owner copies the module's parameters and buffers once per session into a memfd of
  its own (a Publication: sealed against shrinking, growing and further seals, so a
  reader's mapping never faults and nobody can stop the owner punching it out); its own
  module keeps its own memory. The first page is a header: a magic word and the
  publication's generation.
- It sends, first, {"op": "mirror_fd", "key"} with a read-only descriptor of the memfd
  attached (SCM_RIGHTS, bridge/channel.py), then answers the use with a description:
  the module's recipe (the rules' mirror_recipes: its class, one of ComfyUI's own torch
  modules, never code; its construction arguments as plain values), the header's
  generation and, per tensor, its name, parameter or buffer, dtype, shape and offset.
- The receiver checks all of it, maps the memfd MAP_PRIVATE (its writes are its own
  copies of the pages it touches), builds the module on the meta device with the recipe,
  and sets each parameter and buffer as a tensor over the mapping.

A mirror lives for the node call that read it, as the host's objects may be used only
then: at the call's end, when the session ends, and when the owner revokes it, the
receiver drops it: the mapping is replaced in place by empty anonymous memory, so the
owner's pages are let go at once even where a view of a weight is still held, and every
use of the module after that raises one line. The owner revokes a copy when it evicts
or unloads the model, when the module's tensors change, when the module is collected and
when the session ends: it punches the memfd out, so a reader that kept a descriptor or a
mapping of it reads zeros, and the pages are free whatever the reader does.

CUDA: a module on a CUDA device is described by its tensors themselves, lent by CUDA IPC
where both sides can; its revocation waits for the reader to let go (bridge/cuda_mirror.py).
"""

import contextlib
import ctypes
import fcntl
import itertools
import mmap
import os
import sys
import threading
import weakref

from . import cuda_mirror, mirror_build, rules
from .remote import RemoteError
from .values import DTYPES

PAGE = mmap.PAGESIZE
_ALIGN = 64
_MAGIC = 0x524F5252494D5653  # "SVMIRROR"
_WORDS = ctypes.c_uint64 * 2  # the header: magic, generation
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
_SAMPLE = 64                 # bytes of each end of a tensor compared with its copy at each grant
_MAX_TENSORS = 1 << 16
_MAX_HELD = 16               # descriptors received and not yet claimed by their answer
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
_libc.memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_FIXED, _MAP_ANONYMOUS = 0x10, 0x20


def _torch():
    import torch
    return torch


def _tensors(module, originals=None, prefix=""):
    """(name, "parameter" or "buffer", tensor) of every parameter and buffer, tied ones under
    each of their names. `originals`: submodules by their dotted path that object patches
    replaced for now (a pack's wrapper around a block), walked in their place: the module as
    its class built it, which is what a receiver builds."""
    for kind, books in (("parameter", module._parameters), ("buffer", module._buffers)):
        for leaf, tensor in books.items():
            if tensor is not None:
                yield (f"{prefix}.{leaf}" if prefix else leaf), kind, tensor
    for name, child in module._modules.items():
        path = f"{prefix}.{name}" if prefix else name
        child = (originals or {}).get(path, child)
        if child is not None:
            yield from _tensors(child, originals, path)


# ---- the owner's side ----

class Publication:
    """A copy of a CPU module's tensors in a memfd of ours, for one session's mirrors of it.

    A copy, and not the owner's own tensors moved into the memfd (which doubled nothing),
    because revocation must take the pages back from a reader that kept a descriptor (a dup
    of the one it got, or one reopened through /proc): the kernel punches no hole in a memfd
    sealed against writes (shmem_fallocate refuses under F_SEAL_WRITE and
    F_SEAL_FUTURE_WRITE), and truncating would fault a reader's mapping. Without that seal,
    a reader can reopen its read-only descriptor writable through /proc/self/fd (a memfd's
    mode is 0777, and its owner's user may chmod it), so a memfd our tensors lay in would let
    a pack write the host's weights. So our tensors stay in our own memory, each session gets
    a copy of its own (a pack that writes its copy reaches its own mirrors alone), made once
    per session and state of the module and in our resident set (our shared mapping), and
    revocation punches it out: a descriptor kept past it reads zeros, and the pages are
    freed (docs/SECURITY.md)."""

    def __init__(self, module, originals=None):
        entries, offsets, places, self.sources, end = [], {}, [], {}, PAGE
        self.originals = dict(originals or {})
        for name, kind, tensor in _tensors(module, self.originals):
            dtype = str(tensor.dtype).removeprefix("torch.")
            if tensor.device.type != "cpu" or dtype not in DTYPES:
                raise RemoteError(f"{name} is a {dtype} tensor on {tensor.device}: a mirror maps CPU tensors of "
                                  f"{', '.join(DTYPES)} (or CUDA ones alone)")
            if id(tensor) not in offsets:
                end = -(-end // _ALIGN) * _ALIGN
                offsets[id(tensor)] = end
                places.append((tensor, end))
                end += tensor.numel() * tensor.element_size()
            entries.append([name, kind, dtype, list(tensor.shape), offsets[id(tensor)]])
            self.sources[name] = (weakref.ref(tensor), tensor.data_ptr(), _version_of(tensor), tensor.dtype,
                                  tensor.shape)
        self.size = max(PAGE, -(-end // PAGE) * PAGE)
        self.fd = os.memfd_create("comfy-sv-mirror", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self.address = None
        try:
            os.ftruncate(self.fd, self.size)
            # F_SEAL_SEAL: a reader that reopened it writable cannot seal it against writes,
            # which would refuse our punch.
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, _SEALS | fcntl.F_SEAL_SEAL)
            address = _libc.mmap(None, self.size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, self.fd, 0)
            if address in (None, _MAP_FAILED):
                raise OSError(ctypes.get_errno(), f"mmap of a mirror's copy: {os.strerror(ctypes.get_errno())}")
            self.address = address
            self.samples = []  # (our tensor's address, its copy's, its bytes): their ends, compared by current()
            for tensor, offset in places:
                source = tensor.detach().contiguous()
                ctypes.memmove(address + offset, source.data_ptr(), tensor.numel() * tensor.element_size())
                if source.data_ptr() == tensor.data_ptr():
                    self.samples.append((tensor.data_ptr(), address + offset, tensor.numel() * tensor.element_size()))
        except BaseException:
            self._unmap()
            raise
        self.generation = next(_generations)
        self.header = _WORDS.from_address(address)
        self.header[0], self.header[1] = _MAGIC, self.generation
        self.entries = entries
        self.module = weakref.ref(module)
        self.lock = threading.RLock()
        # The module gone, so are its copies: every mirror of it is revoked, its pages freed.
        self.finalizer = weakref.finalize(module, self.revoke)
        with _publications_lock:
            _publications.add(self)

    def current(self):
        """Whether the copy still holds the module's tensors: none replaced, moved or written
        in place since. An in-place write through `.data` (upstream's copy_to_param) bumps no
        version, so the first and last bytes of each tensor are compared too, which also finds
        a copy that its reader wrote through a descriptor reopened writable."""
        with self.lock:  # never over a copy being unmapped
            module = self.module()
            if module is None or self.fd is None or tuple(self.header) != (_MAGIC, self.generation):
                return False
            found = {name: tensor for name, _, tensor in _tensors(module, self.originals)}
            if found.keys() != self.sources.keys() or not all(
                    found[name] is ref() and found[name].data_ptr() == address and _version_of(found[name]) == version
                    and found[name].dtype == dtype and found[name].shape == shape
                    for name, (ref, address, version, dtype, shape) in self.sources.items()):
                return False
            return all(_ends_equal(ours, copy, size) for ours, copy, size in self.samples)

    def revoke(self):
        """Every mirror of the copy is revoked (its next use raises), and its pages are
        punched out (FALLOC_FL_PUNCH_HOLE, keeping the size, so no reader's mapping faults):
        a descriptor a reader kept reads zeros from now on, and the memory is free."""
        with self.lock:
            if self.fd is None:
                return
            self.finalizer.detach()
            with _publications_lock:
                _publications.discard(self)
            self.header[0] = self.header[1] = 0  # revoked, even where the punch fails
            punched = _libc.fallocate(self.fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, 0, self.size)
            error = ctypes.get_errno()
            self._unmap()
        if punched != 0:
            print(f"comfy_supervisor: a mirror's {self.size} bytes could not be taken back "
                  f"(fallocate: {os.strerror(error)}); a pack that kept its descriptor holds them until its "
                  "worker ends", file=sys.stderr)

    def _unmap(self):
        if self.address is not None:
            _libc.munmap(self.address, self.size)
            self.address = None
        os.close(self.fd)
        self.fd = None

    def reader_fd(self):
        with self.lock:
            if self.fd is None:
                raise RemoteError("the module's mirror was revoked while it was granted; read it again")
            return os.open(f"/proc/self/fd/{self.fd}", os.O_RDONLY | os.O_CLOEXEC)


def _version_of(tensor):
    """The tensor's count of in-place writes; None for an inference tensor (upstream loads
    under torch.inference_mode), which keeps none: its ends are compared instead."""
    return None if tensor.is_inference() else tensor._version


def _ends_equal(ours, copy, size):
    """Whether the first and last _SAMPLE bytes of `size` bytes at `ours` and `copy` agree."""
    sample = min(_SAMPLE, size)
    tail = size - sample
    return _libc.memcmp(ours, copy, sample) == 0 and _libc.memcmp(ours + tail, copy + tail, sample) == 0


_publications = weakref.WeakSet()  # every Publication not revoked yet, of every session
_publications_lock = threading.RLock()  # a collection meanwhile may revoke one
_generations = itertools.count(1)  # 0 is never granted: a revoked header reads 0


def publications_of(module):
    """The copies of `module` not revoked yet, one per session that mirrors it."""
    with _publications_lock:
        return [publication for publication in _publications if publication.module() is module]


def _under(model):
    """The ids of the torch modules under `model` (a ModelPatcher, or what it patches)."""
    torch = sys.modules.get("torch")
    try:  # never a remote object's attribute (a stand-in's model is the peer's)
        inner = vars(model).get("model", model)
    except TypeError:
        inner = model
    if torch is None or not isinstance(inner, torch.nn.Module):
        return set()
    return {id(sub) for sub in inner.modules()}


def revoke(model, under=None):
    """An eviction of `model` reaches its mirrors first: every copy granted of a module under
    it is revoked and punched out, and every CUDA grant of one revoked, its readers waited
    for (cuda_mirror.revoke), before its owner unloads it."""
    under = _under(model) if under is None else under
    if not under:
        return 0
    with _publications_lock:
        revoked = [publication for publication in _publications if id(publication.module()) in under]
    for publication in revoked:
        publication.revoke()
    return len(revoked) + cuda_mirror.revoke(under)


@contextlib.contextmanager
def unloading(model):
    """The owner's unload of `model` (host/comfyui.py wraps upstream's with it): its mirrors
    are revoked first, and no CUDA grant of it is made until the unload returned."""
    under = _under(model)
    with cuda_mirror.unloading(under):
        revoke(model, under)
        yield


class Grants:
    """What the owner granted a session: the descriptors go ahead of their answers, over the
    session's own copy of each module (Publication), punched out when the session ends."""

    def __init__(self, channel, cuda=None, session=None):
        self.channel = channel
        self.keys = itertools.count(1)
        self.published = weakref.WeakKeyDictionary()  # module -> this session's copy of it
        self.lock = threading.Lock()
        self.cuda = cuda_mirror.CudaGrants(channel, cuda, session)

    def grant(self, owner, kind, name, originals=None):
        """The description of a mirror of `name` of `owner`, its descriptor sent ahead;
        `originals`: as _tensors' (a replica's diffusion model is the one upstream built)."""
        if name not in rules.mirrors.get(kind.name, ()):
            raise RemoteError(f"{str(name)[:40]} of a {kind.name} is not mirrored; what is: "
                              "comfy_supervisor.crossing.kinds.MIRRORS")
        module = getattr(owner, name)
        if not isinstance(module, _torch().nn.Module):
            raise RemoteError(f"{name} of the {kind.name} is not a torch module")
        return self.grant_module(module, rules.mirror_recipes.recipe_of(owner, kind, name, module), originals)

    def grant_built(self, module):
        """The description of a mirror of `module` for a reader that built it already with
        upstream's own code (a replica's, crossing/replicas): its recipe is its class alone,
        which the reader's module must be of."""
        torch = _torch()
        if not isinstance(module, torch.nn.Module):
            raise RemoteError(f"a {type(module).__name__} is not a torch module, and has no mirror")
        return self.grant_module(module, {"class": f"{type(module).__module__}.{type(module).__qualname__}",
                                          "kwargs": {}, "training": bool(module.training), "built": True})

    def grant_module(self, module, recipe, originals=None):
        """The description of a mirror of `module` built by `recipe`, its descriptor sent ahead."""
        devices = {tensor.device.type for _, _, tensor in _tensors(module, originals)}
        if devices == {"cuda"}:  # by CUDA IPC, as values go: the encoder lends each tensor
            return self.cuda.grant(module, list(_tensors(module, originals)), recipe, next(self.keys))
        with self.lock:
            publication = self.published.get(module)
            if publication is None or publication.originals != dict(originals or {}) or not publication.current():
                if publication is not None:
                    publication.revoke()
                publication = self.published[module] = Publication(module, originals)
        key = next(self.keys)
        reader = publication.reader_fd()
        try:
            self.channel.send({"op": "mirror_fd", "key": key}, fds=[reader])
        finally:
            os.close(reader)
        return {"key": key, "recipe": recipe, "size": publication.size, "generation": publication.generation,
                "tensors": publication.entries}

    def close(self):
        """The session ended: the copies made for it go, whatever its peer kept of them."""
        with self.lock:
            published, self.published = list(self.published.values()), weakref.WeakKeyDictionary()
        for publication in published:
            publication.revoke()
        self.cuda.close()


# ---- the receiver's side ----

_mapped = weakref.WeakSet()  # our Mirrors whose mapping is the owner's memory still


def mapped_bytes():
    """What of this process's resident set is mirrors' pages read here and not written: the
    owner's memory, in the owner's census already (its shared mapping of the memfd), so not
    in ours. A page a mirror wrote is our own copy (anonymous), and stays ours."""
    if not any(mirror.address is not None for mirror in list(_mapped)):
        return 0
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(" ", 2)
            if "-" in head[0] and head[0][0] in "0123456789abcdef":
                inside = "comfy-sv-mirror" in line and len(head) > 1 and head[1].endswith("p")
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1]) * 1024
            elif inside and line.startswith("Anonymous:"):
                total -= int(line.split()[1]) * 1024
    return max(0, total)


class Mirrors:
    """A session's mirrors of the peer's modules, and the descriptors that came for them."""

    def __init__(self, channel, cuda=None, name="the peer"):
        self.channel = channel
        self.cuda = cuda    # the session's CudaExchange, and the watches of its CUDA mirrors
        self.watches = cuda_mirror.Watches(name)
        self.fds = {}       # key -> descriptor, until its answer claims it
        self.live = {}      # (peer id, name) -> Mirror, for the node call that read it
        self.kept = {}      # (peer id, name) -> [Mirror, how many holders]: kept while they live
        self.lock = threading.Lock()

    def on_fd(self, message):
        fd, key = self.channel.take_fd(), message.get("key")
        if fd is None:
            return  # a frame that says it came with a descriptor that did not: its answer fails
        with self.lock:
            if type(key) is not int or key in self.fds or len(self.fds) >= _MAX_HELD:
                os.close(fd)
                return
            self.fds[key] = fd

    def get(self, link, name):
        """The mirror of `name` of the peer's object `link`, for the node call that reads it."""
        with self.lock:
            mirror = self.live.get((link.id, name))
        if mirror is not None and mirror.why() is None:
            return mirror.module
        mirror = self._mirror(link, name)
        with self.lock:
            old, self.live[(link.id, name)] = self.live.get((link.id, name)), mirror
        if old is not None:
            old.drop("it was read again")
        return mirror.module

    def kept_module(self, link, name, holder, use="mirror", built=None):
        """The mirror of `name` of the peer's object `link`, kept while `holder` (and any other
        holder of it) lives, not for one node call: a replica's module (`built`: the module
        as this side built it with upstream's code, its tensors set over the owner's; else
        built here from the owner's recipe). Revoked by
        its owner (an eviction, a reload), it is mapped again in place at its next use, the
        same module objects over the owner's new copy, so that what the pack holds of it (a
        block it wrapped, a patch bound to one) stays good."""
        key = (link.id, name)
        with self.lock:
            found = self.kept.get(key)
        if found is None:
            mirror = self._mirror(link, name, use, renew=lambda: self._grant(link, name, use), built=built)
            with self.lock:
                found = self.kept.setdefault(key, [mirror, 0])
            if found[0] is not mirror:
                mirror.drop("another thread mapped it first")
        with self.lock:
            found[1] += 1
        weakref.finalize(holder, self._let_go_of, key, found)
        found[0].fresh()
        return found[0].module

    def refresh(self, link, name):
        """Maps the kept mirror of `name` of `link` again now if its owner revoked it."""
        with self.lock:
            found = self.kept.get((link.id, name))
        if found is not None:
            found[0].fresh()

    def _let_go_of(self, key, found):
        with self.lock:
            found[1] -= 1
            last = found[1] <= 0 and self.kept.get(key) is found
            if last:
                del self.kept[key]
        if last:
            found[0].drop("no replica holds it any more")

    def _mirror(self, link, name, use="mirror", renew=None, built=None):
        """A Mirror of `name` of the peer's object `link`, built over the owner's grant."""
        description, fd = self._grant(link, name, use)
        try:
            return Mirror(description, fd, f"{link.describe()}'s {name}", renew=renew, built=built,
                          watches=(self.watches, self.cuda))
        finally:
            if fd is not None:
                os.close(fd)

    def _grant(self, link, name, use="mirror"):
        """The owner's description of a mirror, and the descriptor that came ahead of it."""
        description = link.invoke(use, name)
        key = description.get("key") if isinstance(description, dict) else None
        with self.lock:
            fd = self.fds.pop(key, None) if type(key) is int else None
        return description, fd

    def drop_all(self, why):
        with self.lock:
            live, self.live = list(self.live.values()), {}
        for mirror in live:
            mirror.drop(why)

    def close(self, why):
        self.drop_all(why)
        with self.lock:
            kept, self.kept = [found[0] for found in self.kept.values()], {}
            fds, self.fds = list(self.fds.values()), {}
        for mirror in kept:
            mirror.drop(why)
        for fd in fds:
            os.close(fd)
        self.watches.close()


class Mirror:
    """One module built here over the owner's weights: mapped (CPU) or by CUDA IPC."""

    def __init__(self, description, fd, what, renew=None, built=None, watches=None):
        self.what = what
        self.dropped = None
        self.address = None
        self.renew = renew  # kept: () -> the owner's new (description, descriptor), mapped in place
        # The node's thread, the session's end and a CUDA grant's watch may each drop it; a
        # use maps it again.
        self.lock = threading.RLock()
        self.watches, self.watch, self.forwards, self.slots, self.maps = watches, None, 0, [], 0
        found = description.get("recipe") if isinstance(description, dict) else None
        recipe = mirror_build.checked_recipe(found, what, built)
        module = mirror_build.built_here(recipe, built, what) if built is not None else mirror_build.build(recipe, what)
        try:
            self.module, self.slots = _over(module, recipe, self._tensors_of(description, fd), what)
        except BaseException:
            if self.watch is not None:
                self.watch.release()
            raise
        if watches is not None:
            cuda_mirror.count_forwards(self)
        self.on_revoked()  # a grant revoked before it was built here lets go at once
        self.hooks = [sub.register_forward_pre_hook(self._check) for sub in self.module.modules()]
        self.hooks.append(self.module.register_forward_pre_hook(self._started))
        # A revocation during a forward punched weights out from under it: its output is
        # zeros' work, so it raises, even where a kept mirror was mapped again meanwhile.
        self.hooks.append(self.module.register_forward_hook(self._finished))

    def _tensors_of(self, description, fd):
        """name -> (kind, tensor over the owner's memory) of the owner's description."""
        if not isinstance(description, dict):
            raise RemoteError(f"{self.what}: the owner's description of the mirror is not an object")
        if "cuda" in description:
            self.generation = None
            tensors = cuda_mirror.checked(description.get("cuda"), self.what)
            if description.get("key") is not None and fd is None:
                raise RemoteError(f"{self.what}: the CUDA mirror came without its watch's descriptor")
            if fd is not None and self.watches is not None:
                self.watch = cuda_mirror.Watch(*self.watches, fd, tensors, self.on_revoked)
            return tensors
        if fd is None:
            raise RemoteError(f"{self.what}: the mirror came without its memory's descriptor")
        return self._map(description, fd)

    def fresh(self):
        """A kept mirror its owner revoked is mapped again now, in place."""
        if self.why() is None:
            return  # every submodule's forward asks: the usual answer without the lock
        with self.lock:
            if self.why() is None:
                return
            description, fd = self.renew()
            try:
                tensors = self._tensors_of(description, fd)
            finally:
                if fd is not None:
                    os.close(fd)
            names = sorted(name for _, _, _, name in self.slots)
            if names != sorted(tensors):
                self._let_go()
                raise RemoteError(f"{self.what}: its owner's module has other tensors now than when it was mirrored")
            torch = _torch()
            for sub, leaf, kind, name in self.slots:
                _, theirs = tensors[name]
                if kind == "parameter":
                    sub._parameters[leaf] = torch.nn.Parameter(theirs, requires_grad=False)
                else:
                    sub._buffers[leaf] = theirs
            self.dropped = None
            self.maps += 1

    def _map(self, description, fd):
        torch = _torch()
        size, generation, entries = description.get("size"), description.get("generation"), description.get("tensors")
        if type(size) is not int or type(generation) is not int or not isinstance(entries, list) or \
                size < PAGE or size % PAGE or len(entries) > _MAX_TENSORS:
            raise RemoteError(f"{self.what}: a mirror's description that is malformed")
        try:
            seals, actual = fcntl.fcntl(fd, fcntl.F_GET_SEALS), os.fstat(fd).st_size
        except OSError:
            seals = actual = None
        if seals is None or seals & _SEALS != _SEALS or actual != size:
            raise RemoteError(f"{self.what}: the mirror's memory is not sealed against resizing, or not of its size")
        address = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE, fd, 0)
        if address in (None, _MAP_FAILED):
            raise RemoteError(f"{self.what}: mapping the mirror failed: {os.strerror(ctypes.get_errno())}")
        self.address, self.size, self.generation = address, size, generation
        _mapped.add(self)
        buffer = (ctypes.c_uint8 * size).from_address(address)
        weakref.finalize(buffer, _libc.munmap, address, size)  # once no tensor lies over it
        whole = torch.frombuffer(buffer, dtype=torch.uint8)
        del buffer
        tensors, over = {}, {}
        for entry in entries:
            if not (isinstance(entry, list) and len(entry) == 5):
                raise RemoteError(f"{self.what}: a mirror's tensor that is malformed")
            name, kind, dtype, shape, offset = entry
            if not (isinstance(name, str) and kind in ("parameter", "buffer") and dtype in DTYPES and
                    isinstance(shape, list) and len(shape) <= 32 and all(type(s) is int and s >= 0 for s in shape)
                    and type(offset) is int):
                raise RemoteError(f"{self.what}: a mirror's tensor that is malformed ({str(name)[:80]})")
            element = torch.empty((), dtype=getattr(torch, dtype)).element_size()
            nbytes = element
            for s in shape:
                nbytes *= s
            if offset < PAGE or offset % element or offset + nbytes > size:
                raise RemoteError(f"{self.what}: {name[:80]} lies outside the mirror's memory")
            key = (offset, dtype, tuple(shape))
            if key not in over:
                over[key] = whole[offset:offset + nbytes].view(getattr(torch, dtype)).view(shape)
            tensors[name] = (kind, over[key])
        self.header = _WORDS.from_address(address)
        return tensors

    def why(self):
        """Why the mirror cannot be used any more, or None."""
        if self.dropped is None and self.address is not None:
            magic, generation = self.header
            if magic != _MAGIC or generation != self.generation:
                self.drop("its owner evicted that model (or let it go)")
        elif self.dropped is None and self.watch is not None and self.watch.revoked:
            self.drop("its owner evicted that model (or let it go)")
        return self.dropped

    def on_revoked(self):
        """A CUDA grant's watch fired (cuda_mirror.Watches' thread): dropped now, unless a
        forward runs over it, whose next submodule drops it and raises (its weights are never
        taken from under a block that computes), or whose end drops it."""
        with self.lock:
            if not self.forwards and self.dropped is None and self.watch is not None and self.watch.revoked:
                self.drop("its owner evicted that model (or let it go)")

    def _started(self, module, args):
        self.started = self.maps

    def _finished(self, module, args, output):
        if self.maps != getattr(self, "started", self.maps):
            raise RemoteError(f"the mirror of {self.what} was revoked by its owner during a forward (it evicted or "
                              "reloaded the model); run it again")
        self._check(module, args, renew=False)

    def _check(self, module, args, renew=True):
        if renew and self.renew is not None:
            self.fresh()
        why = self.why()
        if why is not None:
            raise RemoteError(f"the mirror of {self.what} is gone: {why}; read it again from the model in the node "
                              "that uses it")

    def drop(self, why):
        """Lets go of the owner's memory now: the mapping becomes empty memory in place (a view
        still held reads zeros, never the owner's pages), the module's tensors meta."""
        with self.lock:
            if self.dropped is not None and self.address is None:
                return
            self.dropped = self.dropped or why
            self._let_go()

    def _let_go(self):
        torch = _torch()
        # The tensors it set, by their places: a pack's module put into it since (an object
        # patch that wraps a block) keeps its own.
        places = [(sub._parameters if kind == "parameter" else sub._buffers, leaf, kind)
                  for sub, leaf, kind, _ in self.slots]
        # The work queued on the owner's device memory is done before its mappings close.
        for device in {books[leaf].device for books, leaf, _ in places if books.get(leaf) is not None
                       and books[leaf].is_cuda}:
            torch.cuda.synchronize(device)
        for books, leaf, kind in places:
            tensor = books.get(leaf)
            if tensor is not None:
                meta = torch.empty(tensor.shape, dtype=tensor.dtype, device="meta")
                books[leaf] = torch.nn.Parameter(meta, False) if kind == "parameter" else meta
        if self.watch is not None:  # the owner hears once the mappings under them closed
            watch, self.watch = self.watch, None
            watch.release()
        if self.address is not None:
            _mapped.discard(self)
            address, self.address = self.address, None
            _libc.mmap(address, self.size, mmap.PROT_READ | mmap.PROT_WRITE,
                       mmap.MAP_PRIVATE | _MAP_FIXED | _MAP_ANONYMOUS, -1, 0)


def _over(module, recipe, tensors, what):
    """`module` with its tensors set over the owner's `tensors`, and where each was set."""
    torch = _torch()
    built, slots = list(_tensors(module)), []
    if sorted(name for name, _, _ in built) != sorted(tensors):
        raise RemoteError(f"{what}: the module built here has other tensors than its owner's (a ComfyUI of another "
                          "version in the worker?)")
    for name, kind, tensor in built:
        theirs_kind, theirs = tensors[name]
        if theirs_kind != kind or theirs.dtype != tensor.dtype or theirs.shape != tensor.shape:
            raise RemoteError(f"{what}: {name} is a {kind} of {tensor.dtype} {list(tensor.shape)} here, "
                              f"a {theirs_kind} of {theirs.dtype} {list(theirs.shape)} at its owner")
        prefix, _, leaf = name.rpartition(".")
        sub = module.get_submodule(prefix)
        slots.append((sub, leaf, kind, name))
        if kind == "parameter":
            sub._parameters[leaf] = torch.nn.Parameter(theirs, requires_grad=False)
        else:
            sub._buffers[leaf] = theirs
    return module.train(recipe["training"]), slots
