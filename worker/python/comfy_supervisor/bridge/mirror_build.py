"""How a mirror's reader builds the module the owner's tensors are set over (mirror.py):
the owner's recipe checked (one of upstream's mirrored classes, its arguments plain data),
and the module built by that class on the meta device, or checked where this side built it
with upstream's code (a replica's)."""

import importlib

from . import rules
from .remote import RemoteError, one_line


def _torch():
    import torch
    return torch


def checked_recipe(recipe, what, built=None):
    if not (isinstance(recipe, dict) and isinstance(recipe.get("class"), str) and
            isinstance(recipe.get("kwargs"), dict) and type(recipe.get("training")) is bool and
            recipe.get("built", False) is (built is not None) and
            rules.mirror_recipes.well_formed({k: v for k, v in recipe.items() if k != "built"})):
        raise RemoteError(f"{what}: a mirror's recipe that is malformed")
    path = recipe["class"]
    if built is not None:
        # This side built the module with upstream's code, and it must be of that class
        # (built_here): the owner names no class to build and no argument to build it with.
        if recipe["kwargs"]:
            raise RemoteError(f"{what}: a mirror of a module built here that names arguments to build it with")
        return recipe
    if not rules.mirror_recipes.mirrored_class(path):
        raise RemoteError(f"{what}: a mirror of a {path[:120]}, which is not a class mirrored here")
    plain(recipe["kwargs"], what, 0)
    return recipe


def plain(value, what, depth):
    """Construction arguments are data: plain values, dtypes and devices, never objects."""
    torch = _torch()
    if depth > 16:
        raise RemoteError(f"{what}: a mirror's recipe nested too deep")
    if isinstance(value, dict):
        for item in value.values():
            plain(item, what, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            plain(item, what, depth + 1)
    elif not (value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device))):
        raise RemoteError(f"{what}: a mirror's recipe holds a {type(value).__name__}, not data")


def built_here(recipe, module, what):
    """`module`, which this side built with upstream's code: of the class its owner's is."""
    if f"{type(module).__module__}.{type(module).__qualname__}" != recipe["class"]:
        raise RemoteError(f"{what}: the module built here is a {type(module).__qualname__}, its owner's a "
                          f"{recipe['class'][:120]} (a ComfyUI of another version in the worker?)")
    return module


def build(recipe, what):
    """The module, built by upstream's own class on the meta device."""
    torch = _torch()
    module_name, _, class_name = recipe["class"].rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name, None)
    except ImportError as error:
        raise RemoteError(f"{what}: {recipe['class'][:120]} cannot be imported here: {error}") from None
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise RemoteError(f"{what}: {recipe['class'][:120]} is not a torch module here")
    kwargs = dict(recipe["kwargs"])
    kwargs.pop("device", None)
    operations = rules.mirror_recipes.operations(recipe, kwargs.get("dtype"))
    if operations is not None:
        kwargs["operations"] = operations
    try:
        with on_meta(torch):
            module = cls(**kwargs, device=None)
    except Exception as error:  # noqa: BLE001 (upstream's class refused the owner's arguments)
        raise RemoteError(f"{what}: {recipe['class'][:120]} cannot be built here from its owner's arguments: "
                          f"{one_line(error)}") from None
    return module


def on_meta(torch):
    """Tensors made meanwhile without a device are made on the meta device: no memory, no
    initialisation (torch's own device context where it has one, since torch 2.0)."""
    if hasattr(torch.device("meta"), "__enter__"):
        return torch.device("meta")
    from torch.overrides import TorchFunctionMode

    factories = {torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn, torch.arange, torch.eye}

    class OnMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in factories and kwargs.get("device") is None:
                kwargs["device"] = "meta"
            return func(*args, **kwargs)

    return OnMeta()
