"""Runs comfy_supervisor.host.comfyui installed as in ComfyUI, over our model of upstream's
memory manager, then a script of steps given as arguments, each as one word with its
values after colons, in order:

    load:NAME:SIZE[:PATCH=SIZE...]  a prompt that loads NAME (with patch models) on the GPU
    load-cpu:NAME:SIZE              a prompt that loads NAME with the CPU as its load device
    load-between-prompts:NAME:SIZE  loads NAME on the GPU outside a prompt, so with the host
                                    idle: a worker that waits for it knows no prompt runs
    partial:NAME:SIZE               upstream's LoadedModel.model_unload(SIZE) on NAME's entry
    free:SIZE                       upstream's free_memory(SIZE, the GPU), as a custom node
    unload-all                      upstream's unload_all_models(), as main.py after POST /free
    unload-clones:NAME              upstream's unload_model_and_clones(NAME)
    drop:NAME                       lets NAME's patcher and module go: its finalizer runs
                                    upstream's cleanup_models
    fail-unload:NAME                NAME's unloads raise from now on
    slow-unload:NAME:MS             NAME's unloads take MS milliseconds
    unload-all-during-eviction:NAME waits until the supervisor's eviction of NAME is running
                                    on the command thread, then runs unload_all_models
    wait-standins:N                 waits until N stand-in entries are in the list
    wait-free-below:SIZE            waits until the device has less than SIZE free
    keep-standin                    keeps the first stand-in entry aside, then waits until
                                    its owner leaves the ledger, and unloads the kept entry
    sleep:MS

After each step that unloads, it waits until the ledger shows exactly the host's entries
on the GPU and says "fake_comfyui: ledger true after STEP in N ms", or "ledger stale after
STEP" when it does not within 3 refresh periods. Every line goes to stderr. It then runs
until the supervisor's Shutdown."""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import comfy.model_management as mm  # noqa: E402
import execution  # noqa: E402
from comfy_supervisor.host import comfyui  # noqa: E402
from comfy_supervisor import participant as sv  # noqa: E402

UNITS = {"MiB": 2**20, "GiB": 2**30}
patchers = {}  # name -> ModelPatcher: the strong references a node's outputs would hold


def size(text):
    for unit, scale in UNITS.items():
        if text.endswith(unit):
            return int(float(text[:-len(unit)]) * scale)
    return int(text)


def say(line):
    print(f"fake_comfyui: {line}", file=sys.stderr, flush=True)


