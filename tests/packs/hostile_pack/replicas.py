"""The hostile pack's probes of a replica, the host's MODEL as upstream's own objects in this
worker over the host's weights mapped (docs/SECURITY.md, "Replicas"; crossing/replicas).
The host's checks are tests/host/remote_checks.py's remote-replica-*.

- ProbeReplicaUses writes the replica's uses of the host ("replica", its recipe;
  "replica_mirror", its diffusion model; "load_replica", a load with weight patches) by
  hand on the call socket, as a hostile pack would: patches that are not data (a
  function, an object, a torch module of the pack's), on a weight the host's model lacks,
  malformed, a dict of too many weights; each use on the model's BaseModel, the CLIP's
  patcher and an id it was never handed; a load of a VAE with a patch of a weight it
  lacks; and a CLIP's loads with patches that are not data, or of a weight it lacks.
- WriteReplica writes its replica's weights every way it can reach them (in place,
  through .data, through the mapping's bytes, through state_dict, a parameter replaced),
  and a tensor the host answered; it keeps the replica for UseKeptReplica, which runs it
  again in a later call, after the host evicted the model.
- ReadRecipe reads what the host's recipe of a replica holds, leaf by leaf; ReadVaeRecipe
  and ReadClipRecipe the same of a VAE's and a CLIP's replica.
- WriteVaeReplica and WriteClipReplica write their replica's weights as WriteReplica writes
  a MODEL's, and decode or encode before and after."""

import ctypes
import enum
import json

import torch
from comfy_supervisor.bridge.remote import link_of
from comfy_supervisor.crossing.replicas import origin_of

CATEGORY = "comfy-supervisor tests"
KEPT = []  # the replica WriteReplica keeps for UseKeptReplica


def _pack_function(*args, **kwargs):
    """A function of the pack's, as a weight patch's function or strength."""
    return args[0] if args else None


class _PackAdapter:
    """An object of the pack's of no kind: it crosses to the host as a handle."""


def _ask(link, do, args, target=None):
    """One use of the host's object `link` (or of the id `target`) written by hand, its
    arguments encoded by this worker's own encoder: [outcome, the error's type, its
    message], outcome "error" or "value"."""
    conversation = link.session
    session = conversation.session
    encoded, encoder = session.encode([args, {}, None])
    call = next(conversation.calls)
    with conversation.answered:
        conversation.answers[call] = None
    session.lend(encoder)
    session.channel.send({"op": "invoke", "call": call, "id": link.id if target is None else target, "do": do,
                          "name": "model", "payload": encoded})
    try:
        outcome, detail = conversation._await(call, "a probe")
    finally:
        with conversation.answered:
            conversation.answers.pop(call, None)
    if outcome == "error":
        return [outcome, detail.get("type"), detail.get("message")]
    return [outcome, None, repr(detail)[:200]]


def _forward(unet):
    """The diffusion model on a fixed input (as model_pack's mirror_forward)."""
    width = next(m.weight.shape[1] for name, m in unet.named_modules() if name.endswith("attn2.to_k"))
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(1, 4, 4, 4, generator=generator)
    context = torch.randn(1, 3, width, generator=generator)
    with torch.no_grad():
        return unet(x, torch.tensor([500.0]), context)


