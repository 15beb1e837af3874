"""The checks of bridge_checks.py for ComfyUI's Cancel reaching a pack's function that the
host calls back (tests/python/callback_cancel_test.cpp), with tests/packs/hostile_pack as
"hostile" (its callbacks.py):

    callback-cfg      the pack's CFG function under the host's KSampler never returns: at
                      Cancel the sampling ends with upstream's InterruptProcessingException
                      once the grace period ended the pack's life, and the next call runs in
                      the next life
    callback-returned the same for a function the pack returned, called by the host
    callback-nested   the same three waits deep: the pack's node samples the host's MODEL
                      (upstream's common_ksampler, run in the host), whose sampler calls the
                      pack's CFG function back
    callback-checking a CFG function that checks for interrupts hears the host's Cancel in
                      its worker and ends by itself: the pack's life goes on
    callback-shown:PATH  a function the pack returned sits in its callback until the test,
                      having seen it so in comfyctl workers, makes the file PATH; then Cancel
"""

import os
import sys
import threading
import time

import comfy.model_management as mm

_checks = sys.modules["__main__"]  # bridge_checks: node(), link(), expect(), raises(), say()
# Past the grace period, how long the end of a life and the call's exception may take on a
# loaded machine: far from both the grace period and a hang.
SLACK_S = 30.0
SHOWN_WAIT_S = 60.0  # for the test to look at comfyctl before the Cancel comes anyway


def expect(condition, why):
    _checks.expect(condition, why)


def hostile(name):
    return _checks.node(name, "hostile")


def cancel_at(event=None, after_s=0.5):
    """ComfyUI's Cancel (POST /interrupt): once `event` is set (or SHOWN_WAIT_S passed), or
    `after_s` from now. Returns the list its time is put in."""
    cancelled = []

    def cancel():
        if event is not None:
            event.wait(SHOWN_WAIT_S)
        else:
            time.sleep(after_s)
        cancelled.append(time.monotonic())
        mm.interrupt_current_processing(True)

    threading.Thread(target=cancel, name="cancel", daemon=True).start()
    return cancelled


def ends_with_its_life(call, cancelled_at=None):
    """`call` hangs in the pack's callback until Cancel, then raises upstream's
    InterruptProcessingException within the grace period and SLACK_S, the pack's life
    ended; the next call runs in the next life."""
    link = _checks.link("hostile")
    generation = link.session.generation
    cancelled = cancelled_at if cancelled_at is not None else cancel_at()
    _checks.raises(call, mm.InterruptProcessingException)
    took = time.monotonic() - cancelled[0]
    expect(took < link.cancel_grace_s + SLACK_S,
           f"the callback ended {took:.1f} s after Cancel, past the grace period ({link.cancel_grace_s:.1f} s)")
    expect(not mm.processing_interrupted(), "the interrupt flag stayed set")
    expect(hostile("Add").run(a=2, b=3) == (5,), "the call after Cancel")
    expect(link.session.generation > generation, "the pack's life did not end")
    return took


def graph():
    import remote_checks
    model, _, _, positive, negative, latent = remote_checks.graph()
    return model, positive, negative, latent


def check_cfg():
    model, positive, negative, latent = graph()
    (patched,) = hostile("PatchCfgForever").patch(model=model)
    import remote_checks
    took = ends_with_its_life(lambda: remote_checks.ksample(patched, positive, negative, latent))
    _checks.say(f"callback-cfg: the host's KSampler ended {took:.1f} s after Cancel")


def check_returned():
    (function,) = hostile("ReturnForever").make()
    ends_with_its_life(lambda: function("anything"))


def check_nested():
    model, positive, negative, latent = graph()
    ends_with_its_life(lambda: hostile("SampleForever").sample(model=model, positive=positive, negative=negative,
                                                               latent=latent))


def check_checking():
    model, positive, negative, latent = graph()
    (patched,) = hostile("PatchCfgChecking").patch(model=model)
    generation = _checks.link("hostile").session.generation
    cancel_at()
    import remote_checks
    _checks.raises(lambda: remote_checks.ksample(patched, positive, negative, latent), mm.InterruptProcessingException)
    expect(not mm.processing_interrupted(), "the interrupt flag stayed set")
    expect(hostile("Add").run(a=1, b=1) == (2,), "the next call")
    expect(_checks.link("hostile").session.generation == generation, "the worker was restarted")


def check_shown(path):
    (function,) = hostile("ReturnForever").make()
    seen = threading.Event()

    def watch():
        deadline = time.monotonic() + SHOWN_WAIT_S
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.set()

    threading.Thread(target=watch, name="watch", daemon=True).start()
    cancelled = cancel_at(seen)
    _checks.say("callback-shown: pack hostile sits in its callback until the test saw it in comfyctl workers")
    ends_with_its_life(lambda: function(), cancelled)
    expect(os.path.exists(path), f"the test did not see the callback within {SHOWN_WAIT_S:.0f} s")


CHECKS = {"callback-cfg": check_cfg, "callback-returned": check_returned, "callback-nested": check_nested,
          "callback-checking": check_checking}
ARGUED = {"callback-shown": check_shown}
