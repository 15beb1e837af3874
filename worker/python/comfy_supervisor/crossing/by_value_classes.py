"""Upstream's value classes, which cross between the host and a pack by value (docs/PACKS.md,
"Remote objects"; how: bridge/by_value.py): the receiver gets its own object of the same
upstream class, built from what the sender's held, as a tensor crosses.

These are comfy.conds' conditioning values: what upstream's BaseModel.extra_conds makes
of a CONDITIONING for the model (the cross attention as a CONDCrossAttn, a pooled output
or an image embedding as a CONDRegular, a concat latent as a CONDNoiseShape, a frame count
as a CONDConstant, reference latents as a CONDList), and what packs put into a
CONDITIONING's "model_conds". Each holds one field, `cond` (a tensor, a plain value or a
list of tensors), and its methods only read it, so a copy on each side behaves as the
one object would in one process; and upstream's sampler calls them on every step for
every conditioning, where a round trip each would cost more than the step. And upstream's
ExecutionBlocker, which a node returns in place of an output to stop the nodes after it
(its one field, `message`, what upstream reports, or None to stop them silently). And
upstream's weight adapters (comfy.weight_adapter's LoRA, LoHa, LoKr, GLoRA, OFT, BOFT), as
its load_lora makes them: a LoRA's patch of one weight, its loaded keys and its tensors,
which a replica's load carries to the host as data (crossing/replicas/owner.py).

A ComfyUI type that crosses as a copy is one line in CLASSES. Only an object whose class
is exactly one of them crosses so: a pack's subclass of one, with methods of its own,
crosses as a remote object of the kind COND (kinds.py).
"""

_CONDS = ("comfy.conds", ("cond",))
_ADAPTER_FIELDS = ("loaded_keys", "weights")
ADAPTERS = {"LoRAAdapter": ("comfy.weight_adapter.lora", _ADAPTER_FIELDS),
            "LoHaAdapter": ("comfy.weight_adapter.loha", _ADAPTER_FIELDS),
            "LoKrAdapter": ("comfy.weight_adapter.lokr", _ADAPTER_FIELDS),
            "GLoRAAdapter": ("comfy.weight_adapter.glora", _ADAPTER_FIELDS),
            "OFTAdapter": ("comfy.weight_adapter.oft", _ADAPTER_FIELDS),
            "BOFTAdapter": ("comfy.weight_adapter.boft", _ADAPTER_FIELDS)}
# Each class that crosses by value: its module and the fields its constructor takes, in order.
CLASSES = {"CONDRegular": _CONDS, "CONDNoiseShape": _CONDS, "CONDCrossAttn": _CONDS, "CONDConstant": _CONDS,
           "CONDList": _CONDS, "ExecutionBlocker": ("comfy_execution.graph_utils", ("message",)), **ADAPTERS}
