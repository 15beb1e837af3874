"""How a node's inputs and outputs cross between the ComfyUI host and a pack's worker.

A value crosses as JSON, never pickled and never evaluated:

- plain values (None, bools, ints, floats, strings, lists, and dicts of these with string
  keys) as JSON itself; floats round-trip bit-exact (repr), NaN and infinities included;
- tuples, and dicts with other keys or a "$" key, as tagged objects {"$": "tuple", ...};
  sets of plain values (and frozensets, which arrive as sets) as {"$": "set", "items"} (a
  LoRA adapter's loaded keys);
- a torch tensor of any dtype in DTYPES, any shape, contiguous or not, as
  {"$": "tensor", "dtype", "shape", "offset", "nbytes"}: its bytes written once into the
  arena the sender writes for the receiver (arena.py); the host's tensor sent again,
  unwritten since, names the block it was written into before (lent_blocks.py), and the
  worker's echo of it is {"yours": block} as for any. A worker's tensor is built over
  those bytes; the host's is a copy of them, since the worker that wrote them can write
  them again. A tensor a worker returns as it came (a node returning its input, or a part
  of it) lies, unchanged, in a block the host lent it, and goes back as {"yours": block,
  "at": offset in it} instead: the host's tensor is over the host's own tensor again,
  with no copy either way;
  one laid out as a permutation of a contiguous tensor (an IMAGE's movedim(-1, 1), which
  torch takes as channels-last) is written in its memory order with its "strides", and
  rebuilt with them: torch picks its kernels by layout, so a copy made contiguous would
  not compute bit-equal to the tensor it came from;
- a CPU tensor of at most INLINE_BYTES as {"$": "tensor", "dtype", "shape", "nbytes",
  "inline", "n"}: its bytes in the frame itself, in base64, "n" numbering it in its value
  (the same tensor twice in a value is one tensor to the receiver). An arena block is
  whole pages, and what it costs to lend, map and release one (tens of microseconds a
  side) dwarfs a copy of so few bytes; the receiver's tensor is its own, also when a
  worker returns it as it came;
- a CUDA tensor ("device": "cuda") by CUDA IPC where both sides can (cuda_ipc.py):
  {"cuda_ipc": {"handle", "device", "at", "lend"}}, or {"yours_cuda": lend, "at"} for one
  that lies in a tensor the receiver lent us; else staged through the arena as above, and
  it comes out on the receiver's CUDA device when it has one;
- a torch.device as {"$": "device", "type", "index"}, a torch.dtype as {"$": "dtype", "name"};
- the value classes of the rules (by_value.py: upstream's conditioning values) as
  {"$": "value", "class", "state"}, the state encoded as any value: the receiver builds its
  own object of that class;
- a member of an enum of upstream's (in a module of ComfyUI's checkout, the rules'
  upstream_modules: its hook modes...) as {"$": "enum", "type": "module.Class", "name"}:
  the receiver's own member, looked up in a module it imported already, never imported
  for it;
- a uuid.UUID (upstream's sampler puts the conds' in transformer_options, which a pack's
  attention patch gets) as {"$": "uuid", "hex"};
- an object of a kind of the rules (bridge/object_kinds.py: a MODEL, CLIP, VAE, a
  function...) as a remote object: {"$": "remote", "id", "kind", "type"} for one of the
  sender's, {"$": "own", "id"} for one of the receiver's going back (bridge/conversation.py
  makes and resolves both, through the same hooks as handles);
- anything else stays where it was made and crosses as a handle {"$": "handle", "id",
  "type"}, which the sender's side makes and only its maker resolves.

Whatever a peer sent is input, not truth: Decoder checks every tag, dtype, shape, size and
block, and raises ValueCrossingError with one line on anything else. So a bool tensor
holds 0 or 1 in each byte, as torch's own do (its kernels assume it), and the arena blocks
one message names never overlap: the encoder writes each tensor into a block of its own,
and a reader that copies blocks (the host) copies at most the arena for one message,
however often a peer names one block.

The walks of Encoder.encode, Decoder.collect_blocks and Decoder.build run in C++ where this
process has the extension (codec.py; default_codec()), and so do a CPU tensor's in its frame;
what stays in Python (other tensors' bytes, handles, remote objects, by_value classes, enums,
UUIDs, CUDA lends) it calls back, and the Python walks here are its reference (codec=None),
which tests/fuzz/codec_compare.py holds it to.
"""