def wait_until(predicate, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def standins(host):
    return [loaded for loaded in mm.current_loaded_models if host.standins.is_standin(loaded)]


def own_on_gpu(host):
    return {(id(loaded.model), loaded.model_loaded_memory()) for loaded in mm.current_loaded_models
            if loaded.model is not None and not host.standins.is_standin(loaded) and loaded.device == mm.GPU}


def ledger_true(host):
    """The host's rows in the ledger are exactly its GPU entries, with their loaded bytes,
    and the simulated device holds what they hold."""
    rows = {(entry.model_id, entry.loaded_bytes) for entry in host.link.read_ledger()
            if entry.owner_slot == host.link.slot}
    with host.lock:
        entries = own_on_gpu(host)
        expected = {(host.ids.get(key), loaded) for key, loaded in entries}
    return rows == expected and host.link.device_used() == sum(loaded for _, loaded in entries)


def check_ledger(host, step):
    started = time.monotonic()
    if wait_until(lambda: ledger_true(host), timeout_s=3 * comfyui.IDLE_REFRESH_S):
        say(f"ledger true after {step} in {int((time.monotonic() - started) * 1000)} ms")
    else:
        say(f"ledger stale after {step}")


def load(name, nbytes, device=mm.GPU, patches=(), in_prompt=True):
    extras = [mm.ModelPatcher(size(amount), load_device=device) for amount in patches]
    patcher = mm.ModelPatcher(nbytes, load_device=device, patches=extras)
    patchers[name] = patcher
    patchers.update({f"{name}+{i}": extra for i, extra in enumerate(extras)})

    def loading():
        mm.load_models_gpu([patcher], memory_required=1 << 30)

    if in_prompt:
        execution.PromptExecutor().execute(loading, name)
    else:
        loading()


def entry_of(name):
    return next(loaded for loaded in mm.current_loaded_models if loaded.model is patchers[name])


def keep_standin(host):
    kept = standins(host)[0]
    patcher = kept.model  # the entry holds it weakly, as upstream's LoadedModel does
    entry = patcher.ledger_entry
    say(f"holding the stand-in of {patcher.model.owner}")  # its label, as our log lines name it
    wait_until(lambda: all(row.key != entry.key for row in host.link.read_ledger()), timeout_s=60)
    detached = kept.model_unload()
    say(f"dead owner's stand-in: model_unload returned {detached}, {kept.model_loaded_memory()} bytes left")


def ledger_looks(host):
    """Looks at the ledger twice while it stands still: the tuple read first comes back."""
    for _ in range(100):
        generation = host.link.ledger_generation()
        first = host.link.read_ledger()
        second = host.link.read_ledger()
        if host.link.ledger_generation() == generation:
            say(f"ledger looked at twice: the same tuple {second is first}, {len(first)} row(s)")
            return
        time.sleep(0.01)  # it moved meanwhile: the host's own reports are still going in
    say("ledger looked at twice: it never stood still")


def run(host, step):
    word, *values = step.split(":")
    if word == "load":
        load(values[0], size(values[1]), patches=[v.split("=")[1] for v in values[2:]])
    elif word == "load-cpu":
        load(values[0], size(values[1]), device=mm.CPU)
    elif word == "load-between-prompts":
        load(values[0], size(values[1]), in_prompt=False)
    elif word == "partial":
        entry_of(values[0]).model_unload(memory_to_free=size(values[1]))
    elif word == "free":
        mm.free_memory(size(values[0]), mm.get_torch_device())
    elif word == "unload-all":
        mm.unload_all_models()
    elif word == "unload-clones":
        mm.unload_model_and_clones(patchers[values[0]])
    elif word == "drop":
        del patchers[values[0]]  # the last strong reference: the module dies, its finalizer runs
    elif word == "fail-unload":
        patchers[values[0]].fail_unload = RuntimeError(f"{values[0]} cannot be unloaded")
    elif word == "slow-unload":
        patchers[values[0]].unload_delay_s = int(values[1]) / 1000
    elif word == "unload-all-during-eviction":
        wait_until(lambda: patchers[values[0]].unloading, timeout_s=60)
        mm.unload_all_models()
    elif word == "wait-standins":
        wait_until(lambda: len(standins(host)) == int(values[0]), timeout_s=60)
    elif word == "wait-free-below":
        wait_until(lambda: host.link.device_free() < size(values[0]), timeout_s=60)
    elif word == "keep-standin":
        keep_standin(host)
    elif word == "ledger-looks":
        ledger_looks(host)
    elif word == "sleep":
        time.sleep(int(values[0]) / 1000)
    else:
        raise SystemExit(f"fake_comfyui: unknown step {step!r}")
    say(f"{step} done")
    if word in ("load", "load-cpu", "load-between-prompts", "partial", "free", "unload-all", "unload-clones", "drop",
                "unload-all-during-eviction"):
        check_ledger(host, step)


def describe(host):
    parts = []
    for loaded in mm.current_loaded_models:
        if host.standins.is_standin(loaded):
            entry = loaded.model.ledger_entry
            parts.append(f"stand-in of slot {entry.owner_slot} model {entry.model_id} "
                         f"({loaded.model_loaded_memory()} loaded)")
        else:
            name = next((n for n, p in patchers.items() if p is loaded.model), "?")
            parts.append(f"{name} on {loaded.device} ({loaded.model_loaded_memory()} loaded)")
    return "; ".join(parts) or "nothing"


def main():
    host = comfyui.install()
    mm.participant = host.link
    for step in sys.argv[1:]:
        run(host, step)
    say(f"steps done; list: {describe(host)}; host rows in the ledger: "
        f"{sum(1 for e in host.link.read_ledger() if e.owner_slot == host.link.slot)}; "
        f"device used by the host: {host.link.device_used()}")
    threading.Event().wait()  # the supervisor's Shutdown ends the process


if __name__ == "__main__":
    try:
        main()
    except sv.ParticipantError as error:
        say(f"error: {error}")
        sys.exit(1)
