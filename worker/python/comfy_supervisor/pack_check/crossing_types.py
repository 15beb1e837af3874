"""How a value of a node's socket type crosses between ComfyUI and a pack's worker
(docs/PACKS.md, "What crosses, and how"), as the reading estimates it from the type's name.

The kinds that cross as remote objects, and which of them arrive as replicas, are the
bridge's own tables (crossing/kinds.py KINDS, crossing/replicas REPLICATED), so the
estimate follows the code. What is here is what those tables do not say: which of
ComfyUI's type names are values (tensors and plain data, which cross by value), the type
names whose objects are of another kind's class, and ComfyUI's object types that no kind
lists, which cannot cross at all. Any other name is the pack's own type: its objects stay
in the worker as handles, which only nodes of the same pack (or its group) can take.
"""

from collections import namedtuple

from ..crossing import kinds
from ..crossing.replicas import REPLICATED
from .values import External, ExternalCall, Unknown, Wildcard, type_word

# ComfyUI's types whose values are tensors, plain values or containers of them.
BY_VALUE = frozenset(("IMAGE", "MASK", "LATENT", "CONDITIONING", "INT", "FLOAT", "STRING", "BOOLEAN", "SIGMAS",
                      "AUDIO", "COMBO", "TIMESTEPS_RANGE"))
# ComfyUI's types whose objects are of a kind named otherwise: upstream's noise sources, a
# GLIGEN model (a ModelPatcher), a latent operation (a function: CALLABLE).
KIND_OF_TYPE = {"NOISE": "RANDOM_NOISE", "GLIGEN": "MODEL", "LATENT_OPERATION": "CALLABLE"}
# ComfyUI's object types that no kind lists: the host's cannot go into a pack, and a pack's
# reaches ComfyUI's nodes as a handle, of which they can read nothing.
NO_KIND = {"CLIP_VISION_OUTPUT": "comfy.clip_vision.Output", "HOOK_KEYFRAMES": "comfy.hooks.HookKeyframeGroup",
           "VIDEO": "comfy_api's VideoInput"}
# Upstream's names whose values are lists of choices (a combo's), as packs write them.
_COMBO_SOURCES = ("folder_paths.get_filename_list", "comfy.samplers.KSampler.SAMPLERS",
                  "comfy.samplers.KSampler.SCHEDULERS", "comfy.samplers.SAMPLER_NAMES",
                  "comfy.samplers.SCHEDULER_NAMES", "nodes.ImageScale.upscale_methods", "nodes.ImageScale.crop_methods",
                  "nodes.ImageScaleBy.upscale_methods", "nodes.LatentUpscale.upscale_methods",
                  "nodes.LatentUpscale.crop_methods", "nodes.LatentUpscaleBy.upscale_methods")

# comfy.comfy_types' IO members whose value is not their name.
_IO_VALUES = {"NUMBER": "FLOAT,INT", "PRIMITIVE": "STRING,FLOAT,INT,BOOLEAN"}

# how: "value" | "replica" | "remote" | "wildcard" | "handle" | "no kind" | "unknown"
Crossing = namedtuple("Crossing", "type how words")


def kind_of(type_name):
    """The kind (crossing/kinds.py) ComfyUI's objects of `type_name` cross as, or None."""
    kind = KIND_OF_TYPE.get(type_name, type_name)
    return next((k for k in kinds.KINDS if k.name == kind), None)


def _is_combo_source(value):
    return isinstance(value, (External, ExternalCall)) and value.path in _COMBO_SOURCES


def _named(type_value):
    """comfy.comfy_types' IO.X as the type it names: its value (IO.ANY the wildcard)."""
    parts = type_value.path.split(".") if isinstance(type_value, External) else ()
    if len(parts) >= 3 and parts[0] == "comfy" and parts[-2] == "IO":
        return Wildcard("*") if parts[-1] == "ANY" else _IO_VALUES.get(parts[-1], parts[-1])
    return type_value


def classify(type_value):
    """How values of `type_value` (a socket's type as the reading computed it) cross."""
    type_value = _named(type_value)
    if isinstance(type_value, Wildcard) or type_value == "*":
        return Crossing("*", "wildcard", "a wildcard (*): what crosses is what is connected")
    if isinstance(type_value, (list, tuple)) or _is_combo_source(type_value):
        return Crossing("COMBO", "value", "a list of choices, by value")
    if isinstance(type_value, Unknown):
        return Crossing("?", "unknown", f"its type is {type_value.reason}")
    if isinstance(type_value, External):
        return Crossing("?", "unknown", f"its type is {type_value.path}, which the reading does not compute")
    if not isinstance(type_value, str) or not type_value:
        return Crossing("?", "unknown", f"its type is {type_word(type_value)}, not a name")
    if "," in type_value:  # several types accepted (upstream splits on commas)
        parts = [classify(part.strip()) for part in type_value.split(",")]
        worst = next((p for p in parts if p.how in ("no kind", "unknown", "handle")), parts[0])
        return Crossing(type_value, worst.how, worst.words)
    if type_value in BY_VALUE:
        return Crossing(type_value, "value", "by value")
    if type_value in REPLICATED:
        return Crossing(type_value, "replica", "ComfyUI's arrive as replicas (upstream's own objects over the "
                                               "host's weights)")
    if type_value in NO_KIND:
        return Crossing(type_value, "no kind", f"ComfyUI's {NO_KIND[type_value]}, which no kind of "
                                               "crossing/kinds.py lists")
    kind = kind_of(type_value)
    if kind is not None or type_value in KIND_OF_TYPE:
        return Crossing(type_value, "remote", "remote objects, ComfyUI's limited to what crossing/kinds.py "
                                              "lists for their kind")
    return Crossing(type_value, "handle", "the pack's own: handles, which only nodes of this pack (or its group) "
                                          "can take")
