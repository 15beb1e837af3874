"""The hostile pack's walks of the host's objects (docs/SECURITY.md, "What a pack can reach of
the host's objects"): WalkHostObjects tries each way a name, a path or a callable the pack
sends could reach past what the host hands out, through the pack's own proxies as any
pack's code would, and through uses written by hand where the proxy would answer itself.
Each attempt goes as far as it can: one that is handed a callable of the host's calls it
to run `eval` in the host, which writes the canary file with the host's pid. The host's
check (tests/host/remote_checks.py, remote-walk) expects each to be refused in one line,
the canary never written and the host's objects unchanged. scripts/soak can run it too:
walk(model, hooked, canary, flood) is the whole walk, with no node around it."""

import json

from comfy_supervisor.bridge.remote import RemoteError, link_of
from comfy_supervisor.crossing.replicas import origin_of

CATEGORY = "comfy-supervisor tests"


def _object_patch(*args, **kwargs):
    """What the pack would put in the host's class or private attribute."""
    return None


def walk(model, hooked, canary, flood):
    """Every attempt, as [what, outcome, message]: outcome "refused" (a RemoteError of one
    line), "error" (anything else raised) or "reached" (the host answered)."""
    code = f"open({canary!r}, 'w').write(str(__import__('os').getpid()))"
    # A replica is this worker's own objects: the walks go through the host's MODELs it
    # stands for, which a pack reaches from it.
    model, hooked = origin_of(model) or model, origin_of(hooked) or hooked
    link, conversation = link_of(model), link_of(model).session
    clone = model.clone()
    clone = origin_of(clone) or clone

    def at_owner(do, name, *args, value=None):
        return link.invoke(do, name, args, value=value)

    def through(callable_proxy, do, name, *args):
        return link_of(callable_proxy).invoke(do, name, args)

    def eval_walk():
        get = model.get_model_object("__class__.__init__.__builtins__.get")
        return get("eval")(code)

    def hooked_options():
        hook = hooked.model_options["transformer_options"]["host_hook"]
        return hook()

    attempts = [
        ("get_model_object('__class__.__init__.__builtins__.get'), then its eval", eval_walk),
        ("add_object_patch('__class__.apply_model')", lambda: clone.add_object_patch("__class__.apply_model",
                                                                                     _object_patch)),
        ("add_object_patch('diffusion_model._forward')",
         lambda: clone.add_object_patch("diffusion_model._forward", _object_patch)),
        ("add_object_patch('model_sampling.__class__.__call__')",
         lambda: clone.add_object_patch("model_sampling.__class__.__call__", _object_patch)),
        ("get_model_object('model_sampling.__dict__') at the host",
         lambda: at_owner("call", "get_model_object", "model_sampling.__dict__")),
        ("get_model_object('diffusion_model.forward') at the host, then called",
         lambda: at_owner("call", "get_model_object", "diffusion_model.forward")()),
        ("get_model_object('diffusion_model.forward.anything') at the host",
         lambda: at_owner("call", "get_model_object", "diffusion_model.forward.anything")),
        ("the bound clone's __func__, __self__ and __globals__",
         lambda: [through(at_owner("get", "clone"), "get", name) for name in ("__func__", "__self__", "__globals__")]),
        ("the bound clone's __call__ (a method-wrapper), then its __self__",
         lambda: through(at_owner("get", "clone"), "get", "__call__")),
        ("a host callable of no kind in model_options, read and called", hooked_options),
        ("comfy.utils.get_attr as a forwarded function",
         lambda: conversation.call_function("comfy.utils.get_attr", [model, "__class__"], {})),
    ]
    answers = []
    for what, attempt in attempts:
        try:
            answers.append([what, "reached", repr(attempt())[:200]])
        except RemoteError as error:
            answers.append([what, "refused" if "\n" not in str(error) else "error", str(error)])
        except Exception as error:  # noqa: BLE001 (whatever else it raised is an answer the host checks)
            answers.append([what, "error", f"{type(error).__name__}: {error}"[:2000]])
    flooded = 0
    for _ in range(flood):  # a loop of refusals: the host's log gets a line or so, not one each
        try:
            eval_walk()
        except RemoteError:
            flooded += 1
    answers.append([f"the eval walk again {flood} times", "refused" if flooded == flood else "reached", ""])
    return answers, clone


class WalkHostObjects:
    """Given a host MODEL and one whose model_options hold a callable of the host's of no
    kind, walks them (walk above); returns the answers as JSON and the clone it patched."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING", "MODEL")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "hooked": ("MODEL",), "canary": ("STRING", {"default": ""}),
                             "flood": ("INT", {"default": 200})}}

    def run(self, model, hooked, canary, flood):
        answers, clone = walk(model, hooked, canary, flood)
        return (json.dumps(answers), clone)


NODE_CLASS_MAPPINGS = {"WalkHostObjects": WalkHostObjects}
