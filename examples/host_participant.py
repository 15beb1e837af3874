"""A stand-in for the ComfyUI host, for the demo and the multi-process tests (where
torch and ComfyUI cannot run): it takes part through comfy_supervisor.participant
exactly as comfy_supervisor.host.comfyui does, on the simulated device. It holds models as device bytes allocated through the library, asks admission
before each load, and answers eviction and release commands from a background thread
with the bytes it measured freed (its device use before minus after).

    host_participant.py [--hold NAME=SIZE]... [--later NAME=SIZE --when-free-below SIZE [--later-keeps-held]]
                        [--call-isolated]

--hold loads at start; --later loads once the device's free memory falls below the
threshold (another participant loaded), so the test decides the order; with
--later-keeps-held that load uses every model held, as one load_models_gpu of many
models, and keeps them all loaded. --call-isolated calls nodes of the packs that run in
workers of their own (the `python` form, docs/PACKS.md) through the host's proxy nodes,
as ComfyUI would, with comfy_supervisor.host.proxy_nodes over our model of upstream's comfy
package (tests/host/fake_comfyui on the PYTHONPATH). It runs until the supervisor's Shutdown. Every event
is one line on stderr, for the test to read.
"""

import argparse
import sys
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
            self.link.register_model(model_id, nbytes, nbytes, kind=sv.KIND_DIFFUSION)
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


def call_isolated():
    """Runs a few of tests/packs/bridge_pack's nodes in its worker, as a prompt would."""
    import comfy.utils
    import torch
    from comfy_supervisor.host import proxy_nodes

    bridges = proxy_nodes.Bridges.start(None)
    if bridges is None:
        say("--call-isolated: the supervisor gave this life no bridge (no pack in the python form?)")
        return
    nodes, _ = bridges.proxy_nodes()
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hold", type=model, action="append", default=[])
    parser.add_argument("--later", type=model)
    parser.add_argument("--when-free-below", type=size, default=0)
    parser.add_argument("--later-keeps-held", action="store_true")
    parser.add_argument("--call-isolated", action="store_true")
    options = parser.parse_args()
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
    if options.call_isolated:
        # Beside the main thread, which must be free to end at the supervisor's Shutdown.
        threading.Thread(target=call_isolated, name="call isolated", daemon=True).start()
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
