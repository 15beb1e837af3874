"""The ComfyUI host for the node-call bridge's tests (tests/python/node_calls_test.cpp): installs
comfy_supervisor.host.comfyui as ComfyUI does, over our model of upstream (fake_comfyui), takes
the isolated packs' proxy nodes as ComfyUI would register them, and runs the checks named
as arguments through them, in order. Each prints one line to stderr,
"bridge_checks: NAME passed" or "bridge_checks: NAME failed: WHY", then the host runs
until the supervisor's Shutdown. The packs are tests/packs/bridge_pack as "bridge" and
again as "other" (a second pack with the same nodes), tests/packs/hostile_pack as
"hostile", tests/packs/bad_interface_pack as "bad" and tests/packs/arena_hostile_pack as
"evil".

    interfaces   each proxy class has the pack's own interface
    wildcards    a wildcard type, optional inputs of any name and a type of customised
                 equality compare as the pack's own do, and say the same to /object_info
    values       every kind of value round-trips bit-exact
    copies       a tensor into a worker is read in place, in the arena the host writes for
                 that pack life alone; an output is the host's own copy, and the host maps
                 no worker's arena
    sent-back    a tensor a worker returns as it came (whole or a part) is the host's own
                 tensor again, or a copy where that tensor is gone; one a node wrote into
                 comes back as written, and its source is untouched
    handles      an object stays in its worker: works with its pack, fails clearly elsewhere
    progress     the worker's ProgressBar drives the host's
    interrupt    ComfyUI's interrupt ends a node within 100 ms, as upstream's exception
    error        a node's exception comes with the worker's traceback
    oom          an out-of-memory error is upstream's OOM exception
    arena-idle   both arenas' used bytes return to zero once the outputs are released
    death        a worker killed mid-node fails the node naming the signal, the host's arena
                 for it goes back to the kernel, and the next call works
    final-death  a worker killed mid-node that the supervisor does not restart fails the
                 node saying so, and what brings the pack back, not that it restarts
    kept-output  an output the host holds stays valid after its worker died and restarted
    parallel     two packs run at once; one pack runs one call at a time
    malformed    values a hostile worker could send are refused in one line, their blocks released
    failed:PACK  PACK is failed: its nodes are not registered and the host said why
    clashlib:PACK=VERSION  PACK's node returns the clashlib its own environment imported,
                 VERSION (packs isolated by comfyctl pack add)
    late:PACK    PACK failed to import; fixed and retried by the test, its node registers in
                 upstream's mappings without a restart of the host, and runs, and its
                 route answers (ComfyUI's server started without it)
    cancel       a node that never checks for interrupts ends at Cancel after the grace
                 period: its worker is ended and restarted, the call raises upstream's
                 InterruptProcessingException, and the next call runs in the new life
    cancel-progress  a node that only reports progress ends at Cancel in its worker, as
                 upstream's progress hook ends it in one process, with no restart, though
                 the host's own hook (upstream's) gave up on the call first
    protocol:KIND  a frame the host must refuse (KIND oversize or nested) fails the node in
                 one line; that life is ended and the next call runs in the new one
    browser-flood:N  a flood of messages to the browser from "hostile" is bounded by the
                 host's limits, which are the supervisor's config's (N messages a second,
                 under 256 KiB each), and counted; the next call runs in the same life
    bad-bool     a bool tensor from "hostile" whose bytes are other than 0 and 1 fails that
                 node in one line, and the next call runs in the same life
    repeat-block  tensors from "hostile" that all name one block fail that node in one
                 line, before the host copies any of them
    host-protocol  a frame the worker must refuse, from the host: the worker ends its life,
                 and the next call runs in the new one
    bad-interface  the nodes of "bad" whose interface upstream could not use are left
                 out, and only they: its good node and every other pack's are registered
    one-bad-class  of "bad" (tests/packs/one_bad_class_pack), the node class that cannot
                 describe itself is left out, and only it: its good node registers and runs
    snoop[:everywhere]  pack evil finds a tensor the host sent pack bridge in none of the
                 descriptors it holds; with "everywhere", nor in any descriptor of any
                 process it can see nor in /dev/shm (for evil in a sandbox)
    frozen       tensors pack evil handed the host (one it made, one it handed back) stay as
                 they were after it wrote over every arena it can reach
    remote-*     ComfyUI's objects across, both ways, with tests/packs/model_pack as "model"
                 (remote_checks.py)
    routes*      a pack's HTTP routes, served by the host and answered in its worker, with
                 tests/packs/routes_pack as "routes" (route_checks.py)
    group*       two packs that share a type, as one group and as two packs (group_checks.py)
    mirror-*     the host's diffusion model as a torch module in model_pack's worker, over the
                 host's weights mapped, and the pack's in the host (mirror_checks.py)
    callback-*   Cancel reaching a function of "hostile" that the host calls back and that
                 never returns (callback_checks.py)
    conversation-*  a node of the host's prompt that uses a pack's objects again and again is
                 one busy stretch of its worker, ended with the node or the host's life
                 (conversation_checks.py)
"""

import gc
import importlib
import json
import math
import mmap
import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_comfyui"))

import comfy.model_management as mm  # noqa: E402
import comfy.utils  # noqa: E402
import torch  # noqa: E402
from comfy_supervisor.host import comfyui, node_interfaces, proxy_nodes  # noqa: E402

classes = {}
host = None


