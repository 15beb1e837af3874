"""What of ComfyUI crosses between the host and a pack, and how: the rules that name
ComfyUI's own modules and classes, kept out of the bridge (which moves values and objects
and knows no ComfyUI), which takes them from install().

- kinds: the ComfyUI types that cross as remote objects and what a pack may do with the
  host's (KINDS), the attributes read as mirrors (MIRRORS), upstream's top-level modules;
- by_value_classes: upstream's value classes that cross as copies (comfy.conds');
- functions: upstream's functions one side calls for the other (FUNCTIONS), and a load of
  another process's model by its owner;
- mirror_recipes: how a mirrored module is described by its owner and built by its reader;
- errors: upstream's interrupt and out-of-memory exception, which cross as themselves;
- replica: the pack's side of a host MODEL: upstream's own ModelPatcher over upstream's own
  BaseModel, built in the worker from a recipe, its diffusion model over the owner's
  weights (a mirror), loaded by the owner;
- replica_owner: the host's side of it: the recipe, and the loads a replica asks for;
- forwarded: upstream's sampling functions given the other side's MODEL, run by that side;
- guided: upstream's CFGGuider over a pack's MODEL, rebuilt and sampled in the pack.

Adding a ComfyUI type is one edit here: one Kind in kinds.KINDS for a type that stays with
its owner and crosses as a proxy, or one line in by_value_classes.CLASSES for one that
crosses as a copy.

Imports the bridge alone. Imported by host and pack_worker: install() runs once per
process before any session with a peer starts (the host's Bridges.start, the pack worker's
start). Docs: docs/PACKS.md, "Remote objects" and "Replicas".
"""

from ..bridge import rules
from . import by_value_classes, errors, functions, kinds, mirror_recipes


def install():
    """Gives the bridge this package's rules (bridge/rules.py); the same again is harmless."""
    rules.install(kinds=kinds.KINDS, mirrors=kinds.MIRRORS, mirror_recipes=mirror_recipes,
                  functions=functions.FUNCTIONS, by_value=by_value_classes.CLASSES,
                  upstream_modules=kinds.UPSTREAM_MODULES, loaded_by_path=kinds.LOADED_BY_PATH, errors=errors)