import binascii
import enum
import functools
import math
import sys
import uuid

from . import by_value, codec, rules
from .arena import CONTROL_BYTES

DTYPES = ("float32", "float16", "bfloat16", "float64", "uint8", "int8", "int16", "int32", "int64", "bool",
          "complex64", "complex128")
MAX_DEPTH = 64        # nesting a peer may send
INLINE_BYTES = 4096   # a CPU tensor this small crosses in its frame (less than a page of the arena)
MAX_DIMENSIONS = 32   # torch's own limit on a tensor's dimensions
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "meta")
DTYPE_TAG_NAMES = ("float8_e4m3fn", "float8_e5m2")  # a torch.dtype may cross as a name beyond DTYPES
# Tags the sides' hooks resolve (handle_of makes them, resolve reads them back).
OBJECT_TAGS = ("handle", "remote", "own")


# The exact types JSON carries as themselves: a list or tuple of them (sigmas, a widget's
# values) is passed through item by item without a call each (a subclass, an IntEnum,
# takes the long way).
_PLAIN = frozenset((type(None), bool, int, float, str))


class ValueCrossingError(TypeError):
    """A value cannot cross, or a peer sent one that is malformed; the message is one line."""


def is_plain_key(key):
    return isinstance(key, str) and key != "$"


def default_codec():
    """The C++ codec, given this module's constants, or None where this process has none;
    looked for at the first encoder or decoder, not at import: a warm template imports this
    module before a worker's life gives it its environment (COMFY_SV_LIBRARY)."""
    global _codec
    if _codec is _UNSET:
        _codec = _load_codec()
    return _codec


def _load_codec():
    module = codec.load()
    if module is not None:  # the sizes of DTYPES' elements without torch, which a pack may lack
        sizes = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "uint8": 1, "int8": 1, "int16": 2,
                 "int32": 4, "int64": 8, "bool": 1, "complex64": 8, "complex128": 16}
        module.configure(ValueCrossingError, {dtype: sizes[dtype] for dtype in DTYPES},
                         frozenset(DTYPES + DTYPE_TAG_NAMES), frozenset(DEVICE_TYPES), MAX_DEPTH, INLINE_BYTES,
                         MAX_DIMENSIONS, CONTROL_BYTES)
    return module


_UNSET = object()
_codec = _UNSET


