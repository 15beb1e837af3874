"""A model's name in the supervisor's ledger, as the operator reads it (comfyctl, the
dashboard, the events and the log): the class of upstream's model (SDXL, Flux,
SD1ClipModel, AutoencoderKL...) and the file it was loaded from where ComfyUI knows it,
"SDXL (sd_xl_base_1.0.safetensors)"; the class alone where it does not.

Where the file comes from:
- a ComfyUI that keeps its loader's call on the patcher (cached_patcher_init, whose first
  argument is the file or the list of files) says it itself;
- ComfyUI 0.3.64 keeps no file on the ModelPatcher: its loaders read the file and return
  patchers that do not say which. install() wraps the loaders of comfy.sd that take files
  (load_checkpoint_guess_config, load_diffusion_model, load_clip) to note the file of each
  model they return, by upstream's model module, which clones share (a LoRA's clone names
  its checkpoint). A model that enters current_loaded_models while such a loader runs (a
  checkpoint loaded straight to the GPU calls load_models_gpu inside it) is registered on
  the loader's own thread, under the host's lock: it takes the file that thread reads.
A model that none of these made (a pack's own loader, a VAE read by the VAELoader node)
is named by its class.
"""

import os
import threading
import weakref

_files = weakref.WeakKeyDictionary()  # upstream's model (a torch module) -> its file's name
_loading = threading.local()          # .file: the file a wrapped loader on this thread reads


def name_of(patcher):
    """The name the ledger shows for `patcher` (a ModelPatcher, or an object like one)."""
    model = getattr(patcher, "model", None)
    kind = type(patcher if model is None else model).__name__
    file = _file_of(patcher, model)
    return f"{kind} ({file})" if file else kind


def _file_of(patcher, model):
    init = getattr(patcher, "cached_patcher_init", None)
    if isinstance(init, tuple) and len(init) == 2 and isinstance(init[1], (tuple, list)) and init[1]:
        named = file_names(init[1][0])
        if named:
            return named
    try:
        named = _files.get(model)
    except TypeError:  # not weakly referenceable: no loader of ours noted it
        named = None
    return named or getattr(_loading, "file", None)


def file_names(paths):
    """'a.safetensors' for a path, 'a.safetensors + b.safetensors' for a list of them (a
    dual CLIP); None for anything else."""
    if isinstance(paths, (str, os.PathLike)):
        return os.path.basename(os.fspath(paths))
    if isinstance(paths, (list, tuple)) and paths and all(isinstance(p, (str, os.PathLike)) for p in paths):
        return " + ".join(os.path.basename(os.fspath(p)) for p in paths)
    return None


def _remember(result, file):
    for made in result if isinstance(result, tuple) else (result,):
        patcher = getattr(made, "patcher", made)  # a CLIP or VAE holds its patcher
        model = getattr(patcher, "model", None)
        if model is None:
            continue
        try:
            _files[model] = file
        except TypeError:  # not weakly referenceable: named by its class
            pass


def _noting_file(original, paths_of):
    """`original`, a loader of comfy.sd, noting the file it reads for what it returns;
    paths_of(args, kwargs) finds the file among its arguments."""
    def load(*args, **kwargs):
        file = file_names(paths_of(args, kwargs))
        outer = getattr(_loading, "file", None)
        _loading.file = file
        try:
            result = original(*args, **kwargs)
        finally:
            _loading.file = outer
        if file:
            _remember(result, file)
        return result
    return load


def _argument(name):
    return lambda args, kwargs: kwargs[name] if name in kwargs else (args[0] if args else None)


def install():
    """Wraps comfy.sd's file loaders, those this ComfyUI has, to note their files."""
    try:
        import comfy.sd as sd
    except ImportError:  # a ComfyUI without comfy.sd loads no files through it
        return
    if hasattr(sd, "load_checkpoint_guess_config"):
        sd.load_checkpoint_guess_config = _noting_file(sd.load_checkpoint_guess_config, _argument("ckpt_path"))
    if hasattr(sd, "load_diffusion_model"):
        sd.load_diffusion_model = _noting_file(sd.load_diffusion_model, _argument("unet_path"))
    if hasattr(sd, "load_clip"):
        sd.load_clip = _noting_file(sd.load_clip, _argument("ckpt_paths"))