def say(line):
    print(f"bridge_checks: {line}", file=sys.stderr, flush=True)


class CheckFailed(Exception):
    pass


def expect(condition, why):
    if not condition:
        raise CheckFailed(why)


def node(name, pack="bridge"):
    """A new instance of `name`'s proxy, as ComfyUI makes one per node of a graph."""
    return classes[pack][name]()


def raises(call, kind):
    try:
        call()
    except kind as error:
        return error
    raise CheckFailed(f"{call} raised nothing, not {kind.__name__}")


def same(a, b):
    """Bit-exact: same type, and for tensors the same dtype, shape and bytes."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and \
            bytes(a.contiguous().reshape(-1).view(torch.uint8).numpy()) == bytes(b.contiguous().reshape(-1).view(torch.uint8).numpy())
    if isinstance(a, float):
        return a.hex() == b.hex() or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def link(pack="bridge"):
    return host.bridges.links[pack]


def settled_arenas(pack="bridge"):
    """Host arena and the worker's arena bytes in use, once releases went both ways."""
    gc.collect()
    deadline = time.monotonic() + 5
    while True:
        host.bridges.drain_idle()
        worker_used = link(pack).stats()["arena_used"]
        host_used = link(pack).session.own.used
        if (host_used, worker_used) == (0, 0) or time.monotonic() > deadline:
            return host_used, worker_used
        time.sleep(0.05)


# ---- the checks ----

def check_interfaces():
    proxy = classes["bridge"]["PlainValues"]
    expect(proxy.INPUT_TYPES() == {"required": {"count": ("INT", {"default": 1}), "scale": ("FLOAT", {"default": 1.0}),
                                                "text": ("STRING", {"default": ""}),
                                                "flag": ("BOOLEAN", {"default": False})}},
           f"INPUT_TYPES {proxy.INPUT_TYPES()}")
    expect(proxy.RETURN_TYPES == ("INT", "FLOAT", "STRING", "BOOLEAN"), f"RETURN_TYPES {proxy.RETURN_TYPES}")
    expect(proxy.RETURN_NAMES == ("count", "scale", "text", "flag"), f"RETURN_NAMES {proxy.RETURN_NAMES}")
    expect(proxy.FUNCTION == "run" and callable(getattr(proxy, "run")), "FUNCTION")
    expect(proxy.CATEGORY == "comfy-supervisor tests" and proxy.OUTPUT_NODE is False, "CATEGORY, OUTPUT_NODE")
    import inspect
    spec = inspect.getfullargspec(proxy.VALIDATE_INPUTS)
    expect(spec.args == ["cls", "count", "text"] and spec.varkw is None, f"VALIDATE_INPUTS takes {spec}")
    expect(proxy.VALIDATE_INPUTS(count=-1, text="x") == "count must not be negative, not -1", "VALIDATE_INPUTS answer")
    expect(proxy.IS_CHANGED(count=1, scale=2.0, text="t", flag=True) == "1/2.0/t/True", "IS_CHANGED answer")
    expect(classes["names"]["InvertImage"] == "Invert image (isolated)", "display name")
    expect(not hasattr(classes["bridge"]["Echo"], "VALIDATE_INPUTS"), "a VALIDATE_INPUTS the pack has not")
    expect(proxy.OUTPUT_TOOLTIPS == ("the count plus one", "the scale doubled", "the text reversed",
                                     "the flag negated") and proxy.DESCRIPTION == "Plain values in, changed, and out."
           and proxy.NOT_IDEMPOTENT is True and not hasattr(classes["bridge"]["Echo"], "OUTPUT_TOOLTIPS"),
           "OUTPUT_TOOLTIPS, DESCRIPTION and NOT_IDEMPOTENT, where the pack's class has them")
    proxy.RELATIVE_PYTHON_MODULE = "custom_nodes.comfy_supervisor"  # as upstream sets it on what our module maps
    expect(proxy.RELATIVE_PYTHON_MODULE == "custom_nodes.bridge_pack",
           f"python_module {proxy.RELATIVE_PYTHON_MODULE!r}, not the pack's")
    # Upstream saves IS_CHANGED's answer in each image's metadata: a proxy has none where the
    # pack's class has none and its outputs are tensors and plain values.
    invert, model = classes["bridge"]["InvertImage"], classes["bridge"]["LoadTinyModel"]
    expect(not hasattr(invert, "IS_CHANGED") and hasattr(model, "IS_CHANGED"),
           "IS_CHANGED only where the pack's class has it, or where the outputs may hold objects")


def check_wildcards():
    proxy = classes["bridge"]["PassAnything"]
    types = proxy.INPUT_TYPES()
    anything, optional = types["required"]["value"][0], types["optional"]
    expect(not anything != "IMAGE" and not proxy.RETURN_TYPES[0] != "MODEL" and proxy.RETURN_TYPES[1] != "IMAGE",
           f"the wildcard in and out compare unequal to a type: {types}, {proxy.RETURN_TYPES}")
    pixels = optional["pixels"][0]
    expect("seed" in optional and not optional["seed"][0] != "LATENT" and not pixels != "MASK" and pixels != "LATENT",
           f"the optional inputs of any name, and the input of customised equality: {optional}")
    expect(json.dumps(types) == '{"required": {"value": ["*"]}, "optional": {"pixels": ["IMAGE_OR_MASK"]}}' and
           json.dumps(proxy.RETURN_TYPES) == '["*", "INT"]', f"what /object_info says of them: {json.dumps(types)}")
    value, extra = node("PassAnything").run(value=torch.ones(3), seed=5, label="x")
    expect(same(value, torch.ones(3)) and extra == 2, f"the wildcard's value and inputs of any name: {value}, {extra}")


