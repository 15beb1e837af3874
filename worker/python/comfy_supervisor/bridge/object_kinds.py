"""Which objects cross between the host and a pack as remote objects, and what a pack may
do with the host's (docs/PACKS.md, "Remote objects").

An object of a kind listed here stays with its owner; the other side gets a proxy whose
attribute reads, writes and method calls run on the owner's side. The lists below are
what a pack's worker may do with a host object of that kind: anything else is refused,
in one line, before it runs. Extending what packs may do is one line here. What the
host does with a pack's objects is not listed: the host is ComfyUI itself, and what a
pack's object answers is checked as any value from a pack is.

Each kind names the upstream class its objects are, by module and name. The class is
looked up only in modules already imported, so naming one never imports ComfyUI; a
proxy is an instance of a subclass of the receiver's own class of that name, so that
ComfyUI's isinstance checks pass.

The first matching kind wins, so a more specific class comes before its base. An object
of no kind is a CALLABLE when it can be called, and otherwise crosses as a handle that
only its maker resolves (bridge/values.py). What of the host's crosses to a pack is
narrower, and decided once, in kind_for_pack (docs/SECURITY.md, "What a pack can reach of
the host's objects").
"""

import importlib
import inspect
import os
import re
import sys
import types

from .values import UPSTREAM_MODULES


class Kind:
    """A kind of remote object: its upstream class, and what a pack may do with the host's."""

    def __init__(self, name, module, cls, calls=(), reads=(), writes=(), paths=None):
        self.name = name
        self.module = module
        self.cls = cls
        self.calls = frozenset(calls)
        self.reads = frozenset(reads)
        self.writes = frozenset(writes)
        self.paths = dict(paths or {})  # a listed call -> its AttributePath argument

    def upstream_class(self, importing=False):
        """The class, where its module is imported (`importing`: imported now, for a proxy
        of the kind received); None otherwise."""
        found = self.upstream_classes()
        if found or not (importing and self.module.startswith(("comfy.", "comfy_extras."))):
            return found[0] if found else None
        try:
            return _class_in(importlib.import_module(self.module), self.cls)
        except Exception:  # noqa: BLE001 (a ComfyUI that lacks it: the proxy is of object)
            return None

    def upstream_classes(self):
        """The class in each copy of its module this process holds: upstream's
        load_custom_node loads comfy_extras' files under their path, so the class of
        upstream's own nodes' objects may be another than that of an import by name."""
        found = [_class_in(module, self.cls) for module in (sys.modules.get(self.module), _loaded_by_path(self.module))]
        return [cls for cls in found if cls is not None]

    def allows(self, do, name):
        """Whether a pack may `do` ("call", "get", "set") `name` on a host object of this kind."""
        return name in {"call": self.calls, "get": self.reads, "set": self.writes}.get(do, ())


class AttributePath:
    """An argument of a listed call that upstream resolves as a dotted attribute path at the
    owner (comfy.utils.get_attr, set_attr): walked from the object's `root` attribute.
    `patches`: the object's dict of such paths to what upstream sets there later
    (ModelPatcher.object_patches), where the call adds one."""

    def __init__(self, argument, root, patches=None):
        self.argument = argument
        self.root = root
        self.patches = patches


# A model's patches, each a way to put a pack's function into the host's sampling.
_MODEL_PATCH_SETTERS = (
    "set_model_sampler_cfg_function", "set_model_sampler_post_cfg_function",
    "set_model_sampler_pre_cfg_function", "set_model_sampler_calc_cond_batch_function",
    "set_model_unet_function_wrapper", "set_model_denoise_mask_function", "set_model_patch",
    "set_model_patch_replace", "set_model_attn1_patch", "set_model_attn2_patch",
    "set_model_attn1_replace", "set_model_attn2_replace", "set_model_attn1_output_patch",
    "set_model_attn2_output_patch", "set_model_input_block_patch",
    "set_model_input_block_patch_after_skip", "set_model_output_block_patch",
    "set_model_emb_patch", "set_model_forward_timestep_embed_patch", "set_model_double_block_patch",
    "set_model_post_input_patch",
)

