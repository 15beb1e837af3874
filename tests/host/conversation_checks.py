"""The checks of bridge_checks.py for a pack's worker in a conversation with a node of the
host's prompt (tests/python/conversation_test.cpp), with tests/packs/model_pack as "model":
the host's node uses the pack's control net (its get_control, as the host's sampler asks
for residuals each step) USES times, a pause longer than the worker's IDLE_AFTER_S between
two, as a GPU sampler's steps are.

    conversation-held:PATH  the worker begins one busy stretch for the node's uses, and
                      none is left at the node's end; in the middle of the node, the host
                      says so and waits for the test to see the worker busy in a callback in
                      comfyctl workers, which then makes the file PATH
    conversation-killed  the host's first life dies in the middle of such a node; its next
                      life finds the worker not busy, in the same life
"""

import os
import signal
import sys
import time

import torch

_checks = sys.modules["__main__"]  # bridge_checks: node(), link(), expect(), say()
USES = 20
PAUSE_S = 0.01            # between two uses: longer than the worker's IDLE_AFTER_S (2 ms)
SHOWN_WAIT_S = 60.0       # for the test to look at comfyctl workers


def control():
    """The pack's control net, and what get_control takes."""
    (conditioning,) = _checks.node("OwnControl", "model").apply(conditioning=[[torch.zeros(1, 2, 8), {}]],
                                                                image=torch.rand(1, 8, 8, 3), strength=1.0)
    net = conditioning[0][1]["control"]
    x, t, cond = torch.rand(1, 4, 8, 8), torch.ones(1), {"c_crossattn": torch.zeros(1, 2, 8)}
    return lambda: net.get_control(x, t, cond, 1, {})


def in_one_node(node):
    """`node` run as the one node of a prompt, by upstream's executor (the fake's)."""
    import execution
    execution.PromptExecutor().execute([node], "conversation")


def uses(use, count):
    for _ in range(count):
        residuals = use()
        _checks.expect(residuals["middle"][0].shape == (1, 64, 32), "the control net's residuals")
        time.sleep(PAUSE_S)


def check_held(path):
    use, stats = control(), _checks.link("model").stats
    before = stats()
    time.sleep(PAUSE_S)  # the stretch of the last node call (OwnControl's) ends first

    def node():
        uses(use, USES)
        _checks.say("conversation-held: pack model is in its conversation with this node")
        deadline = time.monotonic() + SHOWN_WAIT_S
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)

    in_one_node(node)
    after = stats()
    _checks.expect(os.path.exists(path), f"the test did not see the worker busy within {SHOWN_WAIT_S:.0f} s")
    began = after["busy_stretches"] - before["busy_stretches"]
    _checks.expect(began == 1, f"the worker began {began} busy stretches for one node's {USES} uses, not 1")
    _checks.expect(not after["busy"], "the worker is still busy after the host's node ended")


def check_killed():
    link = _checks.link("model")
    if _checks.host.link.generation == 1:
        use = control()

        def node():
            uses(use, 3)
            _checks.say("conversation-killed: this life ends in its node's conversation with pack model")
            os.kill(os.getpid(), signal.SIGKILL)

        in_one_node(node)
    stats = link.stats()
    _checks.expect(not stats["busy"], "the worker is still busy in the conversation of the host's life that died")
    _checks.expect(link.session.generation == 1, f"the worker's life is {link.session.generation}, not its first")


CHECKS = {"conversation-killed": check_killed}
ARGUED = {"conversation-held": check_held}
