"""A custom node pack that misbehaves toward the host, for the node-call bridge's tests
(tests/python/node_calls_test.cpp) and the soak: a node that never ends and never checks
for interrupts, a node that only reports progress, a node that breaks the call protocol
from inside its worker, a node that floods the browser with messages, and nodes that
answer with values no encoder makes (a bool tensor of other bytes than 0 and 1, blocks
that overlap), as a compromised pack could: it reaches anything in its own process, the
call socket and its arena included; and a node that probes the host's objects it was
handed, and the ids it was not, by writing the uses itself (ProbeHostObjects), and walks
past them by names, paths and callables (walks.py, WalkHostObjects), and probes of its
replica of the host's MODEL: its uses of the host written by hand, its weights written
(replicas.py)."""

import gc
import os
import struct
import time

import comfy.utils

CATEGORY = "comfy-supervisor tests"
# A frame's length word and a frame's JSON, as bridge/channel.py reads them.
_LENGTH = struct.Struct("<I")
OVERSIZE = (64 << 20) + 1  # one byte over the channel's MAX_FRAME_BYTES
NESTING = 100_000          # deeper than Python's JSON decoder recurses


class Node:
    CATEGORY = CATEGORY
    FUNCTION = "run"


class LoopForever(Node):
    """Never returns and never checks for interrupts: only ending its worker stops it."""
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        while True:
            time.sleep(0.01)


class ProgressOnly(Node):
    """Reports progress for `seconds` and never checks for interrupts itself: in ComfyUI's
    own process, upstream's progress hook ends it at Cancel."""
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seconds": ("FLOAT", {"default": 10.0})}}

    def run(self, seconds):
        steps = max(1, int(seconds / 0.01))
        bar = comfy.utils.ProgressBar(steps)
        for step in range(steps):
            time.sleep(0.01)
            bar.update_absolute(step + 1, steps)
        return (steps,)


def _node_server():
    """The worker's node server, as a hostile pack finds it: among the process's objects."""
    return next(obj for obj in gc.get_objects() if type(obj).__name__ == "NodeServer")


def _call_socket():
    """The worker's call socket to the host: through the node server running this call."""
    session, _ = _node_server().current
    return session.channel.fd


def _answer_with(blocks, tensors):
    """Answers the call running now with `tensors` (their JSON as the host reads them) over
    `blocks` of the worker's arena ((nbytes, the bytes its start holds) each; a tensor's
    "offset" is the index of its block, and "within", if given, how far into it the tensor
    starts), before the node returns: the host takes this as
    the call's result, and the node server's own answer after it as a stale one."""
    import numpy
    server = _node_server()
    session, call_id = server.current
    offsets = []
    for nbytes, data in blocks:
        offset = server.arena.allocate(nbytes)
        server.arena.view(offset, len(data))[:] = numpy.frombuffer(data, dtype=numpy.uint8)
        offsets.append(offset)
    value = [{**{key: item for key, item in tensor.items() if key != "within"},
              "offset": offsets[tensor["offset"]] + tensor.get("within", 0)} for tensor in tensors]
    session.channel.send({"op": "result", "id": call_id, "value": value})


class BreakProtocol(Node):
    """Writes a frame the host must refuse into the call socket, then returns as if nothing
    happened: "oversize" announces a frame over 64 MiB, "nested" sends JSON nested deeper
    than the decoder goes."""
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"kind": (["oversize", "nested"],)}}

    def run(self, kind):
        if kind == "oversize":
            frame = _LENGTH.pack(OVERSIZE)
        else:
            data = b"[" * NESTING + b"]" * NESTING
            frame = _LENGTH.pack(len(data)) + data
        os.write(_call_socket(), frame)
        return (0,)


class FloodBrowser(Node):
    """Sends the browser `count` small messages as fast as it can, then `big` of `big_bytes`
    each, through upstream's PromptServer, as a pack's send_sync would."""
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"count": ("INT", {"default": 100000}), "big": ("INT", {"default": 3}),
                             "big_bytes": ("INT", {"default": 60 << 20})}}

    def run(self, count, big, big_bytes):
        from server import PromptServer
        server = PromptServer.instance
        for number in range(count):
            server.send_sync("hostile.flood", {"number": number}, server.client_id)
        junk = "x" * big_bytes
        for number in range(big):
            server.send_sync("hostile.flood.big", {"number": number, "junk": junk}, server.client_id)
        return (count + big,)