def check_values():
    image = torch.rand(2, 32, 48, 3)
    (inverted,) = node("InvertImage").run(image=image)
    expect(same(inverted, 1.0 - image), "InvertImage's output")
    (latent,) = node("EmptyLatent").run(width=64, height=32, batch_size=2)
    expect(same(latent, {"samples": torch.zeros(2, 4, 4, 8), "batch_index": [0, 1]}), "EmptyLatent's LATENT")
    expect(node("PlainValues").run(count=3, scale=0.1, text="abc", flag=False) == (4, 0.2, "cba", True), "plain values")
    conditioning = [[torch.randn(1, 77, 768), {"pooled_output": torch.randn(1, 1280), "strength": 0.75}]]
    values = [
        conditioning,
        {"samples": torch.randn(1, 4, 8, 8), "noise_mask": torch.rand(1, 1, 64, 64), "batch_index": [3]},
        torch.rand(16, 16).t(),                               # not contiguous
        torch.arange(24, dtype=torch.int64).view(2, 3, 4)[:, ::2, 1:],  # strided
        torch.tensor(2.5),                                    # no dimensions
        torch.zeros(0, 3),                                    # no elements
        torch.tensor([True, False, True]),
        torch.randn(5).to(torch.bfloat16), torch.randn(5).to(torch.float16), torch.randn(5, dtype=torch.float64),
        torch.randint(-100, 100, (7,), dtype=torch.int8), torch.randint(0, 255, (7,), dtype=torch.uint8),
        torch.randint(-2**31, 2**31 - 1, (3,), dtype=torch.int32), torch.randn(4, dtype=torch.complex64),
        0, -7, 2**70, 0.1, -0.0, float("inf"), float("nan"), 1e-310, "", "ünïcödé\n\"quoted\"", True, False, None,
        [1, [2, [3]]], (1, (2.5, "x")), {"a": 1, "$": 2, 3: "int key", (1, 2): "tuple key"}, {},
        {"loaded", "keys", 3},                                # a LoRA adapter's loaded keys
    ]
    for value in values:
        (back,) = node("Echo").run(value=value)
        expect(same(back, value), f"{str(value)[:60]!r} came back as {str(back)[:60]!r}")


def arenas_mapped_here():
    """The names of the arenas this process maps, as /proc/self/maps says, each with the
    largest extent of it mapped and whether any mapping of it could write it (shared and
    writable: a private mapping writes only this process's copies)."""
    mapped = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "comfy-sv-arena-" not in line:
                continue
            fields = line.split(maxsplit=5)
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            extent, writes = mapped.get(fields[5].strip(), (0, False))
            mapped[fields[5].strip()] = (max(extent, end - start), writes or fields[1][1] + fields[1][3] == "ws")
    return mapped


def check_copies():
    image = torch.rand(1, 256, 256, 3)
    generation = link().session.generation
    (where,) = node("MappingOf").run(value=image)
    expect(where.startswith("/memfd:comfy-sv-arena-host-") and f"-to-bridge-{generation} " in where,
           f"the worker read its input in {where!r}, not in the arena the host writes for it")
    (inverted,) = node("InvertImage").run(image=image)
    expect(same(inverted, 1.0 - image), "InvertImage's output")
    # A tensor of at most a page crosses in its frame (bridge/values.py's INLINE_BYTES),
    # one a byte larger in the arena.
    (where,) = node("MappingOf").run(value=torch.rand(1024))
    expect("comfy-sv-arena-" not in where, f"a 4096-byte tensor was read in {where!r}, not from its frame")
    (where,) = node("MappingOf").run(value=torch.zeros(4097, dtype=torch.uint8))
    expect("comfy-sv-arena-host-" in where, f"a tensor over 4096 bytes was read in {where!r}, not in the arena")
    small = torch.rand(2, 3, 5, 7).movedim(1, -1)
    (back,) = node("Echo").run(value=small)
    expect(same(back, small) and back.stride() == small.stride(), "a small channels-last tensor crossed changed")
    channel = link().session.channel
    expect(channel.watch is not None and channel.peer_frames[0] > 0,
           "the host does not watch the worker's frames word before it sleeps, or the worker counts no frames")
    mapped = arenas_mapped_here()
    workers = {name: how for name, how in mapped.items() if "-to-" not in name}
    expect(mapped and all(how == (mmap.PAGESIZE, False) for how in workers.values()),
           f"the host maps more of a worker's arena than its control page, or could write it: {workers}")