KINDS = (
    Kind("MODEL", "comfy.model_patcher", "ModelPatcher",
         calls=("clone", "is_clone", "get_model_object", "add_object_patch", "add_patches", "get_key_patches",
                "add_wrapper_with_key", "add_callback_with_key", "set_model_compute_dtype", "model_dtype",
                "model_size", "memory_required") + _MODEL_PATCH_SETTERS,
         reads=("model", "model_options", "load_device", "offload_device", "size", "object_patches", "patches"),
         writes=("model_options",),
         paths={"get_model_object": AttributePath("name", "model"),
                "add_object_patch": AttributePath("name", "model", patches="object_patches")}),
    # apply_model: what upstream's sampler hands a model_function_wrapper (a pack's unet wrapper).
    Kind("DIFFUSION_MODEL", "comfy.model_base", "BaseModel",
         calls=("get_dtype", "memory_required", "process_latent_in", "process_latent_out", "extra_conds",
                "concat_cond", "encode_adm", "scale_latent_inpaint", "apply_model"),
         reads=("model_config", "latent_format", "model_type", "model_sampling", "device", "manual_cast_dtype",
                "adm_channels", "inpaint_model")),
    Kind("CLIP", "comfy.sd", "CLIP",
         calls=("clone", "tokenize", "encode_from_tokens", "encode_from_tokens_scheduled", "encode", "add_patches",
                "clip_layer", "set_tokenizer_option", "get_key_patches", "load_model"),
         reads=("cond_stage_model", "patcher", "tokenizer", "layer_idx", "use_clip_schedule", "tokenizer_options"),
         writes=("layer_idx",)),
    Kind("VAE", "comfy.sd", "VAE",
         calls=("encode", "decode", "encode_tiled", "decode_tiled", "spacial_compression_encode",
                "spacial_compression_decode", "temporal_compression_decode", "vae_encode_crop_pixels"),
         reads=("downscale_ratio", "upscale_ratio", "latent_channels", "latent_dim", "output_channels",
                "downscale_index_formula", "upscale_index_formula", "device", "vae_dtype", "output_device",
                "patcher", "first_stage_model")),
    Kind("CONTROL_NET", "comfy.controlnet", "ControlBase",
         calls=("copy", "set_cond_hint", "set_previous_controlnet", "set_extra_arg", "get_models", "get_control",
                "get_extra_hooks", "inference_memory_requirements"),
         reads=("control_model", "latent_format", "compression_ratio", "strength", "timestep_percent_range",
                "cond_hint_original", "previous_controlnet", "vae", "extra_args", "upscale_algorithm")),
    Kind("CLIP_VISION", "comfy.clip_vision", "ClipVisionModel",
         calls=("encode_image", "get_sd"),
         reads=("model", "patcher", "load_device", "offload_device", "dtype", "image_size", "image_mean",
                "image_std", "return_all_hidden_states")),
    Kind("STYLE_MODEL", "comfy.sd", "StyleModel", calls=("get_cond",), reads=("model",)),
    Kind("MODEL_SAMPLING", "comfy.model_sampling", "ModelSamplingDiscrete",
         calls=("sigma", "timestep", "percent_to_sigma", "calculate_input", "calculate_denoised",
                "noise_scaling", "inverse_noise_scaling"),
         reads=("sigmas", "sigma_min", "sigma_max", "sigma_data", "log_sigmas")),
    Kind("LATENT_FORMAT", "comfy.latent_formats", "LatentFormat",
         calls=("process_in", "process_out"),
         reads=("scale_factor", "shift_factor", "latent_channels", "latent_dimensions", "latent_rgb_factors",
                "latent_rgb_factors_bias", "taesd_decoder_name")),
    Kind("HOOKS", "comfy.hooks", "HookGroup", calls=("clone", "clone_and_combine", "set_keyframes_on_hooks", "get_type"),
         reads=("hooks",)),
    # One hook of a group, as a group's `hooks` lists them.
    Kind("HOOK", "comfy.hooks", "Hook", calls=("clone",),
         reads=("hook_type", "hook_ref", "hook_id", "hook_keyframe", "hook_scope", "strength",
                "auto_apply_to_nonpositive")),
    Kind("SAMPLER", "comfy.samplers", "Sampler", calls=("sample", "max_denoise")),
    Kind("GUIDER", "comfy.samplers", "CFGGuider", calls=("set_conds", "set_cfg", "sample"),
         reads=("model_patcher", "model_options", "cfg")),
    # Upstream's noise sources, as its custom sampling nodes make them (NOISE): the sampler
    # asks one for the noise of a latent.
    Kind("RANDOM_NOISE", "comfy_extras.nodes_custom_sampler", "Noise_RandomNoise", calls=("generate_noise",),
         reads=("seed",)),
    Kind("EMPTY_NOISE", "comfy_extras.nodes_custom_sampler", "Noise_EmptyNoise", calls=("generate_noise",),
         reads=("seed",)),
    # A pack's own subclass of a conditioning value: upstream's own classes cross by value
    # (bridge/by_value.py), a subclass with methods of its own stays with its maker.
    Kind("COND", "comfy.conds", "CONDRegular", calls=("process_cond", "can_concat", "concat", "size"),
         reads=("cond",)),
    # An upscale model as upstream's loader makes it (spandrel's descriptor over the torch
    # module): upstream's upscale node reads its scale, moves it and calls it on each tile.
    Kind("UPSCALE_MODEL", "spandrel", "ImageModelDescriptor", calls=("__call__", "to"),
         reads=("scale", "model", "input_channels", "output_channels", "size_requirements", "tiling", "purpose",
                "architecture", "dtype", "device", "supports_half", "supports_bfloat16")),
)

