"""Remote objects without a second process (bridge/remote.py, bridge/object_kinds.py): what a
proxy is to ComfyUI's code (isinstance, copy, pickle, callable), what its owner serves and
refuses, and the owner's table of what it handed over. The uses go straight to the owner's
serve() through a loop-back session; tests/python/ runs them across processes. And what
a patch's call carries besides: upstream's conditioning values by value, and a tensor
given twice (a patch's context as its value too) written once and read as one tensor.

    remote_objects_check.py
"""

import copy
import enum
import inspect
import os
import pickle
import sys
import threading
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "host"))
sys.path.insert(0, os.path.join(ROOT, "tests", "host", "fake_comfyui"))
sys.path.insert(0, os.path.join(ROOT, "worker", "python"))

from check_report import CheckReport  # noqa: E402

import comfy.controlnet  # noqa: E402
import comfy.model_base  # noqa: E402
import comfy.model_patcher  # noqa: E402
import comfy.model_sampling  # noqa: E402
import torch  # noqa: E402
from comfy_supervisor.bridge import remote, values, written_back  # noqa: E402
from comfy_supervisor.bridge.object_kinds import kind_of  # noqa: E402
from comfy_supervisor.bridge.values import ValueCrossingError  # noqa: E402


class LoopBack:
    """A session whose peer is this process: a use is served at once, as the host serves a pack."""

    def __init__(self):
        self.exports = remote.Exports()
        self.uses = []

    def hand_over(self, value):
        kind = kind_of(value)
        number = self.exports.export(value, kind)
        return remote.make_proxy(remote.Link(self, number, kind, remote.type_path_of(value), "the host"))

    def invoke(self, link, do, name, args, kwargs, value):
        self.uses.append((do, name))
        obj, kind = self.exports.get(link.id)
        return remote.serve(obj, kind, do, name, args, kwargs, value, enforce=True)


def raised(call, kind):
    try:
        call()
    except kind as error:
        return str(error)
    return None


def upstream_enum_crosses():
    class EnumHookMode(enum.Enum):  # as if comfy.model_base had it
        MinVram = "minvram"
    EnumHookMode.__module__, EnumHookMode.__qualname__ = "comfy.model_base", "EnumHookMode"
    comfy.model_base.EnumHookMode = EnumHookMode
    try:
        encoded = values.Encoder(None, handle_of=None).encode([EnumHookMode.MinVram])
        back = values.Decoder(None, None, None).decode(encoded)
        refused = raised(lambda: values.Decoder(None, None, None).decode({"$": "enum", "type": "os.path.sep",
                                                                          "name": "x"}), values.ValueCrossingError)
        conds = [uuid.uuid4(), uuid.uuid4()]  # upstream's transformer_options["uuids"]
        same_uuids = values.Decoder(None, None, None).decode(values.Encoder(None, None).encode(conds)) == conds
        return back == [EnumHookMode.MinVram] and back[0] is EnumHookMode.MinVram and refused is not None and same_uuids
    finally:
        del comfy.model_base.EnumHookMode


def released_with_finalizer(session):
    """Whether an object whose finalizer looks up another exported object (as upstream's
    ModelPatcher.__del__ uses a pack's patches, whose uses may come back) is let go
    without the table's lock held."""
    other = session.exports.export(len, kind_of(len))
    seen = []

    class Finalized:
        def __call__(self):
            pass

        def __del__(self):
            seen.append(session.exports.get(other)[0] is len)

    number = session.exports.export(Finalized(), kind_of(len))
    worker = threading.Thread(target=session.exports.release, args=([[number, 1], [number + 1000, 1]],), daemon=True)
    worker.start()
    worker.join(5)
    return not worker.is_alive() and seen == [True]