class Encoder:
    """Encodes one message's values. `arena`: the sender's OwnArena; `handle_of(value)`:
    the handle dict for a value that stays (or raises ValueCrossingError); `peer`: the
    receiver's arena as we map it (PeerArena), for tensors that go back as they came
    (None where we hold copies); `cuda`: the session's CudaExchange, where CUDA tensors
    may go by IPC; `blocks`: the session's lent_blocks.LentBlocks, which allocates and
    names again the block of a tensor sent before, unchanged (None: every tensor written).
    The blocks it wrote are in `lent`, those it named again in `named_again`, and the CUDA
    tensors it lent in `cuda_lent`, for the caller to account or take back; `sources` maps
    each block it wrote that holds exactly a tensor's own bytes to that tensor. `codec`:
    the C++ codec that walks the value (default_codec()), or None for this module's own walk."""

    def __init__(self, arena, handle_of, peer=None, cuda=None, blocks=None, codec=_UNSET):
        self.codec = default_codec() if codec is _UNSET else codec
        self.arena = arena
        self.handle_of = handle_of
        self.peer = peer
        self.cuda = cuda
        self.blocks = blocks
        self.lent = []
        self.named_again = []
        self.cuda_lent = []
        self.sources = {}
        self.written = {}  # id(tensor) -> (tensor, its tag): one written twice in a value is one block

    def encode(self, value):
        if self.codec is not None:
            return self.codec.encode(self, value)
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value)
        if isinstance(value, list):
            return [item if type(item) in _PLAIN else self.encode(item) for item in value]
        if isinstance(value, tuple):
            return {"$": "tuple", "items": [item if type(item) in _PLAIN else self.encode(item) for item in value]}
        if isinstance(value, (set, frozenset)) and all(type(item) in _PLAIN for item in value):
            return {"$": "set", "items": list(value)}
        if isinstance(value, dict):
            if all(is_plain_key(key) for key in value):
                return {key: self.encode(item) for key, item in value.items()}
            return {"$": "dict", "items": [[self.encode(key), self.encode(item)] for key, item in value.items()]}
        return self.encode_other(value)

    def encode_other(self, value):
        """What is not a plain value, a list, tuple or dict, or a set of plain values."""
        torch = _torch()
        if torch is not None and isinstance(value, torch.Tensor):
            return self.tensor(torch, value)
        if torch is not None and isinstance(value, torch.device):
            return {"$": "device", "type": value.type, "index": value.index}
        if torch is not None and isinstance(value, torch.dtype):
            return {"$": "dtype", "name": str(value).removeprefix("torch.")}
        if isinstance(value, uuid.UUID):
            return {"$": "uuid", "hex": value.hex}
        if isinstance(value, enum.Enum) and type(value).__module__.partition(".")[0] in rules.upstream_modules:
            return {"$": "enum", "type": f"{type(value).__module__}.{type(value).__qualname__}", "name": value.name}
        crossing = by_value.state_of(value)
        if crossing is not None:
            return {"$": "value", "class": crossing[0], "state": self.encode(crossing[1])}
        return self.handle_of(value)

    def tensor(self, torch, value):
        written = self.written.get(id(value))
        if written is not None and written[0] is value:
            return written[1]  # the same tensor again (a patch's context given as its value too)
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise ValueCrossingError(f"a tensor of dtype {dtype} cannot cross between processes "
                                     f"(these can: {', '.join(DTYPES)})")
        source = value.detach()
        if source.is_complex():
            source = source.resolve_conj()
        source = source.resolve_neg()
        nbytes = source.numel() * source.element_size()
        encoded = {"$": "tensor", "dtype": dtype, "shape": list(source.shape), "offset": 0, "nbytes": nbytes}
        if source.device.type == "cuda":
            encoded["device"] = "cuda"
        if nbytes == 0:
            return encoded
        if source.device.type == "cuda" and self.cuda is not None:
            shared = self.cuda.share(source, self.cuda_lent)
            if shared is not None:
                del encoded["offset"]
                encoded.update(shared)
                return encoded
        on_cpu = source.device.type == "cpu"
        if self.peer is not None and on_cpu and source.is_contiguous():
            theirs = self.peer.block_holding(source.data_ptr(), nbytes)
            if theirs is not None:
                del encoded["offset"]
                encoded["yours"], encoded["at"] = theirs
                return encoded
        order = _memory_order(source)
        if order is not None:  # written as it lies, rebuilt with its strides
            encoded["strides"] = list(source.stride())
            source = source.permute(order)
        if on_cpu and nbytes <= INLINE_BYTES:
            del encoded["offset"]
            encoded["inline"] = binascii.b2a_base64(_buffer_of(torch, source.contiguous()), newline=False).decode()
            encoded["n"] = len(self.written)  # the same tensor again is this again: one tensor to the receiver
        else:
            own_bytes = value.device.type == "cpu" and value.is_contiguous() and not value.is_conj() and \
                not value.is_neg()  # the block's bytes are the value's own, as they lie
            offset = self.blocks.named_again(value) if own_bytes and self.blocks is not None else None
            if offset is not None:  # sent before, unchanged since: its block again, no copy
                self.named_again.append(offset)
            else:
                offset = self.arena.allocate(nbytes) if self.blocks is None else self.blocks.allocate(nbytes)
                self.lent.append(offset)
                target = torch.from_numpy(self.arena.view(offset, nbytes)).view(source.dtype).view(source.shape)
                target.copy_(source)  # the one write: strides, devices and all
                if own_bytes:
                    self.sources[offset] = value
            encoded["offset"] = offset
        self.written[id(value)] = (value, encoded)
        return encoded