# What the other side may read of a remote object as a mirror: the torch module itself, built
# there over the owner's weights mapped (bridge/mirror.py). One line to extend, with a recipe
# in mirror.recipe_of for how upstream builds it.
MIRRORS = {"DIFFUSION_MODEL": ("diffusion_model",), "CLIP_VISION": ("model",)}
# Where the class of a mirrored module may come from: ComfyUI's own torch modules (the
# receiver builds it with upstream's code from plain construction arguments, never code).
MIRROR_CLASS_MODULES = ("comfy.ldm.", "comfy.clip_model.", "comfy.image_encoders.")

# A function or callable object one side hands the other (a pack's attention patch, a CFG
# function, a host callback): the other side may call it, and nothing else.
CALLABLE = Kind("CALLABLE", "builtins", "object", calls=("__call__",))

BY_NAME = {kind.name: kind for kind in KINDS + (CALLABLE,)}

# Upstream's functions that one side calls on the other's behalf when it is given the other's
# objects: the model's owner samples with it, loads it (so admission counts the load as the
# owner's, docs/ARBITRATION.md) and patches it with a LoRA, where its memory and its
# weights are. The only functions either side calls for the other.
FUNCTIONS = frozenset((
    "comfy.sample.sample", "comfy.sample.sample_custom", "nodes.common_ksampler", "comfy.sd.load_lora_for_models",
    "comfy.model_management.load_models_gpu", "comfy.model_management.load_model_gpu",
))


def kind_of(value):
    """The kind `value` crosses as, or None for a value that crosses as a handle."""
    kind = listed_kind_of(value)
    if kind is None and callable(value) and not isinstance(value, type) and not _is_module(value):
        return CALLABLE
    return kind


def listed_kind_of(value):
    """The kind of KINDS `value` is an object of, or None."""
    for kind in KINDS:
        if any(isinstance(value, cls) for cls in kind.upstream_classes()):
            return kind
    return None


class Withheld(Exception):
    """The host's object may not cross to a pack; the message says what it is, in one line."""


# Libraries whose functions are general-purpose (they open files, run processes, import):
# never one written to be handed to a patch, whatever held it. (The standard library's
# names are Python 3.10's list; before it, the few that import and load stand for it.)
_GENERAL_PURPOSE = frozenset(getattr(sys, "stdlib_module_names", ("importlib", "runpy", "pickle", "subprocess",
                                                                  "os", "shutil", "code"))) | {"builtins", "torch"}