def main():
    report = CheckReport("remote objects")
    session = LoopBack()
    model = comfy.model_patcher.ModelPatcher(comfy.model_base.BaseModel(comfy.model_base.TinyUNet()), None, None)
    proxy = session.hand_over(model)
    report.check(isinstance(proxy, comfy.model_patcher.ModelPatcher), "a MODEL's proxy is a ModelPatcher to isinstance")
    report.check(type(proxy) is not comfy.model_patcher.ModelPatcher, "and is not one itself")
    report.check(copy.deepcopy(proxy) is proxy and copy.copy(proxy) is proxy, "a copy of a proxy is the proxy")
    refusal = raised(lambda: pickle.dumps(proxy), TypeError)
    report.check(refusal is not None and "never pickled" in refusal, f"a proxy is never pickled ({refusal})")
    report.check(not callable(proxy), "a MODEL's proxy is not callable, as a ModelPatcher is not")

    session.uses.clear()
    clone = proxy.clone()
    report.check(session.uses == [("call", "clone")], f"a method is one use, called by name ({session.uses})")
    report.check(clone.is_clone(model), "the clone is the owner's, made by the owner")
    options = proxy.model_options
    report.check(options == model.model_options and session.uses[-1] == ("get", "model_options"),
                 "an attribute is read on the owner's side")
    proxy.model_options = {"transformer_options": {"x": 1}}
    report.check(model.model_options == {"transformer_options": {"x": 1}}, "model_options is set on the owner's side")
    session.uses.clear()
    options = proxy.model_options
    options["transformer_options"]["y"] = 2
    inner = options["transformer_options"].copy()
    inner["z"] = 3
    report.check(model.model_options == {"transformer_options": {"x": 1, "y": 2}} and
                 session.uses == [("get", "model_options"), ("set", "model_options")],
                 "a change in place of what was read is set back, one use; a copy's is the pack's own "
                 f"({session.uses})")
    report.check(type(copy.deepcopy(options)) is dict and type(pickle.loads(pickle.dumps(options))) is dict,
                 "what was read copies and pickles as a plain dict")
    for _, value in proxy.model_options.items():
        value["w"] = 0
    report.check(model.model_options["transformer_options"].get("w") == 0,
                 "a change to a value reached by iterating what was read is set back too")
    kept = proxy.model_options["transformer_options"]
    written_back.let_go()  # the node call that read it returned (pack_worker's NodeServer.drop_reads)
    refusal = raised(lambda: kept.update(late=1), ReferenceError)
    report.check(refusal is not None and "\n" not in refusal and "after the node call" in refusal and
                 "late" not in kept,
                 f"a change after the node call that read it returned is refused in one line ({refusal})")

    refusal = raised(lambda: proxy.unpatch_model(), remote.RemoteError)
    report.check(refusal is not None and "may not call unpatch_model" in refusal and "MODEL" in refusal,
                 f"a method not on MODEL's list is refused, in one line ({refusal})")
    refusal = raised(lambda: setattr(proxy, "load_device", "cpu"), remote.RemoteError)
    report.check(refusal is not None and "may not set load_device" in refusal,
                 f"an attribute not on the list cannot be set ({refusal})")
    refusal = raised(lambda: remote.serve(model, kind_of(model), "get", "__dict__", [], {}, None, False),
                     remote.RemoteError)
    report.check(refusal is not None, f"a private name is refused even to the host ({refusal})")
    refusal = raised(lambda: session.exports.get(99), remote.RemoteError)
    report.check(refusal is not None and "was never handed over" in refusal.replace("no object 99 was handed over here",
                                                                                    "was never handed over"),
                 f"an id never handed over is an error ({refusal})")

    control = session.hand_over(comfy.controlnet.ControlNet())
    report.check(isinstance(control, comfy.controlnet.ControlBase), "a CONTROL_NET's proxy is a ControlBase")
    copied = control.copy().set_cond_hint(torch.ones(1, 8, 8, 3), 0.5)
    report.check(copied.strength == 0.5, "a control net is copied and its hint set on the owner's side")

    class Schedule(comfy.model_sampling.ModelSamplingDiscrete, comfy.model_sampling.EPS):
        pass  # a pack's own class (upstream's sampling object is one): not a class of the receiver
    schedule = session.hand_over(Schedule())
    session.uses.clear()
    scaled = schedule.calculate_input(torch.ones(1), torch.ones(1, 1))
    report.check(type(schedule).__mro__[1] is comfy.model_sampling.ModelSamplingDiscrete and scaled.shape == (1, 1)
                 and session.uses == [("get", "calculate_input")],
                 f"a method of a mixin the receiver's class lacks is read, then called, at the owner ({session.uses})")

    def patch(n, c, v, extra):
        return n * 2, c, v

    callable_proxy = session.hand_over(patch)
    report.check(callable(callable_proxy), "a function's proxy is callable")
    report.check(callable_proxy(torch.ones(1), None, None, {})[0].item() == 2.0, "and calls the function")
    signature = inspect.signature(callable_proxy)
    report.check(list(signature.parameters) == ["n", "c", "v", "extra"],
                 f"a function's proxy has the function's signature, read from its owner ({signature})")

    def cfg(args, scale=1.0):
        return args
    signature = inspect.signature(session.hand_over(cfg))
    report.check(len(signature.parameters) == 2 and signature.parameters["scale"].default is remote.OWNERS_DEFAULT,
                 f"with a default that stays at its owner ({signature})")
    report.check(upstream_enum_crosses(), "a member of an enum of upstream's crosses by name, as the receiver's own "
                                          "member (upstream's sampler sets a MODEL's hook_mode to EnumHookMode.MinVram); "
                                          "a UUID by value")
    report.check(released_with_finalizer(session), "an object let go is dropped after the owner's table is unlocked: "
                                                   "its finalizer may use the table again")
    number = object.__getattribute__(callable_proxy, "_remote").id
    session.exports.release([[number, 1]])
    refusal = raised(lambda: callable_proxy(torch.ones(1), None, None, {}), remote.RemoteError)
    report.check(refusal is not None, f"an object let go cannot be used again ({refusal})")
    check_by_value(report)
    check_same_tensor_twice(report)
    return report.finish()