def check_sent_back():
    image = torch.rand(1, 128, 128, 3)
    (back,) = node("Echo").run(value=image)
    expect(same(back, image) and back.data_ptr() == image.data_ptr(),
           "the host's image returned unchanged is not the host's own tensor")
    rows = torch.rand(4, 1024)  # over a page: a smaller tensor crosses in its frame, a copy each way
    (part,) = node("DropFirst").run(value=rows)
    expect(same(part, rows[1:]) and part.data_ptr() == rows[1:].data_ptr(),
           "a part of the host's tensor returned unchanged is not over the host's own tensor")
    forgotten = torch.arange(1000, dtype=torch.int32)
    node("Remember").run(value=forgotten.clone())  # the host's tensor goes before the worker returns it
    gc.collect()
    (recalled,) = node("Recall").run()
    expect(same(recalled, forgotten), "a tensor the worker kept and returned later came back changed")
    (inverted,) = node("InvertImage").run(image=image)
    (again,) = node("Echo").run(value=inverted)
    expect(same(again, inverted) and again.data_ptr() == inverted.data_ptr(),
           "the pack's output passed back to it and returned is not the host's tensor")
    (sliced,) = node("Echo").run(value=inverted[0, 10:20])
    expect(same(sliced, inverted[0, 10:20]), "a part of the pack's output passed back to it and returned changed")
    source = torch.zeros(4, 1024)
    (added,) = node("AddOneInPlace").run(value=source)
    expect(same(added, torch.ones(4, 1024)) and same(source, torch.zeros(4, 1024)),
           "a tensor the node wrote into did not come back as it wrote it, or its source changed")
    kept = inverted.clone()
    (added_again,) = node("AddOneInPlace").run(value=inverted)
    expect(same(added_again, kept + 1) and same(inverted, kept),
           "a node's write into its own earlier output changed the host's copy, or did not come back")
    del back, part, recalled, inverted, again, sliced, added, added_again
    # The host keeps the blocks of its tensors that live on, unwritten, to send them again.
    del image, rows, source, kept
    used = settled_arenas()
    expect(used == (0, 0), f"arenas in use after the tensors went: host {used[0]}, worker {used[1]}")


def check_handles():
    (model,) = node("LoadTinyModel").run(seed=1)
    expect(isinstance(model, proxy_nodes.PackObject) and model.type_name == "Linear", f"a handle, not {model!r}")
    (out,) = node("ApplyTinyModel").run(model=model, samples={"samples": torch.ones(1, 4)})
    torch.manual_seed(1)
    expected = torch.nn.Linear(4, 2)(torch.ones(1, 4)).detach()
    expect(torch.equal(out["samples"], expected),
           f"the handle did not resolve to the pack's own model: {out['samples'].tolist()}, not {expected.tolist()}")
    error = raises(lambda: node("ApplyTinyModel", "other").run(model=model, samples={"samples": torch.ones(1, 4)}),
                   TypeError)
    expect(str(error) == "a Linear made by pack bridge cannot go to pack other: connect it only to nodes of "
                         "pack bridge, or run the two as one group (list both packs' folders in one entry's \"pack\")",
           f"another pack: {error}")
    error = raises(lambda: model.weight, AttributeError)
    expect(str(error) == "a Linear made by pack bridge stays in that pack's worker: connect it only to nodes of "
                         "pack bridge", f"a host node: {error}")
    expect(isinstance(raises(lambda: node("Echo").run(value=threading.Lock()), TypeError), TypeError),
           "a host object crossed")
    handles = link().stats()["handles"]
    model = error = None  # the error's traceback holds the model too
    gc.collect()
    deadline = time.monotonic() + 5
    while link().stats()["handles"] != handles - 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    expect(link().stats()["handles"] == handles - 1, "the worker kept a handle the host let go")


def check_progress():
    seen = []
    comfy.utils.set_progress_bar_global_hook(lambda value, total, preview, node_id=None: seen.append((value, total)))
    (steps,) = node("SlowProgress").run(seconds=0.3)
    comfy.utils.set_progress_bar_global_hook(None)
    expect(seen and seen[-1] == (steps, steps), f"the last update was {seen[-1:]} of {steps} steps")
    expect(all(a[0] <= b[0] for a, b in zip(seen, seen[1:])), "progress went backwards")
    expect(len(seen) >= steps // 2, f"{len(seen)} updates for {steps} steps")


def check_interrupt():
    asked = []

    def cancel():
        asked.append(time.monotonic())
        mm.interrupt_current_processing(True)

    threading.Timer(0.5, cancel).start()
    started = time.monotonic()
    raises(lambda: node("SlowProgress").run(seconds=10), mm.InterruptProcessingException)
    latency_ms = (time.monotonic() - asked[0]) * 1000
    # Ended by the interrupt, not by running out its 10 s: a bound far from both, so that a
    # loaded machine does not fail it (the latency itself is a figure, logged below).
    expect(latency_ms < 2000, f"the node ended {latency_ms:.0f} ms after the interrupt, not at it")
    expect(not mm.processing_interrupted(), "the interrupt flag stayed set")
    say(f"interrupt: ended {latency_ms:.1f} ms after the interrupt, {time.monotonic() - started:.2f} s into the node")
    expect(node("PlainValues").run(count=1, scale=1.0, text="", flag=True)[0] == 2, "the next call")


def check_error():
    error = raises(lambda: node("Raise").run(message="a node's own error"), proxy_nodes.PackNodeError)
    text = str(error)
    expect(text.splitlines()[0] == "ValueError: a node's own error (in pack bridge's worker, node Raise)",
           f"first line {text.splitlines()[0]!r}")
    expect("bridge_pack/__init__.py" in text and "raise ValueError(message)" in text, "no worker traceback")


def check_oom():
    error = raises(lambda: node("RaiseOutOfMemory").run(), mm.OOM_EXCEPTION)
    expect("CUDA out of memory" in str(error), f"OOM message {error}")


def check_arena_idle():
    outputs = [node("InvertImage").run(image=torch.rand(1, 128, 128, 3)) for _ in range(3)]
    outputs.append(node("CloneImage").run(image=torch.rand(4, 4, 16, 16)))
    # The host holds copies: every block is let go once read, while the outputs live on.
    used = settled_arenas()
    expect(used == (0, 0), f"arenas in use while the host holds the outputs: host {used[0]}, worker {used[1]}")
    expect(all(output[0].shape[0] in (1, 4) for output in outputs), "the outputs")


def resident_kib(name_part):
    """The resident KiB of this process's mappings whose name holds `name_part` (/proc/self/smaps)."""
    total, counting = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):  # a mapping's first line: its range
                counting = name_part in line
            elif counting and head == "Rss:":
                total += int(line.split()[1])
    return total