class Decoder:
    """Decodes one message's values. `peer`: the sender's arena as we read it (PeerArena or
    CopiedArena); `release(offset)`: called once we let go of that block (when the tensor
    over it is collected, or once it is copied); `resolve(handle_dict)`: the value a handle
    stands for here; `own_block(block, at, nbytes, dtype, shape, copies)`: the tensor for
    part of our own block lent to the sender, which it sent back (or raises
    ValueCrossingError), `copies` the copies of our blocks made for this message (block ->
    tensor), so that it copies each block at most once, however often the peer names it;
    `cuda`: the session's CudaExchange, for CUDA tensors by IPC. `codec`: as the Encoder's."""

    def __init__(self, peer, release, resolve, own_block=None, cuda=None, codec=_UNSET):
        self.codec = default_codec() if codec is _UNSET else codec
        self.peer = peer
        self.release = release
        self.resolve = resolve
        self.own_block = own_block
        self.cuda = cuda

    def decode(self, value):
        """The value; on a malformed one, every block and CUDA lend it named that no
        tensor was built over yet is released at once, and ValueCrossingError is raised."""
        # `blocks`: each block and CUDA lend the value names, once, in order (a dict: a value
        # may name thousands, and each is looked up as it is named).
        blocks, extents, self.viewed, self.own_copies, self.taken, self.built = {}, [], set(), {}, {}, {}
        self.inline_forms = {}  # "n" of a tensor in its frame -> what it was first
        try:
            self.collect_blocks(value, blocks, extents, 0)
            _check_apart(extents)
            return self.build(value)
        except (ValueCrossingError, TypeError, ValueError, KeyError, RuntimeError, RecursionError) as error:
            for kind, name in blocks:
                if (kind, name) in self.viewed:
                    continue
                if kind == "block":
                    self.release(name)
                else:
                    self.cuda.release(name)
            if isinstance(error, ValueCrossingError):
                raise
            raise ValueCrossingError(f"a malformed value: {type(error).__name__}: {error}") from None

    def collect_blocks(self, value, blocks, extents, depth):
        """Checks the whole value before anything is built from it; `extents` gathers the
        (offset, size) of each arena block it names that holds bytes."""
        if self.codec is not None:
            self.codec.collect(self, value, blocks, extents, depth)
        else:
            self._collect(value, blocks, extents, depth)

    def _collect(self, value, blocks, extents, depth):
        """collect_blocks' checks of `value` itself (the C++ codec's too, for what it leaves
        to Python); what it holds goes through collect_blocks."""
        if depth > MAX_DEPTH:
            raise ValueCrossingError(f"a value nested deeper than {MAX_DEPTH}")
        if isinstance(value, list):
            for item in value:
                if type(item) not in _PLAIN:
                    self.collect_blocks(item, blocks, extents, depth + 1)
        elif isinstance(value, dict):
            tag = value.get("$")
            if tag is None:
                for item in value.values():
                    self.collect_blocks(item, blocks, extents, depth + 1)
            elif tag == "tensor":
                form = self.check_tensor(value)
                if form == "cuda_ipc":
                    blocks[("cuda", value["cuda_ipc"]["lend"])] = None
                elif form == "arena" and ("block", value["offset"]) not in blocks:
                    blocks[("block", value["offset"])] = None
                    if value["nbytes"]:
                        extents.append((value["offset"], value["nbytes"]))
            elif tag == "set":
                if not (isinstance(value.get("items"), list) and all(type(item) in _PLAIN for item in value["items"])):
                    raise ValueCrossingError("a set whose items are not plain values")
            elif tag in ("tuple", "dict"):
                if not isinstance(value.get("items"), list):
                    raise ValueCrossingError(f"a {tag} without its items")
                for item in value["items"]:
                    if tag == "dict" and not (isinstance(item, list) and len(item) == 2):
                        raise ValueCrossingError("a dict item that is not a key and a value")
                    self.collect_blocks(item, blocks, extents, depth + 1)
            elif tag == "device":
                if value.get("type") not in DEVICE_TYPES or not (value.get("index") is None or
                                                                  type(value.get("index")) is int):
                    raise ValueCrossingError(f"a device {str(value.get('type'))[:20]!r} {str(value.get('index'))[:20]}")
            elif tag == "dtype":
                if value.get("name") not in DTYPES + DTYPE_TAG_NAMES:
                    raise ValueCrossingError(f"a dtype {str(value.get('name'))[:40]!r}")
            elif tag == "value":
                try:
                    by_value.check(value)
                except by_value.ByValueError as error:
                    raise ValueCrossingError(str(error)) from None
                self.collect_blocks(value["state"], blocks, extents, depth + 1)
            elif tag == "enum":
                _enum_member(value)
            elif tag == "uuid":
                if not (isinstance(value.get("hex"), str) and len(value["hex"]) == 32):
                    raise ValueCrossingError(f"a UUID {str(value.get('hex'))[:40]!r}")
                uuid.UUID(hex=value["hex"])
            elif tag not in OBJECT_TAGS:
                raise ValueCrossingError(f"an unknown tag {str(tag)[:40]!r}")
        elif not (value is None or isinstance(value, (bool, int, float, str))):
            raise ValueCrossingError(f"a {type(value).__name__}, which JSON does not make")

    def check_tensor(self, value):
        """Which form the tensor came in: "arena", "yours", "cuda_ipc" or "yours_cuda"."""
        form = next((form for form in ("yours", "cuda_ipc", "yours_cuda", "inline") if form in value), "arena")
        returned = form in ("yours", "yours_cuda")
        dtype, shape, nbytes = value.get("dtype"), value.get("shape"), value.get("nbytes")
        offset = value.get("at") if returned else value.get("offset")
        if form == "cuda_ipc":
            if self.cuda is None:
                raise ValueCrossingError("a CUDA tensor sent by IPC where none can be")
            self.cuda.check(value["cuda_ipc"])
            offset = value["cuda_ipc"]["at"]
        if dtype not in DTYPES:
            raise ValueCrossingError(f"a tensor of unknown dtype {str(dtype)[:40]!r}")
        if not (isinstance(shape, list) and len(shape) <= MAX_DIMENSIONS and
                all(type(size) is int and size >= 0 for size in shape)):
            raise ValueCrossingError("a tensor whose shape is not a list of sizes")
        if form == "inline":
            if type(nbytes) is not int or not 0 < nbytes <= INLINE_BYTES or not isinstance(value["inline"], str) or \
                    len(value["inline"]) != (nbytes + 2) // 3 * 4 or type(value.get("n")) is not int:
                raise ValueCrossingError(f"a tensor in its frame whose size is not its bytes' (at most {INLINE_BYTES})")
            offset = 0
        if type(offset) is not int or type(nbytes) is not int or (returned and type(value[form]) is not int):
            raise ValueCrossingError("a tensor without its block's offset and size")
        torch = _torch()
        if math.prod(shape) * _element_size(torch, dtype) != nbytes:
            raise ValueCrossingError(f"a tensor of {dtype} {shape} in a block of {nbytes} bytes")
        if (form == "yours" and self.own_block is None) or (form == "yours_cuda" and self.cuda is None):
            raise ValueCrossingError("a tensor sent back where none can be")
        if form == "arena" and nbytes and (offset < CONTROL_BYTES or offset + nbytes > self.peer.capacity):
            raise ValueCrossingError(f"a tensor block of {nbytes} bytes at {offset}, outside the arena")
        if "strides" in value and not (form in ("arena", "inline") and _dense_strides(shape, value["strides"])):
            raise ValueCrossingError("a tensor whose strides do not lay its elements out densely in its block")
        return form

    def build(self, value):
        if self.codec is not None:
            return self.codec.build(self, value)
        return self._build(value)

    def _build(self, value):
        """build's value of `value` itself (the C++ codec's too, for what it leaves to
        Python); what it holds goes through build."""
        if isinstance(value, list):
            return [item if type(item) in _PLAIN else self.build(item) for item in value]
        if not isinstance(value, dict):
            return value
        tag = value.get("$")
        if tag is None:
            return {key: self.build(item) for key, item in value.items()}
        if tag == "tuple":
            return tuple(item if type(item) in _PLAIN else self.build(item) for item in value["items"])
        if tag == "dict":
            return {_hashable(self.build(key)): self.build(item) for key, item in value["items"]}
        if tag == "set":
            return set(value["items"])
        if tag in OBJECT_TAGS:
            return self.resolve(value)
        if tag == "device":
            return _torch().device(value["type"], value["index"])
        if tag == "dtype":
            dtype = getattr(_torch(), value["name"], None)
            if dtype is None:  # a float8 of a newer torch's
                raise ValueCrossingError(f"a dtype {value['name']!r} this process's torch does not have")
            return dtype
        if tag == "value":
            try:
                return by_value.build(value["class"], self.build(value["state"]))
            except by_value.ByValueError as error:
                raise ValueCrossingError(str(error)) from None
        if tag == "enum":
            return _enum_member(value)
        if tag == "uuid":
            return uuid.UUID(hex=value["hex"])
        return self.tensor(value)

    def tensor(self, value):
        torch = _torch()
        dtype = getattr(torch, value["dtype"])
        on_cuda = "cuda_ipc" in value or "yours_cuda" in value
        key = None  # an arena block's view, by where it lies and what it is
        if value["nbytes"] == 0:
            result = torch.empty(value["shape"], dtype=dtype)
        elif "yours" in value:
            result = self.own_block(value["yours"], value["at"], value["nbytes"], dtype, value["shape"], self.own_copies)
        elif "cuda_ipc" in value:
            self.viewed.add(("cuda", value["cuda_ipc"]["lend"]))
            result = self.cuda.receive(value["cuda_ipc"], value["nbytes"]).view(dtype).view(value["shape"])
        elif "yours_cuda" in value:
            result = self.cuda.own(value["yours_cuda"], value["at"], value["nbytes"]).view(dtype).view(value["shape"])
        elif "inline" in value:
            # The same tensor written twice in one value (the same "n") is one tensor here.
            key = ("inline", value["n"])
            strides = tuple(value["strides"]) if "strides" in value else None
            same = (value["inline"], value["dtype"], tuple(value["shape"]), strides)
            if key in self.built:
                if self.inline_forms[value["n"]] != same:
                    raise ValueCrossingError(f"a tensor in its frame numbered {value['n']} twice, with two forms")
                return self.built[key]
            self.inline_forms[value["n"]] = same
            result = torch.frombuffer(bytearray(binascii.a2b_base64(value["inline"], strict_mode=True)), dtype=dtype)
            result = result.as_strided(value["shape"], strides) if strides is not None else result.view(value["shape"])
        else:
            # A block named twice in one value is one tensor written twice: taken once, and
            # the same tensor again where it is the same view, as the sender had it.
            strides = tuple(value["strides"]) if "strides" in value else None
            key = (value["offset"], value["nbytes"], value["dtype"], tuple(value["shape"]), strides,
                   value.get("device"))
            if key in self.built:
                return self.built[key]
            block = self.taken.get(value["offset"])
            if block is None:
                block = self.taken[value["offset"]] = self.peer.take(value["offset"], value["nbytes"], self.release)
                self.viewed.add(("block", value["offset"]))
            elif len(block) != value["nbytes"]:
                raise ValueCrossingError(f"a block at {value['offset']} named twice in one value, with two sizes")
            result = torch.from_numpy(block).view(dtype)
            result = (result.as_strided(value["shape"], value["strides"]) if strides is not None
                      else result.view(value["shape"]))
        if dtype is torch.bool:
            _check_bools(torch, result)
        if not on_cuda and value.get("device") == "cuda" and torch.cuda.is_available():
            result = result.to(torch.device("cuda", torch.cuda.current_device()))
        if key is not None:
            self.built[key] = result
        return result


