"""A stand-in for the ComfyUI host, for the demo and the multi-process tests (where
torch and ComfyUI cannot run): it takes part through comfy_supervisor.participant
exactly as comfy_supervisor.host.comfyui does, on the simulated device. It holds models as device bytes allocated through the library, asks admission
before each load, and answers eviction and release commands from a background thread
with the bytes it measured freed (its device use before minus after).

    host_participant.py [--hold NAME=SIZE]... [--later NAME=SIZE --when-free-below SIZE [--later-keeps-held]]
                        [--call-isolated] [--hostile-calls PACK [--hostile-arena PACK]]

--hold loads at start; --later loads once the device's free memory falls below the
threshold (another participant loaded), so the test decides the order; with
--later-keeps-held that load uses every model held, as one load_models_gpu of many
models, and keeps them all loaded. --call-isolated calls nodes of the packs that run in
workers of their own (the `python` form, docs/PACKS.md) through the host's proxy nodes,
as ComfyUI would, with comfy_supervisor.host.bridges over our model of upstream's comfy
package (tests/host/fake_comfyui on the PYTHONPATH). --hostile-calls runs, for the soak
(tests/soak), one round of calls to PACK (tests/packs/hostile_pack) at each signal: at
SIGUSR1 a node that never ends, cancelled as ComfyUI's Cancel does, which must end with
its worker; at SIGUSR2 a node that breaks the call protocol, whose worker's life must be
ended; at SIGRTMIN + 1 a node that floods the browser, of which no more than the host's
limits may reach this ComfyUI's PromptServer, the rest counted; at SIGRTMIN + 2 a node that
walks the host's MODEL with dotted names, object patches and callables toward the host's
builtins, each walk refused, nothing written and the MODEL unchanged; at SIGRTMIN + 3 the
host's KSampler over a MODEL the pack patched with a CFG function that never returns nor checks
for interrupts, cancelled, which must end with the pack's worker; and at SIGRTMIN, to the
--hostile-arena PACK (tests/packs/arena_hostile_pack), nodes that hand tensors over, then
write over every arena they can reach, which must leave the host's tensors as they were.
Each round then runs the pack's next call (in its new life where it was ended), and says
"hostile calls: cancel passed" (or "protocol", "flood", "walk", "callback", "mutate", or "failed: WHY"). It
runs until the supervisor's Shutdown. Every event is one line on stderr, for the test to
read.
"""

import argparse
import os
import queue
import random
import signal
import sys
import tempfile
import threading
import time

from comfy_supervisor import participant as sv

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def size(text):
    for unit in sorted(UNITS, key=len, reverse=True):
        if text.endswith(unit):
            return int(text[:-len(unit)]) * UNITS[unit]
    raise argparse.ArgumentTypeError(f"expected a size like 12GiB, found {text!r}")


def model(text):
    name, _, amount = text.partition("=")
    return name, size(amount)


def say(line):
    print(f"host_participant: {line}", file=sys.stderr, flush=True)