def check_final_death():
    error = raises(lambda: node("ExitMidNode").run(), proxy_nodes.PackWorkerDied)
    expect(str(error).startswith("pack bridge's worker died during node ExitMidNode (killed by SIGKILL), and is "
                                 "failed (") and str(error).endswith("): fix it, then comfyctl retry bridge") and
           "restarts it" not in str(error), f"the death of a pack that is not restarted: {error}")


def check_death():
    session = link().session
    node("Remember").run(value=torch.rand(64, 64))  # a block of the host's the worker holds when it dies
    arena = f"-to-bridge-{session.generation} "
    expect(resident_kib(arena) > 0, "the host's arena for the worker holds nothing before it dies")
    error = raises(lambda: node("ExitMidNode").run(), proxy_nodes.PackWorkerDied)
    expect(str(error) == "pack bridge's worker died during node ExitMidNode (killed by SIGKILL); "
                         "the supervisor restarts it: queue the prompt again", f"death: {error}")
    expect(session.own.used == 0, f"{session.own.used} host arena bytes still lent to the dead worker")
    expect(resident_kib(arena) == 0, f"the host's arena for the dead worker still holds {resident_kib(arena)} KiB")
    expect(node("PlainValues").run(count=1, scale=1.0, text="ok", flag=False) == (2, 2.0, "ko", True),
           "the call after the restart")
    expect(link().session.generation > session.generation, "no new life")


def check_kept_output():
    image = torch.rand(1, 64, 64, 3)
    (kept,) = node("InvertImage").run(image=image)
    raises(lambda: node("ExitMidNode").run(), proxy_nodes.PackWorkerDied)
    node("PlainValues").run(count=1, scale=1.0, text="", flag=False)  # the new life runs
    expect(same(kept, 1.0 - image), "an output held across the worker's death changed")


def check_parallel():
    results = {}

    def run(pack, key, seconds):
        started = time.monotonic()
        node("SlowProgress", pack).run(seconds=seconds)
        results[key] = (started, time.monotonic())

    threads = [threading.Thread(target=run, args=args) for args in
               (("bridge", "a", 1.0), ("other", "b", 3.0), ("bridge", "c", 1.0))]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    # b (3 s) runs beside a and c (1 s each, one after the other in their one pack): about
    # 3 s; one call at a time would take 5, and the 1.5 s between holds on a loaded machine.
    expect(2.9 < elapsed < 4.5, f"a 3 s call in one pack beside two 1 s calls in another took {elapsed:.2f} s")
    first, second = sorted((results["a"], results["c"]))
    expect(second[0] >= first[1] - 0.05 or second[1] - second[0] >= 1.9, "one pack ran two calls at once")


def check_malformed():
    from comfy_supervisor.bridge import arena, cuda_ipc, values
    session = link().session
    capacity, page = session.peer.capacity, arena.PAGE
    good = {"$": "tensor", "dtype": "float32", "shape": [4], "offset": page, "nbytes": 16}
    ipc = {"handle": "00" * 64, "device": "f" * 32, "at": 0, "lend": 7}
    good_cuda = {"$": "tensor", "dtype": "float32", "shape": [4], "nbytes": 16, "device": "cuda", "cuda_ipc": ipc}
    deep = []
    for _ in range(100):
        deep = [deep]
    cases = {
        "a size that is not the shape's": dict(good, nbytes=15),
        "a block in the control page": dict(good, offset=0),
        "a block past the arena's end": dict(good, offset=capacity - 8),
        "an unknown dtype": dict(good, dtype="object"),
        "a negative size": dict(good, shape=[-4]),
        "an unknown tag": {"$": "pickle", "data": "gASV"},
        "nesting past the limit": deep,
        "a dict item that is not a pair": {"$": "dict", "items": [[1, 2, 3]]},
        "a good block beside a bad tag": [good, {"$": "eval"}],
        "a CUDA lend that is not a number": dict(good_cuda, cuda_ipc=dict(ipc, lend="7")),
        "a CUDA handle of the wrong size": dict(good_cuda, cuda_ipc=dict(ipc, handle="00")),
        "a CUDA tensor on a device not used here": good_cuda,
        "a CUDA lend beside a bad tag": [good_cuda, {"$": "eval"}],
        "a CUDA tensor sent back that was never lent": dict(good, offset=None, yours_cuda=3, at=0),
    }
    for what, value in cases.items():
        released, cuda_released = [], []
        exchange = cuda_ipc.CudaExchange(send=lambda message: None, release=cuda_released.append,
                                         await_answer=lambda: None, copy_received=True)
        decoder = values.Decoder(session.peer, released.append, lambda handle: None, cuda=exchange)
        error = raises(lambda: decoder.decode(value), values.ValueCrossingError)
        expect("\n" not in str(error), f"{what}: a message of more than one line")
        if what == "a good block beside a bad tag":
            expect(released == [page], f"{what}: released {released}, not the good block")
        if what in ("a CUDA tensor on a device not used here", "a CUDA lend beside a bad tag"):
            expect(cuda_released == [7], f"{what}: released CUDA lends {cuda_released}, not the one sent")
    # A decoder without CUDA IPC refuses a lend.
    raises(lambda: values.Decoder(session.peer, released.append, lambda handle: None).decode(good_cuda),
           values.ValueCrossingError)