class BadBool(Node):
    """Answers with a bool tensor whose bytes are 0, 1, 2 and 255: torch's own copy makes
    every byte 0 or 1, so it writes the block itself."""
    RETURN_TYPES = ("*",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        _answer_with([(4, bytes([0, 1, 2, 255]))],
                     [{"$": "tensor", "dtype": "bool", "shape": [4], "offset": 0, "nbytes": 4}])
        return (None,)


class RepeatBlock(Node):
    """Answers with `times` tensors that overlap in one block of `nbytes`, each a page shorter
    than the one before: a host that copies each tensor it is handed would copy nearly
    `times` x `nbytes`, more than the arena. (One block named again with the same extent
    is one tensor, taken once.)"""
    RETURN_TYPES = ("*",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"nbytes": ("INT", {"default": 16 << 20}), "times": ("INT", {"default": 16})}}

    def run(self, nbytes, times):
        tensors = [{"$": "tensor", "dtype": "uint8", "shape": [nbytes - n * 4096], "offset": 0, "within": n * 4096,
                    "nbytes": nbytes - n * 4096} for n in range(times)]
        _answer_with([(nbytes, b"\x01")], tensors)
        return (None,)


class Add(Node):
    """A well-behaved node: the pack's next life answers it."""
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"a": ("INT", {"default": 0}), "b": ("INT", {"default": 0})}}

    def run(self, a, b):
        return (a + b,)


class ProbeHostObjects(Node):
    """Given a host MODEL, asks the host for what a pack may not have, each as a use written
    by hand on the call socket's conversation: ids it was never handed, methods and
    attributes off MODEL's list, private names, a function that is not forwarded, an
    object of the host's named as an argument by an id it was never handed. Returns each
    answer, (outcome, error type, message), for the host to check that each is an error."""
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def run(self, model):
        import json
        from comfy_supervisor.bridge.remote import link_of
        from comfy_supervisor.crossing.replicas import origin_of
        link = link_of(origin_of(model) or model)  # the host's MODEL a replica stands for
        conversation, mine = link.session, link.id
        probes = [
            ({"id": mine + 1000, "do": "get", "name": "model"}, [[], {}, None]),
            ({"id": -1, "do": "call", "name": "clone"}, [[], {}, None]),
            ({"id": "1", "do": "call", "name": "clone"}, [[], {}, None]),
            ({"id": mine, "do": "call", "name": "unpatch_model"}, [[], {}, None]),
            ({"id": mine, "do": "call", "name": "patch_model"}, [[], {}, None]),
            ({"id": mine, "do": "set", "name": "load_device"}, [[], {}, "cpu"]),
            ({"id": mine, "do": "get", "name": "__dict__"}, [[], {}, None]),
            ({"id": mine, "do": "get", "name": "_private"}, [[], {}, None]),
            ({"id": mine, "do": "call", "name": "__init__"}, [[], {}, None]),
            ({"id": mine, "do": "delete", "name": "model"}, [[], {}, None]),
            ({"function": "os.system"}, [["true"], {}, None]),
            ({"function": "builtins.eval"}, [["1"], {}, None]),
            ({"id": mine, "do": "call", "name": "add_object_patch"}, [["x", {"$": "own", "id": mine + 999}], {}, None]),
        ]
        answers = []
        for fields, payload in probes:
            call = next(conversation.calls)
            with conversation.answered:
                conversation.answers[call] = None
            conversation.session.channel.send({"op": "invoke", "call": call, **fields, "payload": payload})
            outcome, detail = conversation._await(call, "a probe")
            answers.append([outcome, detail.get("type") if outcome == "error" else None,
                            detail.get("message") if outcome == "error" else repr(detail)])
        return (json.dumps(answers),)


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (LoopForever, ProgressOnly, BreakProtocol, FloodBrowser, BadBool,
                                                      RepeatBlock, Add, ProbeHostObjects)}
from . import callbacks  # noqa: E402 (functions the host calls back that never return)
NODE_CLASS_MAPPINGS.update(callbacks.NODE_CLASS_MAPPINGS)
from . import walks  # noqa: E402 (walks of the host's objects by names, paths and callables)
NODE_CLASS_MAPPINGS.update(walks.NODE_CLASS_MAPPINGS)
from . import kept_descriptor  # noqa: E402 (a mirror's memfd kept past its revocation)
NODE_CLASS_MAPPINGS.update(kept_descriptor.NODE_CLASS_MAPPINGS)
from . import replicas  # noqa: E402 (a replica's uses of the host written by hand, its weights written)
NODE_CLASS_MAPPINGS.update(replicas.NODE_CLASS_MAPPINGS)