def kind_for_pack(value):
    """The kind the host's `value` crosses to a pack as (None: no remote object, it crosses
    as a value or not at all), or Withheld. A callable crosses only where the host hands
    it out on purpose: an object of a listed kind, whose uses are listed; a bound method
    of one by a name its kind lists; a function written in Python, or an object whose
    __call__ is one (a patch, a closure, upstream's wrapper executor), as ComfyUI's code
    puts them in model_options and in a patch's arguments. So builtins (eval, getattr),
    bound methods of any other object, classes and modules, and the standard library's
    and torch's own functions never do; frames and code objects are no values at all."""
    kind = listed_kind_of(value)
    if kind is not None or not (callable(value) or isinstance(value, types.ModuleType)) or _is_module(value):
        return kind
    if isinstance(value, (type, types.ModuleType)):
        raise Withheld(f"a {'class' if isinstance(value, type) else 'module'} ({_name_of(value)})")
    if isinstance(value, types.MethodType):
        owner = listed_kind_of(value.__self__)
        if owner is not None and owner.allows("call", value.__name__):
            return CALLABLE
        raise Withheld(f"a bound method {_name_of(value)} (of no object whose kind lists it)")
    if isinstance(value, types.FunctionType):
        function, where = value, value.__module__
    else:
        function = inspect.getattr_static(type(value), "__call__", None)
        where = type(value).__module__
    if not isinstance(function, types.FunctionType):
        raise Withheld(f"a builtin callable ({_name_of(value)})")
    if str(where).partition(".")[0] in _GENERAL_PURPOSE:
        raise Withheld(f"a function of a general-purpose library ({_name_of(value)})")
    return CALLABLE


def _name_of(value):
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    module = getattr(value, "__module__", None) or type(value).__module__
    return f"{module}.{name}"[:120] if isinstance(module, str) and isinstance(name, str) else type(value).__name__


_PUBLIC_SEGMENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*|[0-9]+")
MAX_PATH_SEGMENTS = 32
MAX_PATH_CHARS = 400


def path_segments(path):
    """The segments of a dotted attribute path a pack sent, each a public name or an index
    (diffusion_model.input_blocks.0.0); None for anything else: a dunder or private
    segment, an empty one, a non-ASCII name, a path too long."""
    if not isinstance(path, str) or not 0 < len(path) <= MAX_PATH_CHARS:
        return None
    segments = path.split(".")
    if len(segments) > MAX_PATH_SEGMENTS or not all(_PUBLIC_SEGMENT.fullmatch(s) for s in segments):
        return None
    return segments


def walkable(value):
    """Whether a pack's attribute path may pass through `value` at the host: an instance of
    a class of ComfyUI's own or a torch module (a model's parts). Never a class, a module,
    a function or method, a frame or any other object, whose public names reach further
    than the model (a module's globals, a class's functions, a frame's f_globals)."""
    if isinstance(value, (type, types.ModuleType)) or callable(value) and not _is_module(value):
        return False
    return _is_module(value) or type(value).__module__.partition(".")[0] in UPSTREAM_MODULES


def _class_in(module, name):
    found = getattr(module, name, None) if module is not None else None
    return found if isinstance(found, type) else None


_by_path = {}  # a comfy_extras module's name -> (how many modules were loaded when looked for, the module)


def _loaded_by_path(name):
    """comfy_extras' module `name` as upstream's load_custom_node loaded it: under its file's
    path without ".py". Looked for again only once more modules were loaded."""
    if not name.startswith("comfy_extras."):
        return None
    count, module = _by_path.get(name, (-1, None))
    if module is None and count != len(sys.modules):
        tail = os.sep + os.path.join(*name.split("."))
        module = next((found for key, found in list(sys.modules.items()) if key.endswith(tail)), None)
        _by_path[name] = (len(sys.modules), module)
    return module


def _is_module(value):
    """A torch module is called for its forward, but it is a model a pack made (a detector,
    an upscaler): it stays with its maker as a handle, as any such object does."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)