def check_browser():
    """A pack's message to the browser reaches this ComfyUI's PromptServer, addressed to
    the client and node the prompt runs for; one that is not JSON stays in the worker."""
    import server
    prompt_server = server.PromptServer.instance
    prompt_server.client_id, prompt_server.last_node_id = "browser-1", "7"
    prompt_server.sent.clear()
    (text,) = node("NotifyBrowser").run(text="hello")
    expect(text == "hello", f"NotifyBrowser returned {text!r}")
    expect(prompt_server.sent == [("bridge.notify", {"text": "hello", "node": "7"}, "browser-1")],
           f"the browser was sent {prompt_server.sent}")


def check_front_end():
    """ComfyUI serves the pack's WEB_DIRECTORY from the folder the config names; a
    WEB_DIRECTORY that leaves that folder is not served."""
    import nodes
    served = nodes.EXTENSION_WEB_DIRS.get("bridge_pack")
    expect(served is not None and os.path.isfile(os.path.join(served, "bridge.js")),
           f"the bridge pack's front end is served from {served}")
    stray = proxy_nodes.PackLink("stray", host.bridges)
    stray.folders = link().folders
    for outside in ("..", "../../..", "/etc", "__init__.py"):
        stray.web_directories = [outside]
        expect(stray.web_files() == {}, f"a WEB_DIRECTORY of {outside!r} would be served")


def check_cuda_handshake():
    """Each side probed the other's CUDA device as the session opened; where torch has no
    CUDA (this machine), the probes are empty and every CUDA tensor would be staged."""
    session = link().session
    node("PlainValues").run(count=1, scale=1.0, text="", flag=False)
    session.await_cuda_answer()
    expect(session.cuda.answered.is_set(), "the worker never answered the host's CUDA probe")
    expect(session.cuda.accepted <= set(session.cuda.devices), f"accepted {session.cuda.accepted}")
    if not torch.cuda.is_available():
        expect(not session.cuda.devices and not session.cuda.accepted, "CUDA IPC without CUDA")
    say(f"CUDA devices probed here: {sorted(session.cuda.devices) or 'none'}; the worker accepts: "
        f"{sorted(session.cuda.accepted) or 'none'}")


def upstream_progress_hook(value, total, preview, node_id=None):
    """As upstream's main.py hooks ProgressBar (hijack_progress): it raises at Cancel,
    before it sends the update to the browser."""
    mm.throw_exception_if_processing_interrupted()


def cancel_after(seconds):
    """ComfyUI's Cancel (POST /interrupt), `seconds` from now."""
    threading.Timer(seconds, mm.interrupt_current_processing, args=(True,)).start()


def check_cancel():
    generation = link("hostile").session.generation
    cancel_after(0.3)
    raises(lambda: node("LoopForever", "hostile").run(), mm.InterruptProcessingException)
    expect(not mm.processing_interrupted(), "the interrupt flag stayed set")
    expect(node("Add", "hostile").run(a=2, b=3) == (5,), "the call after the restart")
    expect(link("hostile").session.generation > generation, "no new life")


def check_cancel_progress():
    generation = link("hostile").session.generation
    comfy.utils.set_progress_bar_global_hook(upstream_progress_hook)
    try:
        cancel_after(0.3)
        raises(lambda: node("ProgressOnly", "hostile").run(seconds=30), mm.InterruptProcessingException)
    finally:
        comfy.utils.set_progress_bar_global_hook(None)
    expect(not mm.processing_interrupted(), "the interrupt flag stayed set")
    expect(node("Add", "hostile").run(a=1, b=1) == (2,), "the next call")
    expect(link("hostile").session.generation == generation, "the worker was restarted")


def check_protocol(kind):
    generation = link("hostile").session.generation
    error = raises(lambda: node("BreakProtocol", "hostile").run(kind=kind), proxy_nodes.PackWorkerDied)
    text = str(error)
    expect("\n" not in text and text.startswith("pack hostile's worker broke the call protocol during node "
                                                "BreakProtocol (") and
           text.endswith("; the supervisor restarts it: queue the prompt again"), f"the node failed with {text!r}")
    expect(node("Add", "hostile").run(a=2, b=2) == (4,), "the call after the restart")
    expect(link("hostile").session.generation > generation, "no new life")


