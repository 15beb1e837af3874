"""Upstream's functions that one side calls on the other's behalf when it is given the
other's objects (bridge/conversation.py's call_function): the model's owner samples with
it (forwarded.py), loads it, so that admission counts the load as the owner's
(docs/ARBITRATION.md), and patches it with a LoRA, where its memory and its weights are.
FUNCTIONS are the only functions either side calls for the other.
"""

from ..bridge.remote import link_of
from .forwarded import FORWARDED
from .guided import GUIDED_SAMPLE

_LOAD = "comfy.model_management.load_models_gpu"
FUNCTIONS = frozenset(FORWARDED + (_LOAD, "comfy.model_management.load_model_gpu", GUIDED_SAMPLE))


def load_by_owners(models, args, kwargs):
    """upstream's load_models_gpu(models, ...) for the remote ones among `models`: each
    owner loads its own, through its own admission (a proxy is no model here, and adds
    nothing to this process's list or to the ledger). Returns the models of this process."""
    local, by_owner = [], {}
    for model in models:
        link = link_of(model)
        if link is None:
            local.append(model)
        else:
            by_owner.setdefault(id(link.session), (link.session, []))[1].append(model)
    for conversation, theirs in by_owner.values():
        conversation.call_function(_LOAD, [theirs, *args], kwargs)
    return local
