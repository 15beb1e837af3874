"""Remote objects without a second process (bridge/remote.py, bridge/object_kinds.py): what a
proxy is to ComfyUI's code (isinstance, copy, pickle, callable), what its owner serves and
refuses, and the owner's table of what it handed over. The uses go straight to the owner's
serve() through a loop-back session; tests/python/ runs them across processes. What a
pack's attribute path may reach at the host, and which of the host's callables it may be
handed (check_walks), each refusal one line and one log line naming the pack. And what
a patch's call carries besides: upstream's conditioning values by value, and a tensor
given twice (a patch's context as its value too) written once and read as one tensor.

    remote_objects_check.py
"""

import builtins
import copy
import enum
import functools
import inspect
import logging
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
from comfy_supervisor import crossing  # noqa: E402
from comfy_supervisor.bridge import remote, values, written_back  # noqa: E402
from comfy_supervisor.bridge.object_kinds import CALLABLE, kind_of  # noqa: E402
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
        return remote.serve(obj, kind, do, name, args, kwargs, value, enforce="pack loop-back")


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
    crossing.install()  # the kinds and value classes, as the host's install gives them
    session = LoopBack()
    model = comfy.model_patcher.ModelPatcher(comfy.model_base.model_from_config({}), None, None)
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
    check_walks(report)
    return report.finish()


class LogLines(logging.Handler):
    """The host's log lines, as the supervisor's log gets them from its stderr."""

    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def check_walks(report):
    """A pack's path argument is public names through ComfyUI's own objects, and a callable
    of the host's reaches a pack only where it is handed out on purpose: each refusal is
    one line, changes nothing, and is one line in the log, naming the pack."""
    logged = LogLines()
    logging.getLogger("comfy_supervisor").addHandler(logged)
    model = comfy.model_patcher.ModelPatcher(comfy.model_base.model_from_config({}), None, None)
    kind, pack = kind_of(model), "pack walker"

    def use(name, *args):
        return lambda: remote.serve(model, kind, "call", name, list(args), {}, None, pack)

    refusal = raised(use("get_model_object", "__class__.__init__.__builtins__.get"), remote.RemoteError)
    report.check(refusal is not None and "\n" not in refusal and "no private or dunder name" in refusal and
                 logged.lines[-1:] == [f"comfy-supervisor: pack walker: refused its use of the host's objects: {refusal}"],
                 f"upstream's walk of get_model_object to the host's builtins is refused, in one line and one log "
                 f"line naming the pack ({refusal}; {logged.lines[-1:]})")
    remote.REFUSAL_LOG_INTERVAL_S, interval = 3600.0, remote.REFUSAL_LOG_INTERVAL_S
    bad = ["_private", "model_sampling.__dict__", "model_sampling._x", "", "a..b", "caf\u00e9", 7, ["model"],
           "x" * 500, "a." * 40 + "a", "diffusion_model.forward.anything", "latent_format.process_in.x"]
    refusals = [raised(use("get_model_object", path), remote.RemoteError) for path in bad]
    report.check(all(r is not None and "\n" not in r for r in refusals) and len(logged.lines) == 1,
                 f"a path of a private name, a dunder, no name, a long one, or through a method is refused in one "
                 f"line, and a loop of refusals is no more lines in the log ({refusals})")
    model.model.helpers, model.model.cls = os, dict  # what no model holds, for the walk to meet
    refusals = [raised(use("get_model_object", path), remote.RemoteError) for path in ("helpers.path", "cls.fromkeys")]
    report.check(all(r is not None and ("is a module" in r or "is a type" in r) for r in refusals),
                 f"a path of public names that passes through a module or a class is refused ({refusals})")
    del model.model.helpers, model.model.cls
    found = [use("get_model_object", path)() for path in ("model_sampling", "diffusion_model.block.attn2",
                                                         "diffusion_model.proj_in.weight", "latent_format")]
    report.check(found[0] is model.model.model_sampling and found[1] is model.model.diffusion_model.block.attn2 and
                 found[2] is model.model.diffusion_model.proj_in.weight,
                 "the paths real packs read are served (model_sampling, diffusion_model.block.attn2, a weight)")

    def forward(*args, **kwargs):
        return None

    apply_model = comfy.model_base.BaseModel.apply_model
    refusals = [raised(use("add_object_patch", path, forward), remote.RemoteError)
                for path in ("__class__.apply_model", "diffusion_model._forward", "model_sampling.__class__")]
    report.check(all(r is not None and "\n" not in r for r in refusals) and model.object_patches == {},
                 f"an object patch at a private or dunder path is refused, and nothing is added ({refusals})")
    use("add_object_patch", "diffusion_model.forward", forward)()
    overlap = raised(use("add_object_patch", "diffusion_model", forward), remote.RemoteError)
    model.patch_model()
    patched = model.model.diffusion_model.forward is forward
    model.unpatch_model()
    report.check(patched and overlap is not None and "overlaps" in overlap and
                 comfy.model_base.BaseModel.apply_model is apply_model and comfy.model_base.TinyUNet.forward is not forward,
                 f"a patch of diffusion_model.forward is set on the instance; one over another is refused ({overlap})")
    check_handed_to_pack(report, model, pack)
    remote.REFUSAL_LOG_INTERVAL_S = 0.0
    raised(use("get_model_object", "_again"), remote.RemoteError)
    remote.REFUSAL_LOG_INTERVAL_S = interval
    report.check(logged.lines[-1].endswith("more refused since the last such line)"),
                 f"the next line says how many were refused unsaid ({logged.lines[-1]})")
    logging.getLogger("comfy_supervisor").removeHandler(logged)


class Patch:
    """A callable object as a pack's or upstream's patch is one (IPAdapter's, upstream's
    wrapper executor): its __call__ is Python."""

    def __call__(self, *args):
        return args


def check_handed_to_pack(report, model, pack):
    def closure(args):
        return args

    def crosses(value):
        try:
            return remote.export_kind(value, pack)
        except remote.RemoteError as error:
            return str(error)

    withheld = {"eval": builtins.eval, "getattr": getattr, "os.path.join": os.path.join, "torch.load": torch.load,
                "a partial": functools.partial(closure), "a class": dict, "a module": os,
                "a bound method of no kind": model.model.diffusion_model.forward,
                "a bound method its kind does not list": model.unpatch_model,
                "a function's __call__": closure.__call__, "its globals' get": closure.__globals__.get}
    answers = {what: crosses(value) for what, value in withheld.items()}
    report.check(all(isinstance(a, str) and "\n" not in a and "is never handed to a pack" in a for a in answers.values()),
                 f"builtins, classes, modules, the standard library's and torch's functions, bound methods of other "
                 f"objects are never handed to a pack ({answers})")
    handed = [model.clone, model.model.apply_model, closure, Patch(), model]
    report.check([crosses(v) for v in handed] == [CALLABLE, CALLABLE, CALLABLE, CALLABLE, kind_of(model)],
                 "a listed method of a listed object, a Python function or callable object, a listed object are")
    frame = sys._getframe()
    report.check(crosses(frame) is None and crosses(closure.__code__) is None and
                 remote.export_kind(builtins.eval) is CALLABLE,
                 "a frame or code object is no remote object (no side makes one a value); a pack's own callables "
                 "cross to the host as ever")


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