class Host:
    def __init__(self, link):
        self.link = link
        self.lock = threading.Lock()  # the models, between the main and the command thread
        self.models = {}              # id -> [name, total, loaded]
        self.next_id = 1
        self.stopped = threading.Event()

    def load(self, name, nbytes, keep=()):
        answer = self.link.request_admission(nbytes, largest_tensor=nbytes // 8, streams=1, keep_loaded=keep)
        if not answer.granted:
            say(f"loading {name} refused: {answer.refusal()}")
            return
        with self.lock:
            if not self.link.device_allocate(nbytes):
                say(f"out of device memory loading {name}")
                return
            model_id = self.next_id
            self.next_id += 1
            self.models[model_id] = [name, nbytes, nbytes]
            self.link.register_model(model_id, nbytes, nbytes, kind=sv.KIND_DIFFUSION, name=name)
            self.link.report_residency(model_id, nbytes)
        say(f"loaded {name} ({nbytes} bytes) as model {model_id}")

    def serve(self):
        while not self.stopped.is_set():
            command = self.link.next_command(1.0)
            if command is None:
                self.publish_census()
                continue
            if command.type == sv.SHUTDOWN:
                self.stopped.set()
            elif command.type in (sv.PARTIAL_UNLOAD, sv.DETACH):
                self.unload(command)
            elif command.type in sv.RELEASES:
                # Its models are all in the ledger and it keeps no caches: nothing to free.
                self.link.send_release_receipt(command, 0)

    def publish_census(self):
        """Its resident set, as ComfyUI's host keeps its census (the device figure is the library's)."""
        self.link.update_census(resident_set_bytes=sv.resident_set_bytes())

    def unload(self, command):
        with self.lock:
            held = self.models.get(command.model_id)
            loaded = held[2] if held else 0
            asked = command.bytes if command.type == sv.PARTIAL_UNLOAD else loaded
            before = self.link.device_used()
            self.link.device_release(min(asked, loaded))
            freed = before - self.link.device_used()
            if held:
                held[2] -= freed
                if command.type == sv.PARTIAL_UNLOAD:
                    self.link.report_residency(command.model_id, held[2])
            self.link.send_unload_receipt(command, freed, held[2] if held else 0, bytes_requested=asked)
            if held and command.type == sv.DETACH:
                del self.models[command.model_id]
                self.link.drop_model(command.model_id)
        what = "partial_unload" if command.type == sv.PARTIAL_UNLOAD else "detach"
        say(f"{what} of model {command.model_id}: freed {freed} bytes of {asked} asked")


class Isolated:
    """The packs that run in workers of their own, through the host's proxy nodes, which
    are registered once, as ComfyUI registers them, at the first call."""

    def __init__(self, bridges):
        self.bridges = bridges
        self.lock = threading.Lock()
        self.classes = None

    def nodes(self):
        with self.lock:
            if self.classes is None:
                self.classes, _ = self.bridges.proxy_nodes()
            return self.classes


def call_isolated(isolated):
    """Runs a few of tests/packs/bridge_pack's nodes in its worker, as a prompt would."""
    import comfy.utils
    import torch
    from comfy_supervisor.host import proxy_nodes

    nodes = isolated.nodes()
    if "InvertImage" not in nodes:
        say(f"--call-isolated: no InvertImage node among the isolated packs' {sorted(nodes)}")
        return
    pack = nodes["InvertImage"].PACK
    image = torch.rand(1, 512, 512, 3)
    started = time.perf_counter()
    (inverted,) = nodes["InvertImage"]().run(image=image)
    took_ms = (time.perf_counter() - started) * 1000
    (where,) = nodes["MappingOf"]().run(value=image)  # where the worker reads its input
    say(f"InvertImage ran in pack {pack}'s worker in {took_ms:.1f} ms: a {'x'.join(map(str, image.shape))} IMAGE in "
        f"and out, {'bit-exact' if torch.equal(inverted, 1.0 - image) else 'NOT bit-exact'}; the worker reads its "
        f"input in place, in {where.split()[0] if where else 'NO ARENA'}, and the host keeps a copy of the output")
    updates = []
    comfy.utils.set_progress_bar_global_hook(lambda value, total, preview, node_id=None: updates.append(value))
    (steps,) = nodes["SlowProgress"]().run(seconds=0.5)
    say(f"SlowProgress ran {steps} steps in the worker; the host's progress bar saw {len(updates)} updates")
    (model,) = nodes["LoadTinyModel"]().run(seed=0)
    (out,) = nodes["ApplyTinyModel"]().run(model=model, samples={"samples": torch.ones(1, 4)})
    say(f"LoadTinyModel's model stayed in the worker ({model!r}); ApplyTinyModel used it: "
        f"{[round(x, 4) for x in out['samples'][0].tolist()]}")
    try:
        nodes["Raise"]().run(message="a node's own error")
    except proxy_nodes.PackNodeError as error:
        say(f"Raise failed in the host as it did in the worker: {str(error).splitlines()[0]}")


HOSTILE_CALLS = {signal.SIGUSR1: "cancel", signal.SIGUSR2: "protocol", signal.SIGRTMIN: "mutate",
                 signal.SIGRTMIN + 1: "flood", signal.SIGRTMIN + 2: "walk", signal.SIGRTMIN + 3: "callback"}
FLOOD_MESSAGES = 20000  # small ones, then three over the host's limit on one message's size


def serve_hostile_calls(isolated, packs, asked):
    """The soak's hostile calls (to packs["calls"], or packs["arena"] for "mutate"), one at
    a time, as the signals ask for them."""
    while True:
        what = asked.get()
        hostile_call(isolated, packs["arena" if what == "mutate" else "calls"], what)


def hostile_call(isolated, pack, what):
    """One of the soak's rounds of hostile calls to `pack`, and the pack's next call after it."""
    import comfy.model_management as mm
    from comfy_supervisor.host import proxy_nodes

    try:
        nodes = {name: cls for name, cls in isolated.nodes().items() if getattr(cls, "PACK", None) == pack}
        if what == "mutate":
            mutate_round(nodes)
        elif what == "flood":
            flood_round(isolated.bridges.links[pack], nodes)
        elif what == "walk":
            walk_round(nodes)
        else:
            if what == "cancel":
                threading.Timer(0.2, mm.interrupt_current_processing, args=(True,)).start()
                expected, call = mm.InterruptProcessingException, lambda: nodes["LoopForever"]().run()
            elif what == "callback":
                call = sample_forever(nodes)
                threading.Timer(0.2, mm.interrupt_current_processing, args=(True,)).start()
                expected = mm.InterruptProcessingException
            else:
                kind = random.choice(("oversize", "nested"))
                expected, call = proxy_nodes.PackWorkerDied, lambda: nodes["BreakProtocol"]().run(kind=kind)
            try:
                call()
                raise RuntimeError(f"the {what} call returned")
            except expected:
                pass
            if nodes["Add"]().run(a=2, b=3) != (5,):
                raise RuntimeError("the next call answered wrong")
        say(f"hostile calls: {what} passed")
    except Exception as error:  # noqa: BLE001 (any failure is the round's, said in one line)
        say(f"hostile calls: {what} failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")


def mutate_round(nodes):
    """The arena pack hands over a tensor it made and one it was given, then writes over
    every arena it can reach: the host's copies must read as before."""
    import torch
    source = torch.rand(1, 64, 64, 3)
    sent = source.clone()
    handed, back = nodes["HostileHandover"]().run(size=64, value=source)
    if not (torch.equal(handed, torch.ones(1, 64, 64, 3)) and torch.equal(back, sent)):
        raise RuntimeError("the pack's outputs were wrong before it wrote over anything")
    (reached,) = nodes["HostileRewrite"]().run()
    if not reached.get("arenas"):
        raise RuntimeError(f"the pack's writes reached no arena: {reached}")
    if not torch.equal(handed, torch.ones(1, 64, 64, 3)):
        raise RuntimeError(f"a tensor the pack made changed after the call: it reads {handed.flatten()[0].item()!r}")
    if not torch.equal(back, sent):
        raise RuntimeError(f"a tensor the pack handed back changed after the call: it reads {back.flatten()[0].item()!r}")


def flood_round(link, nodes):
    """The pack floods the browser: no more than the host's limits may reach this
    ComfyUI's PromptServer, every other message counted, and the next call answered."""
    import server
    gate, prompt_server = link.browser, server.PromptServer.instance
    prompt_server.sent.clear()
    before = dict(gate.refused)
    started = time.monotonic()
    nodes["FloodBrowser"]().run(count=FLOOD_MESSAGES, big=3, big_bytes=2 * gate.limits.max_bytes)
    elapsed = time.monotonic() - started
    passed = [event for event, _, _ in prompt_server.sent if event.startswith("hostile.flood")]
    refused = {reason: gate.refused[reason] - before[reason] for reason in gate.refused}
    bound = gate.limits.per_second * (1 + elapsed)  # a second's worth at once, then the rate
    if len(passed) > bound or "hostile.flood.big" in passed:
        raise RuntimeError(f"{len(passed)} messages reached the browser in {elapsed:.1f} s (at most {bound:.0f}), "
                           f"{passed.count('hostile.flood.big')} of them over the size limit")
    if refused["size"] != 3 or refused["rate"] != FLOOD_MESSAGES - len(passed):
        raise RuntimeError(f"refusals counted {refused}, for {FLOOD_MESSAGES - len(passed)} small and 3 large "
                           "messages kept back")
    if nodes["Add"]().run(a=2, b=3) != (5,):
        raise RuntimeError("the call after the flood answered wrong")


def sample_forever(nodes):
    """The host's KSampler over a MODEL the pack patched with a CFG function that never
    returns nor checks for interrupts (hostile_pack/callbacks.py), ready to call."""
    import nodes as upstream_nodes
    import torch
    model, clip, _ = upstream_nodes.CheckpointLoaderSimple().load_checkpoint("tiny.safetensors")
    (patched,) = nodes["PatchCfgForever"]().patch(model=model)
    (positive,) = upstream_nodes.CLIPTextEncode().encode(clip, "a cat")
    (negative,) = upstream_nodes.CLIPTextEncode().encode(clip, "")
    latent = {"samples": torch.zeros(1, 4, 4, 4)}
    return lambda: upstream_nodes.KSampler().sample(patched, 7, 3, 7.5, "euler", "normal", positive, negative, latent)


class CanaryWriter:
    """A host object of no kind: its bound method, in a MODEL's options, is a callable the
    host never hands a pack; called, it writes the canary."""

    def __init__(self, path):
        self.path = path

    def write(self):
        with open(self.path, "w") as canary:
            canary.write(str(os.getpid()))


def walk_round(nodes):
    """The pack walks the host's MODEL toward the host's builtins (hostile_pack/walks.py):
    every walk must be refused, the canary never written and the MODEL unchanged."""
    import json
    import nodes as upstream_nodes
    model = upstream_nodes.CheckpointLoaderSimple().load_checkpoint("tiny.safetensors")[0]
    hooked = model.clone()
    with tempfile.TemporaryDirectory(prefix="comfy-walk-") as folder:
        canary = os.path.join(folder, "canary")
        hooked.model_options["transformer_options"]["host_hook"] = CanaryWriter(canary).write
        options = repr(model.model_options)
        answers, clone = nodes["WalkHostObjects"]().run(model=model, hooked=hooked, canary=canary, flood=20)
        reached = [f"{what}: {outcome}" for what, outcome, _ in json.loads(answers) if outcome != "refused"]
        if reached:
            raise RuntimeError(f"{len(reached)} walks were not refused, the first {reached[0]}")
        if os.path.exists(canary):
            raise RuntimeError("the host's eval or a host callable wrote the canary")
    if clone.object_patches or repr(model.model_options) != options or model.object_patches:
        raise RuntimeError(f"the walk changed the host's MODEL or patched its clone: {clone.object_patches}")
    if nodes["Add"]().run(a=2, b=3) != (5,):
        raise RuntimeError("the call after the walk answered wrong")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hold", type=model, action="append", default=[])
    parser.add_argument("--later", type=model)
    parser.add_argument("--when-free-below", type=size, default=0)
    parser.add_argument("--later-keeps-held", action="store_true")
    parser.add_argument("--call-isolated", action="store_true")
    parser.add_argument("--hostile-calls", metavar="PACK")
    parser.add_argument("--hostile-arena", metavar="PACK")
    options = parser.parse_args()
    asked = queue.SimpleQueue()  # the hostile calls signals asked for (put is safe in a handler)
    if options.hostile_calls:
        # Before the Hello: the soak may signal as soon as this participant is ready.
        for number in HOSTILE_CALLS:
            signal.signal(number, lambda signum, frame: asked.put(HOSTILE_CALLS[signum]))
    try:
        link = sv.Participant(capabilities=sv.CAP_PARTIAL_UNLOAD)
    except sv.ParticipantError as error:
        say(str(error))
        return 2
    say(f"joined in slot {link.slot}, generation {link.generation}")
    host = Host(link)
    host.publish_census()
    commands = threading.Thread(target=host.serve, daemon=True)
    commands.start()
    for name, nbytes in options.hold:
        host.load(name, nbytes)
    if options.call_isolated or options.hostile_calls:
        from comfy_supervisor.host.bridges import Bridges
        bridges = Bridges.start(None)
        if bridges is None:
            flag = "--call-isolated" if options.call_isolated else "--hostile-calls"
            say(f"{flag}: the supervisor gave this life no bridge (no pack in the python form?)")
        else:
            isolated = Isolated(bridges)
            if options.call_isolated:
                # Beside the main thread, which must be free to end at the supervisor's Shutdown.
                threading.Thread(target=call_isolated, args=(isolated,), name="call isolated", daemon=True).start()
            if options.hostile_calls:
                import server
                server.PromptServer()  # as ComfyUI's main makes it: a pack's messages to the browser reach it
                packs = {"calls": options.hostile_calls, "arena": options.hostile_arena}
                threading.Thread(target=serve_hostile_calls, args=(isolated, packs, asked),
                                 name="hostile calls", daemon=True).start()
    if options.later:
        while link.device_free() >= options.when_free_below and not host.stopped.is_set():
            time.sleep(0.01)
        if not host.stopped.is_set():
            with host.lock:
                keep = list(host.models) if options.later_keeps_held else []
            host.load(*options.later, keep=keep)
    host.stopped.wait()
    commands.join()
    link.close()
    say("shut down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
