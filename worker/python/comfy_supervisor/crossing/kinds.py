"""ComfyUI's objects that cross between the host and a pack as remote objects, and what a
pack may do with the host's, per kind (docs/PACKS.md, "Remote objects"; how the bridge
applies them: bridge/object_kinds.py).

A ComfyUI type that stays with its owner and crosses as a proxy is one Kind in KINDS: its
name, its upstream class by module and name, and the calls, reads and writes a pack may
make on the host's. Anything else a pack does with the host's object of that kind is
refused, in one line, before it runs. The first matching kind wins, so a more specific
class comes before its base.
"""

import functools

from ..bridge.object_kinds import AttributePath, Kind

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


def _model_object(proxy, at_owner, name):
    """A MODEL proxy's get_model_object(name): its diffusion model, or a part of it, as the
    mirror that `model.model.diffusion_model` gives (upstream's reads the same module where
    no object patch of that name replaced it); anything else, and a patched name, at the owner."""
    path = name.split(".") if isinstance(name, str) else ()
    if not path or path[0] != "diffusion_model" or name in proxy.object_patches:
        return at_owner(name)
    return functools.reduce(getattr, path[1:], proxy.model.diffusion_model)


KINDS = (
    Kind("MODEL", "comfy.model_patcher", "ModelPatcher",
         calls=("clone", "is_clone", "get_model_object", "add_object_patch", "add_patches", "get_key_patches",
                "add_wrapper_with_key", "add_callback_with_key", "set_model_compute_dtype", "model_dtype",
                "model_size", "memory_required") + _MODEL_PATCH_SETTERS,
         reads=("model", "model_options", "load_device", "offload_device", "size", "object_patches", "patches"),
         writes=("model_options",),
         paths={"get_model_object": AttributePath("name", "model"),
                "add_object_patch": AttributePath("name", "model", patches="object_patches")},
         here={"get_model_object": _model_object}),
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
    # (by_value_classes.py), a subclass with methods of its own stays with its maker.
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
# in mirror_recipes.recipe_of for how upstream builds it.
MIRRORS = {"DIFFUSION_MODEL": ("diffusion_model",), "CLIP_VISION": ("model",)}

# The ComfyUI checkout's top-level modules: a kind's module is imported for a proxy only among
# them, a pack's attribute path passes only through their objects (and torch modules), and
# their enums' members cross by name (bridge/values.py).
UPSTREAM_MODULES = ("comfy", "comfy_extras", "comfy_api", "comfy_execution", "nodes", "node_helpers")
# Packages whose modules upstream's load_custom_node loads under their file's path too
# (its own nodes' files), so a class of a kind may be in two copies of its module.
LOADED_BY_PATH = ("comfy_extras",)
