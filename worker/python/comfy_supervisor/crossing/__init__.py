"""What of ComfyUI crosses between the host and a pack, and how: the rules that name
ComfyUI's own modules and classes, kept out of the bridge (which moves values and objects
and knows no ComfyUI).

- replica: the pack's side of a host MODEL: upstream's own ModelPatcher over upstream's own
  BaseModel, built in the worker from a recipe, its diffusion model over the owner's
  weights (a mirror), loaded by the owner;
- replica_owner: the host's side of it: the recipe, and the loads a replica asks for;
- forwarded: upstream's sampling functions given the other side's MODEL, run by that side.

Imports the bridge alone. Imported by host and pack_worker. Docs: docs/PACKS.md, "Replicas".
"""