def _buffer_of(torch, tensor):
    """A contiguous tensor's bytes as a buffer, without a copy."""
    try:
        return tensor.numpy()
    except TypeError:  # a dtype numpy lacks (bfloat16): as int16, of its size, which torch views whatever
        # the strides (a one-element slice's need not be 1, and torch calls it contiguous)
        return tensor.view(torch.int16).numpy()


def _check_apart(extents):
    """Arena blocks (offset, size) that one message names must not overlap."""
    extents.sort()
    for (offset, nbytes), (next_offset, next_nbytes) in zip(extents, extents[1:]):
        if offset + nbytes > next_offset:
            raise ValueCrossingError(f"tensors whose blocks overlap ({nbytes} bytes at {offset} and {next_nbytes} "
                                     f"bytes at {next_offset}): each tensor comes in a block of its own")


def _check_bools(torch, tensor):
    """A bool tensor holds 0 or 1 in each byte; anything else would be undefined to torch."""
    if tensor.numel() == 0:
        return
    raw = tensor.view(torch.uint8)
    bad = raw[raw > 1]
    if bad.numel():
        raise ValueCrossingError(f"a bool tensor with {bad.numel()} bytes other than 0 and 1 "
                                 f"(the first is {int(bad[0])})")


def _memory_order(tensor):
    """The dimensions, outermost first, of a tensor that is a permutation of a contiguous
    one but not contiguous itself; None for any other."""
    if tensor.is_contiguous() or tensor.dim() < 2:
        return None
    order = sorted(range(tensor.dim()), key=lambda d: (tensor.stride(d), tensor.shape[d]), reverse=True)
    return order if tensor.permute(order).is_contiguous() else None