class ProbeReplicaUses:
    """The uses a replica makes of the host, written with what the host must refuse.
    `key` is a weight of the host's model. Returns [what, outcome, type, message] each."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "clip": ("CLIP",), "vae": ("VAE",), "key": ("STRING",)}}

    def run(self, model, clip, vae, key):
        host = link_of(origin_of(model) or model)
        shape = list(host.invoke("call", "get_model_object", [key]).shape)
        diff = (torch.ones(shape),)

        def patch(strength=1.0, value=diff, strength_model=1.0, offset=None, function=None):
            return {key: [[strength, value, strength_model, offset, function]]}

        nested = diff
        for _ in range(12):
            nested = (nested,)
        loads = [
            ("a function of the pack's as a patch's function", patch(function=_pack_function)),
            ("an object of the pack's as a patch's value", patch(value=(_PackAdapter(),))),
            ("a torch module of the pack's as a patch's value", patch(value=torch.nn.Linear(1, 1))),
            ("a function of the pack's as a patch's strength", patch(strength=_pack_function)),
            ("an object of the pack's as a patch's strength_model", patch(strength_model=_PackAdapter())),
            ("a tensor as a patch's strength", patch(strength=torch.ones(64, 64))),
            ("a function of the pack's as a patch's offset", patch(offset=_pack_function)),
            ("an offset that is not three numbers", patch(offset=(0, "x"))),
            ("a list as a patch's value (upstream calls its head)", patch(value=[[diff[0], "x"]])),
            ("a value nested deeper than data goes", patch(value=nested)),
            ("no value (upstream takes its length)", patch(value=None)),
            ("a weight the host's model has none of", {"no.such.weight": patch()[key]}),
            ("a weight named by a tuple", {(key, 0): patch()[key]}),
            ("an entry of four fields", {key: [[1.0, diff, 1.0, None]]}),
            ("an entry that is not a list", {key: [{"strength": 1.0}]}),
            ("entries that are not a list", {key: (1.0, diff, 1.0, None, None)}),
            ("patches that are not a dict", [patch()]),
            ("a dict of more weights than any model has", {f"w{n}": [] for n in range(70_000)}),
        ]
        answers = [[what, *_ask(host, "load_replica", [patches])] for what, patches in loads]
        base_model = host.invoke("get", "model")  # held: the host lets go of what no proxy holds
        base = link_of(base_model)
        clip_host = link_of(origin_of(clip) or clip)
        clip_patcher = clip_host.invoke("get", "patcher")  # a MODEL over no BaseModel; held, as above
        for do in ("replica", "replica_mirror", "load_replica"):
            for what, target in (("the model's BaseModel", base), ("the CLIP's patcher", link_of(clip_patcher))):
                answers.append([f"{do} of {what}", *_ask(target, do, [patch()] if do == "load_replica" else [])])
            answers.append([f"{do} of an id it was never handed",
                            *_ask(host, do, [], target=host.id + 1000)])
        answers.append(["load_replica of a VAE, on a weight it has none of",
                        *_ask(link_of(origin_of(vae) or vae), "load_replica", [patch()])])
        answers += [[what, *_ask(clip_host, "load_replica", [patches])] for what, patches in _clip_loads(clip, patch)]
        answers.append(["the use 'closed' of the host's MODEL", *_ask(host, "closed", [])])
        return (json.dumps(answers),)


def _clip_loads(clip, model_patch):
    """A CLIP replica's loads with weight patches that are not data, and one of a MODEL's
    weight (`model_patch`), which the CLIP has none of."""
    key, weight = next(iter(clip.cond_stage_model.state_dict().items()))

    def patch(value=(torch.ones(weight.shape),), function=None):
        return {key: [[1.0, value, 1.0, None, function]]}

    return [("a function of the pack's as a CLIP patch's function", patch(function=_pack_function)),
            ("an object of the pack's as a CLIP patch's value", patch(value=(_PackAdapter(),))),
            ("a torch module of the pack's as a CLIP patch's value", patch(value=torch.nn.Linear(1, 1))),
            ("load_replica of a CLIP, on a weight it has none of", model_patch())]


def _state_dict_write(model):
    sd = model.model.state_dict()
    sd["diffusion_model.proj_out.weight"].fill_(3.0)


def _mapping_write(unet):
    weight = unet.block.attn2.to_k.weight
    ctypes.memset(weight.data_ptr(), 0x40, weight.numel() * weight.element_size())


def _host_tensor_write(model):
    answered = link_of(origin_of(model)).invoke("call", "get_model_object", ["diffusion_model.proj_in.bias"])
    answered.add_(5.0)


class WriteReplica:
    """Writes the replica's weights every way this worker reaches them; keeps the replica.
    Returns [what, outcome] per write, the forward before and after them."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING", "LATENT", "LATENT")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def run(self, model):
        unet = model.model.diffusion_model
        before = _forward(unet)
        writes = [
            ("in place", lambda: unet.proj_in.weight.mul_(2.0)),
            ("through .data", lambda: unet.time_embed.weight.data.add_(1.0)),
            ("through the mapping's bytes", lambda: _mapping_write(unet)),
            ("through state_dict", lambda: _state_dict_write(model)),
            ("a parameter replaced", lambda: setattr(unet.block.attn2.to_v, "weight",
                                                     torch.nn.Parameter(torch.zeros_like(unet.block.attn2.to_v.weight)))),
            ("a tensor the host answered, in place", lambda: _host_tensor_write(model)),
        ]
        outcomes = _tried(writes)
        KEPT.append(model)
        return (json.dumps(outcomes), {"samples": before}, {"samples": _forward(unet)})