def check_browser_flood(per_second):
    """`per_second`: the messages a second the supervisor's config allows (the test's)."""
    import server
    prompt_server = server.PromptServer.instance
    prompt_server.sent.clear()
    generation = link("hostile").session.generation
    big_bytes = 256 << 10  # over the test's 64 KiB a message
    started = time.monotonic()
    (sent,) = node("FloodBrowser", "hostile").run(count=5000, big=3, big_bytes=big_bytes)
    elapsed = time.monotonic() - started
    passed = [event for event, _, _ in prompt_server.sent if event.startswith("hostile.flood")]
    # A second's worth at once, then the rate: the flood's own time bounds what may pass.
    bound = int(per_second) * (1 + elapsed)
    expect(0 < len(passed) <= bound, f"{len(passed)} of {sent} messages reached the browser in {elapsed:.1f} s, "
                                     f"not 1 to {bound:.0f}")
    expect("hostile.flood.big" not in passed, f"{passed.count('hostile.flood.big')} messages of {big_bytes} bytes passed")
    gate = link("hostile").browser
    expect(gate.limits.per_second == int(per_second) and gate.limits.max_bytes < big_bytes,
           f"the host's limits are not the config's: {vars(gate.limits)}")
    expect(gate.refused == {"size": 3, "rate": 5000 - len(passed), "malformed": 0},
           f"refusals counted {gate.refused}, for {5000 - len(passed)} small and 3 large messages kept back")
    expect(node("Add", "hostile").run(a=1, b=2) == (3,), "the call after the flood")
    expect(link("hostile").session.generation == generation, "the flood cost the pack its life")
    say(f"browser-flood: {len(passed)} of {sent} messages passed in {elapsed:.1f} s, refused {gate.refused}")


def check_bad_bool():
    generation = link("hostile").session.generation
    error = raises(lambda: node("BadBool", "hostile").run(), proxy_nodes.PackNodeError)
    expect(str(error) == "pack hostile's node BadBool returned a bool tensor with 2 bytes other than 0 and 1 "
                         "(the first is 2)", f"the node failed with {str(error)!r}")
    expect(node("Add", "hostile").run(a=2, b=2) == (4,), "the next call")
    expect(link("hostile").session.generation == generation, "the bad bool cost the pack its life")


def check_repeat_block():
    generation = link("hostile").session.generation
    error = raises(lambda: node("RepeatBlock", "hostile").run(nbytes=16 << 20, times=16), proxy_nodes.PackNodeError)
    expect(str(error).startswith("pack hostile's node RepeatBlock returned tensors whose blocks overlap (16777216 "
                                 "bytes at ") and "\n" not in str(error), f"the node failed with {str(error)!r}")
    expect(node("Add", "hostile").run(a=3, b=2) == (5,), "the next call")
    expect(link("hostile").session.generation == generation, "the repeated block cost the pack its life")


def check_host_protocol():
    session = link("hostile").session
    os.write(session.channel.fd, struct.pack("<I", (64 << 20) + 1))  # a frame over 64 MiB, announced
    deadline = time.monotonic() + 30
    while link("hostile").session is session and time.monotonic() < deadline:
        host.bridges.drain_idle()
        time.sleep(0.05)
    expect(node("Add", "hostile").run(a=1, b=2) == (3,), "the call after the restart")
    expect(link("hostile").session.generation > session.generation, "no new life")


def check_bad_interface():
    expect(set(classes.get("bad", {})) == {"Fine"}, f"pack bad's nodes registered: {sorted(classes.get('bad', {}))}")
    expect(node("Fine", "bad").run(value=4) == (8,), "its good node")
    expect({"InvertImage", "Echo", "PlainValues"} <= set(classes["bridge"]), "pack bridge's nodes")


def check_one_bad_class():
    expect(set(classes.get("bad", {})) == {"Doubles"}, f"pack bad's nodes registered: {sorted(classes.get('bad', {}))}")
    expect(node("Doubles", "bad").run(value=21) == (42,), "its good node")
    expect({"InvertImage", "Echo", "PlainValues"} <= set(classes["bridge"]), "pack bridge's nodes")


def check_snoop(where=""):
    secret = torch.randint(0, 256, (1 << 16,), dtype=torch.uint8)
    needle = bytes(secret[30000:30064].numpy())
    (back,) = node("Echo").run(value=secret)
    expect(same(back, secret), "pack bridge's Echo")
    (seen,) = node("HostileSnoop", "evil").run(needle=needle.hex(), everywhere=where == "everywhere")
    expect(seen["looked_at"] > 0, "pack evil could look at nothing")
    expect(seen["found"] == [], f"pack evil read what the host sent pack bridge, through {seen['found']}")
    say(f"snoop: pack evil looked in {seen['looked_at']} files and found nothing")


def check_frozen():
    source = torch.rand(1, 64, 64, 3)
    sent = source.clone()
    ones = torch.ones(1, 64, 64, 3)
    handed, back = node("HostileHandover", "evil").run(size=64, value=source)
    expect(same(handed, ones) and same(back, sent), "pack evil's outputs, before its attack")
    (reached,) = node("HostileRewrite", "evil").run()
    expect(reached["arenas"] > 0, f"pack evil's attack reached no arena: {reached}")
    expect(same(handed, ones), f"a tensor pack evil made changed after the call: it reads {handed.flatten()[0].item()!r}")
    expect(same(back, sent), f"a tensor pack evil handed back changed after the call: it reads {back.flatten()[0].item()!r}")
    say(f"frozen: pack evil wrote over {reached}; what it handed over is unchanged")