def _dense_strides(shape, strides):
    """Whether `strides` lay out `shape` densely from the block's start: every element in it once."""
    if not (isinstance(strides, list) and len(strides) == len(shape) and
            all(type(stride) is int and stride >= 0 for stride in strides)):
        return False
    expected = 1
    for size, stride in sorted(((size, stride) for size, stride in zip(shape, strides) if size > 1),
                               key=lambda pair: pair[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _enum_member(value):
    """The receiver's own member an enum tag names, in an upstream module imported already."""
    module, _, qualname = str(value.get("type"))[:200].rpartition(".")
    found = sys.modules.get(module) if module.partition(".")[0] in rules.upstream_modules else None
    cls = getattr(found, qualname, None)
    member = cls.__members__.get(value.get("name")) if isinstance(cls, type) and issubclass(cls, enum.Enum) else None
    if member is None:
        raise ValueCrossingError(f"an enum member {str(value.get('type'))[:80]}.{str(value.get('name'))[:40]} this "
                                 "process does not have")
    return member


def _hashable(key):
    if isinstance(key, list):
        raise ValueCrossingError("a dict key that is a list")
    return key


@functools.lru_cache(maxsize=None)
def _element_size(torch, dtype):
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def _torch():
    """torch, where this process has it (a pack without torch still passes plain values)."""
    global _codec_has_torch
    try:
        import torch
    except ImportError:
        return None
    if not _codec_has_torch and _codec not in (None, _UNSET):  # its tensors in their frames, from now on
        _codec.configure_torch(torch.Tensor, torch.frombuffer,
                              {getattr(torch, dtype): (dtype, _element_size(torch, dtype)) for dtype in DTYPES},
                              {dtype: getattr(torch, dtype) for dtype in DTYPES}, torch.bool, torch.strided)
        _codec_has_torch = True
    return torch


_codec_has_torch = False
