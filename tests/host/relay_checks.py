"""A MODEL one pack patched, patched again by another pack (docs/PACKS.md, "Replicas"): the
host lends pack A's MODEL on to pack B as its own, each of B's uses of it asked of A, so
that all the patches live in A's model, B's functions in it as callbacks, and the host's
KSampler samples it in A. Run by remote_checks.py's table."""

import sys

from comfy_supervisor.bridge.remote import link_of
from remote_checks import expect, expect_sampled_as_one_process, graph, pack

_checks = sys.modules["__main__"]  # bridge_checks: node(), say()


def check_two_packs():
    model, _, _, positive, negative, latent = graph()
    (first,) = _checks.node("PatchModel", "model").patch(model=model, scale=1.05)
    (second,) = _checks.node("PatchAttention", "second").patch(model=first, scale=0.9)
    # Pack B cloned and patched pack A's MODEL through the host: the clone is A's object,
    # and B's attention patch in it is B's function, which A calls back.
    expect(link_of(second) is not None and link_of(second).session is link_of(first).session,
           f"the MODEL pack second patched is {second!r}, not pack model's")
    one_process = pack().PatchAttention().patch(pack().PatchModel().patch(model, 1.05)[0], 0.9)[0]
    expect_sampled_as_one_process(second, one_process, first, positive, negative, latent)
    _checks.say("remote-two-packs: pack model's MODEL, patched again by pack second, sampled as one process")


CHECKS = {"remote-two-packs": check_two_packs}