class UseKeptReplica:
    """Runs the replica WriteReplica kept, in this later call, and lets go of it."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("LATENT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        model = KEPT.pop()
        return ({"samples": _forward(model.model.diffusion_model)},)


def _leaves(value, path, out):
    """[path, type, callable, the remote kind or None] of each leaf of a recipe."""
    link = link_of(value)
    if isinstance(value, dict) and link is None:
        for key, item in value.items():
            _leaves(item, f"{path}.{key}", out)
    elif isinstance(value, (list, tuple)) and link is None:
        for index, item in enumerate(value):
            _leaves(item, f"{path}.{index}", out)
    else:
        plain = value is None or isinstance(value, (bool, int, float, str, torch.device, torch.dtype, enum.Enum))
        out.append([path, "plain" if plain else f"{type(value).__module__}.{type(value).__qualname__}",
                    callable(value), link.kind.name if link is not None else None])
    return out


class ReadRecipe:
    """The host's recipe of `model`'s replica, leaf by leaf, and whether its object patches
    are the very proxies reading object_patches of the host's MODEL gives; then the same
    use on `withheld`, whose object patches hold what no pack is handed."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "withheld": ("MODEL",)}}

    def run(self, model, withheld):
        host = link_of(origin_of(model))
        recipe = host.invoke("replica", "model")
        patches = recipe.get("object_patches", {})
        read = origin_of(model).object_patches
        same = sorted(patches) == sorted(read) and all(patches[name] is read[name] for name in patches)
        refused = _ask(link_of(origin_of(withheld) or withheld), "replica", [])
        return (json.dumps({"leaves": _leaves(recipe, "recipe", []), "same_as_read": same, "withheld": refused,
                            "withheld_arrived_as": "replica" if origin_of(withheld) is not None else "proxy"}),)


class ReadVaeRecipe:
    """The host's recipe of `vae`'s replica, leaf by leaf."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"vae": ("VAE",)}}

    def run(self, vae):
        recipe = link_of(origin_of(vae)).invoke("replica", "first_stage_model")
        return (json.dumps({"leaves": _leaves(recipe, "recipe", []), "arrived_as": type(vae).__qualname__}),)


def _module_mapping_write(module):
    weight = next(module.parameters())
    ctypes.memset(weight.data_ptr(), 0x40, weight.numel() * weight.element_size())


class WriteVaeReplica:
    """Writes the VAE replica's weights every way this worker reaches them (in place, through
    .data, through the mapping's bytes, through state_dict, a parameter replaced). Returns
    [what, outcome] per write, and the decoded `latent` before and after them."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING", "IMAGE", "IMAGE")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"vae": ("VAE",), "latent": ("LATENT",)}}

    def run(self, vae, latent):
        before = vae.decode(latent["samples"])
        outcomes = _module_writes(vae.first_stage_model)
        return (json.dumps(outcomes), before, vae.decode(latent["samples"]))


def _module_writes(module):
    """Writes a replica's `module` every way this worker reaches its weights (in place, through
    .data, through the mapping's bytes, through state_dict, a parameter replaced): [what,
    outcome] per write."""
    parameters = dict(module.named_parameters())
    last = list(parameters)[-1]
    owner, _, leaf = last.rpartition(".")
    writes = [
        ("in place", lambda: next(iter(parameters.values())).mul_(2.0)),
        ("through .data", lambda: parameters[last].data.add_(1.0)),
        ("through the mapping's bytes", lambda: _module_mapping_write(module)),
        ("through state_dict", lambda: module.state_dict()[last].fill_(3.0)),
        ("a parameter replaced", lambda: setattr(module.get_submodule(owner), leaf,
                                                 torch.nn.Parameter(torch.zeros_like(parameters[last])))),
    ]
    return _tried(writes)


def _tried(writes):
    """[what, "written" or the error it raised] of each (what, write) in `writes`."""
    outcomes = []
    for what, write in writes:
        try:
            with torch.no_grad():
                write()
            outcomes.append([what, "written"])
        except Exception as error:  # noqa: BLE001 (a write refused is an answer the host checks)
            outcomes.append([what, f"{type(error).__name__}: {error}"[:300]])
    return outcomes


class ReadClipRecipe:
    """The host's recipe of `clip`'s replica, leaf by leaf."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip": ("CLIP",)}}

    def run(self, clip):
        recipe = link_of(origin_of(clip) or clip).invoke("replica", "cond_stage_model")
        return (json.dumps({"leaves": _leaves(recipe, "recipe", []), "arrived_as": type(clip).__qualname__}),)


class WriteClipReplica:
    """Writes the CLIP replica's text encoder's weights as WriteVaeReplica writes a VAE's.
    Returns [what, outcome] per write, and `text` encoded before and after them."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING", "LATENT", "LATENT")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip": ("CLIP",), "text": ("STRING", {"default": ""})}}

    def run(self, clip, text):
        before = clip.encode_from_tokens(clip.tokenize(text))
        outcomes = _module_writes(clip.cond_stage_model)
        return (json.dumps(outcomes), {"samples": before}, {"samples": clip.encode_from_tokens(clip.tokenize(text))})


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (ProbeReplicaUses, WriteReplica, UseKeptReplica, ReadRecipe,
                                                      ReadVaeRecipe, WriteVaeReplica, ReadClipRecipe,
                                                      WriteClipReplica)}