CHECKS = {"interfaces": check_interfaces, "wildcards": check_wildcards, "values": check_values, "copies": check_copies,
          "sent-back": check_sent_back,
          "handles": check_handles, "progress": check_progress, "interrupt": check_interrupt, "error": check_error,
          "oom": check_oom, "arena-idle": check_arena_idle, "death": check_death, "final-death": check_final_death,
          "kept-output": check_kept_output,
          "parallel": check_parallel, "malformed": check_malformed, "cuda-handshake": check_cuda_handshake,
          "browser": check_browser, "front-end": check_front_end, "cancel": check_cancel,
          "cancel-progress": check_cancel_progress, "host-protocol": check_host_protocol,
          "bad-bool": check_bad_bool, "repeat-block": check_repeat_block,
          "bad-interface": check_bad_interface, "one-bad-class": check_one_bad_class,
          "frozen": check_frozen}


def check_failed(pack):
    expect(host.bridges.links[pack].failure is not None, f"pack {pack} is not failed")
    expect(not any(getattr(cls, "PACK", None) == pack for cls in classes["all"].values()), "its nodes are registered")


def check_late(pack):
    """The pack failed to import; the test fixes it and retries it (comfyctl retry): its node
    registers in upstream's mappings, without a restart of this host, and runs."""
    nodes = sys.modules["nodes"]
    expect(host.bridges.links[pack].failure is not None and "LateNode" not in nodes.NODE_CLASS_MAPPINGS,
           f"pack {pack} is not failed, or its node is registered")
    # The test fixes and retries the pack only once this line is in the log: a retry before
    # this host saw the failure would leave nothing failed to see.
    say(f"late: pack {pack} is failed here, its node not registered; waiting for its retry")
    deadline = time.monotonic() + 90
    while "LateNode" not in nodes.NODE_CLASS_MAPPINGS and time.monotonic() < deadline:
        time.sleep(0.1)
    late = nodes.NODE_CLASS_MAPPINGS.get("LateNode")
    expect(late is not None, f"the retried pack {pack}'s node is not registered")
    expect(late().run(value=4) == (12,) and late.RELATIVE_PYTHON_MODULE == "custom_nodes.late_pack" and
           nodes.NODE_DISPLAY_NAME_MAPPINGS.get("LateNode") == "LateNode",
           f"the retried pack's node as registered: {late.RELATIVE_PYTHON_MODULE}")
    import route_checks
    ask = route_checks.asker(route_checks.serve())
    for path in ("/late_pack/hello/you", "/api/late_pack/hello/you"):
        status, _, _, body = ask("GET", path)
        expect(status == 200 and json.loads(body) == {"hello": "you"}, f"the retried pack's route {path}: {status}")
    status, _, _, _ = ask("GET", "/late_pack/nothing")
    expect(status == 404, f"a path no one serves, after the retried pack's routes: {status}")


def check_clashlib(argument):
    """PACK=VERSION: PACK's one node returns the clashlib its own environment imported
    (tests/python/pack_environments_test.cpp)."""
    pack, _, version = argument.partition("=")
    expect(len(classes.get(pack, {})) == 1, f"pack {pack}'s nodes: {sorted(classes.get(pack, {}))}")
    (proxy,) = classes[pack].values()
    got = proxy().run()
    expect(got == (version,), f"pack {pack}'s node returned {got}, not clashlib {version}")


ARGUED = {"failed": check_failed, "protocol": check_protocol, "snoop": check_snoop,  # NAME:ARGUMENT
          "browser-flood": check_browser_flood, "late": check_late, "clashlib": check_clashlib}


def main():
    global host
    importlib.import_module("nodes")  # ComfyUI has its nodes module before it loads custom nodes
    import server
    server.PromptServer()  # ComfyUI's main makes it before it loads custom nodes
    host = comfyui.install()
    mm.participant = host.link  # as the fake's main.py: the host's loads are charged to the device
    import callback_checks
    import conversation_checks
    import group_checks
    import mirror_checks
    import remote_checks
    import route_checks
    CHECKS.update(remote_checks.CHECKS)
    CHECKS.update(mirror_checks.CHECKS)
    CHECKS.update(route_checks.checks(node, raises))
    CHECKS.update(group_checks.CHECKS)
    CHECKS.update(callback_checks.CHECKS)
    ARGUED.update(callback_checks.ARGUED)
    CHECKS.update(conversation_checks.CHECKS)
    ARGUED.update(conversation_checks.ARGUED)
    mapping, names = host.bridges.proxy_nodes()
    classes["all"], classes["names"] = mapping, names
    for pack in ("bridge", "other"):
        classes[pack] = {}
    for name, cls in mapping.items():
        classes.setdefault(cls.PACK, {})[name] = cls
    # Packs of the same folder have the same node names: ComfyUI keeps one; the checks keep
    # each pack's (but an interface the host left out, as it did).
    for pack, pack_link in host.bridges.links.items():
        for name, interface in (pack_link.interfaces or {}).items():
            if name not in classes.setdefault(pack, {}):
                try:
                    classes[pack][name] = node_interfaces.proxy_class(pack_link, name, interface)
                except node_interfaces.InterfaceError:
                    pass
    for check in sys.argv[1:]:
        name, _, argument = check.partition(":")
        try:
            ARGUED[name](argument) if name in ARGUED else CHECKS[name]()
            say(f"{check} passed")
        except Exception as error:  # noqa: BLE001 (any failure is the check's)
            say(f"{check} failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
    say("checks done")
    threading.Event().wait()


if __name__ == "__main__":
    main()