def check_same_tensor_twice(report):
    from comfy_supervisor.bridge.arena import OwnArena, PeerArena
    from comfy_supervisor.bridge.values import Decoder, Encoder
    fd = os.memfd_create("arena")
    os.ftruncate(fd, 1 << 20)
    own, peer = OwnArena(os.dup(fd)), PeerArena(os.open(f"/proc/self/fd/{fd}", os.O_RDONLY))
    os.close(fd)
    context, other = torch.rand(1, 6, 256), torch.rand(1, 6, 256)  # over 4 KiB: in the arena
    encoder = Encoder(own, None)
    encoded = encoder.encode([context, context, {"value": context}, other])
    report.check(len(encoder.lent) == 2, f"a tensor given three times in one value is one block ({encoder.lent})")
    released = []
    decoded = Decoder(peer, released.append, None).decode(encoded)
    report.check(decoded[0] is decoded[1] is decoded[2]["value"] and decoded[3] is not decoded[0] and
                 torch.equal(decoded[0], context) and torch.equal(decoded[3], other),
                 "and is read as one tensor, as the sender had it")
    del decoded
    report.check(sorted(released) == sorted(encoder.lent), f"each block is released once ({released})")
    twice = [dict(encoded[3]), dict(encoded[3], nbytes=encoded[3]["nbytes"] // 2, shape=[1, 3, 256])]
    refusal = raised(lambda: Decoder(peer, released.append, None).decode(twice), ValueCrossingError)
    report.check(refusal is not None and "two sizes" in refusal, f"a block named with two sizes is refused ({refusal})")
    small = torch.rand(1, 6, 16)
    equal = small.clone()
    encoded = Encoder(own, None).encode([small, small, {"value": small}, equal])
    decoded = Decoder(peer, released.append, None).decode(encoded)
    report.check(decoded[0] is decoded[1] is decoded[2]["value"] and decoded[3] is not decoded[0] and
                 torch.equal(decoded[0], small) and torch.equal(decoded[3], equal),
                 "a small tensor given three times in its frame is read as one tensor, an equal one as another")
    forged = [dict(encoded[0]), dict(Encoder(own, None).encode(torch.rand(1, 6, 16)), n=encoded[0]["n"])]
    refusal = raised(lambda: Decoder(peer, released.append, None).decode(forged), ValueCrossingError)
    report.check(refusal is not None and "two forms" in refusal,
                 f"a number given to two tensors in one frame is refused ({refusal})")


def check_by_value(report):
    """comfy.conds' values cross as copies of the receiver's own class; a tag naming any other
    class, or a state of other fields, is refused in one line; a subclass is a remote object."""
    import comfy.conds
    from comfy_supervisor.bridge.values import Decoder, Encoder

    def no_handle(value):
        raise ValueCrossingError(f"a {type(value).__name__} is not a value here")

    def decode(tag):
        return Decoder(None, lambda offset: None, lambda t: ("resolved", t.get("$"))).decode(tag)

    values = [comfy.conds.CONDRegular(7.5), comfy.conds.CONDCrossAttn(2), comfy.conds.CONDNoiseShape("x"),
              comfy.conds.CONDConstant(3), comfy.conds.CONDList([1, 2])]
    encoded = Encoder(None, no_handle).encode(values)
    report.check([tag.get("class") for tag in encoded] == [type(v).__name__ for v in values],
                 f"each conditioning value crosses by value under its class's name ({encoded})")
    back = decode(encoded)
    report.check([(type(v), v.cond) for v in back] == [(type(v), v.cond) for v in values] and
                 all(b is not v for b, v in zip(back, values)), "and is rebuilt as a copy of the same class")
    for tag in ({"$": "value", "class": "Popen", "state": {"cond": 1}},
                {"$": "value", "class": "CONDRegular", "state": {"cond": 1, "__class__": "x"}},
                {"$": "value", "class": "CONDRegular", "state": "cond"}):
        refusal = raised(lambda: decode(tag), ValueCrossingError)
        report.check(refusal is not None and "\n" not in refusal, f"a malformed value class is refused ({refusal})")

    class PackCond(comfy.conds.CONDRegular):
        pass

    report.check(kind_of(PackCond(1)).name == "COND", "a pack's subclass of a conditioning value is a remote object")


if __name__ == "__main__":
    sys.exit(main())
