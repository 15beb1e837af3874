"""The ComfyUI host of scripts/bench bridge: over our model of upstream (fake_comfyui), it
calls tests/packs/bridge_pack's nodes in their worker through the host's proxy nodes, as
ComfyUI runs a graph's node, and measures in the same run what the figures are compared
with: a copy of the same payload in this process, the same payload pickled over a Unix
socket to another process and back, a careful Python transport over shared memory
(pickle5_peer.py) at four sizes, and the floor under any call between two Python
processes (one small frame there and back); and the pack workers' own memory at start.
With --calls-only, only the empty call and that floor (the run on one CPU); with
--throughput, only packs_bench.py's figures (the run with many packs). Writes one JSON
object to the file named by its first argument, then asks the supervisor to finish
(SIGTERM to its parent)."""

import json
import os
import pickle
import signal
import socket
import statistics
import struct
import sys
import time

sys.path.insert(0, os.environ["FAKE_COMFYUI"])

import torch  # noqa: E402
from comfy_supervisor.host import comfyui  # noqa: E402
from comfy_supervisor.bridge.channel import Channel  # noqa: E402

CALLS = 5000              # empty node calls, after WARMUP
WARMUP = 500
TENSOR_RUNS = 30          # 16 MiB round trips, each measured alone
SIXTEEN_MIB_IMAGE = (1, 1024, 1024, 4)  # float32: 16 MiB, an IMAGE's layout (batch, height, width, channels)
# The sizes the bridge is measured at against the careful Python transport, with the round
# trips of each (taken in rounds of ROUND, the two transports in turn).
SIZES = {"1kib": (1 << 10, 3000), "1mib": (1 << 20, 600), "16mib": (16 << 20, 60), "256mib": (256 << 20, 8)}
ROUND = 10


def percentile(samples, fraction):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def timed(call, runs, before=None):
    """The seconds of each of `runs` calls; `before()` runs ahead of each, untimed."""
    samples = []
    for _ in range(runs):
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def node_call_rtt_us(nothing):
    for _ in range(WARMUP):
        nothing.run()
    samples = [s * 1e6 for s in timed(nothing.run, CALLS)]
    return {"p50": percentile(samples, 0.5), "p99": percentile(samples, 0.99)}


def python_socket_rtt_us():
    """The floor under a node call between two Python processes on this machine, measured
    in the same run: a call-sized JSON frame to another process over a Unix socket and a
    reply back, with the bridge's own framing (channel.Channel) and nothing else."""
    ours, theirs = socket.socketpair()
    child = os.fork()
    if child == 0:
        ours.close()
        peer = Channel(theirs)
        while message := peer.receive():
            peer.send({"op": "result", "id": message["id"], "value": {"$": "tuple", "items": []}})
        os._exit(0)
    theirs.close()
    channel = Channel(ours)
    call = {"op": "call", "id": 1, "node": "Nothing", "kind": "function", "inputs": {}, "epoch": 1, "instance": 1}

    def round_trip():
        channel.send(call)
        channel.receive()

    timed(round_trip, WARMUP)
    samples = [s * 1e6 for s in timed(round_trip, CALLS)]
    ours.close()
    os.waitpid(child, 0)
    return {"p50": percentile(samples, 0.5), "p99": percentile(samples, 0.99)}


def against_pickle5(echo):
    """tensor_rtt_ms_SIZE (a float32 tensor of SIZE into Echo and back, as it came),
    shm_pickle5_rtt_ms_SIZE (the same to the careful Python transport's echo and back,
    pickle5_peer.py: two copies a round trip) and shm_pickle5_byref_rtt_ms_SIZE (its echo
    sending back where the tensor lies: one copy, as the bridge's echo), the median of each;
    the three are measured in turn, ROUND round trips at a time, so that all meet the same
    machine. The tensor is written in place (one element, untimed) before each of the
    bridge's round trips, as the transport copies it each time: else the bridge would name
    the block it wrote before (tensor_resend_rtt_ms_16mib measures that)."""
    import pickle5_peer
    figures = {}
    for name, (nbytes, runs) in SIZES.items():
        tensor = torch.rand(nbytes // 4)
        peer, finish = pickle5_peer.echo_peer(nbytes)
        by_reference, finish_by_reference = pickle5_peer.echo_peer(nbytes, by_reference=True)

        def bridge():
            (back,) = echo.run(value=tensor)
            del back

        def careful():
            peer.send(tensor)
            back = peer.receive()
            del back

        def copy_matched():
            by_reference.send(tensor)
            back = by_reference.receive(in_own=True)
            del back
        def written():
            tensor[:1].add_(0)  # counted as a write: the next crossing copies the tensor anew
        calls = (bridge, careful, copy_matched)
        for call in calls:
            timed(call, min(ROUND, runs), written if call is bridge else None)  # warm: pages faulted in, blocks reused
        samples = {call: [] for call in calls}
        for _ in range(max(1, runs // ROUND)):
            for call in calls:
                samples[call] += timed(call, min(ROUND, runs), written if call is bridge else None)
        # The later echo's process holds a copy of the earlier one's socket (a fork copies
        # every descriptor): it ends first, or the earlier echo would never hear its end.
        finish_by_reference()
        finish()
        figures[f"tensor_rtt_ms_{name}"] = statistics.median(samples[bridge]) * 1e3
        figures[f"shm_pickle5_rtt_ms_{name}"] = statistics.median(samples[careful]) * 1e3
        figures[f"shm_pickle5_byref_rtt_ms_{name}"] = statistics.median(samples[copy_matched]) * 1e3
    return figures


def pack_worker_memory_mb():
    """Each pack worker's own memory at start, idle, read from /proc: its PSS (the pages
    it shares with other processes, torch's libraries above all, counted once between
    them), its USS (its private pages: what one more worker adds) and its RSS. The
    workers are the supervisor's children that run pack_worker: by their command line, or,
    forked from a warm template (whose command line they keep), by their name ("pack
    NAME"). The templates' own are under "template_uss" and "template_pss"."""
    supervisor = os.getppid()
    children = []
    for task in os.listdir(f"/proc/{supervisor}/task"):
        with open(f"/proc/{supervisor}/task/{task}/children") as listed:
            children += [int(pid) for pid in listed.read().split()]
    figures = {"pss": [], "uss": [], "rss": [], "template_pss": [], "template_uss": []}
    for pid in children:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline, open(f"/proc/{pid}/comm") as comm:
            command, name = cmdline.read(), comm.read()
        template = b"comfy_supervisor.template" in command and not name.startswith("pack ")
        if not (template or b"comfy_supervisor.pack_worker" in command or name.startswith("pack ")):
            continue
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            fields = {line.split(":")[0]: int(line.split()[1]) for line in rollup if line.split()[-1] == "kB"}
        prefix = "template_" if template else ""
        figures[prefix + "pss"].append(fields["Pss"] / 1024)
        figures[prefix + "uss"].append((fields["Private_Clean"] + fields["Private_Dirty"]) / 1024)
        if not template:
            figures["rss"].append(fields["Rss"] / 1024)
    return figures


def tensor_rtt_ms(node, input_name, image):
    """The median round trip of `node`, given the 16 MiB IMAGE as its input `input_name`."""
    def round_trip():
        (back,) = node.run(**{input_name: image})
        del back  # released, as ComfyUI drops an output it no longer caches
    round_trip()
    return statistics.median(timed(round_trip, TENSOR_RUNS)) * 1e3


def copy_on_receipt_ms(session, nbytes):
    """What the host adds to each block a worker hands it: the copy out of the worker's
    arena into the host's own memory (bridge/arena.py, CopiedArena), of the block the
    worker wrote its last 16 MiB output into (the first, as blocks are taken first-fit)."""
    from comfy_supervisor.bridge.arena import CONTROL_BYTES

    def copy():
        session.peer.take(CONTROL_BYTES, nbytes, lambda offset: None)
    copy()
    return statistics.median(timed(copy, TENSOR_RUNS)) * 1e3


def memcpy_ms(image):
    target = torch.empty_like(image)
    target.copy_(image)
    return statistics.median(timed(lambda: target.copy_(image), TENSOR_RUNS)) * 1e3


def pickle_uds_ms(image):
    """The same payload pickled, over a Unix socket to another process, unpickled there,
    pickled back and unpickled here: what a pickle-based bridge does for a node's input and
    output."""
    ours, theirs = socket.socketpair()
    length = struct.Struct("<Q")

    def send(sock, value):
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        sock.sendall(length.pack(len(data)) + data)

    def receive(sock):
        header = sock.recv(length.size, socket.MSG_WAITALL)
        if len(header) < length.size:
            return None
        data = bytearray(length.unpack(header)[0])
        view, got = memoryview(data), 0
        while got < len(data):
            got += sock.recv_into(view[got:])
        return pickle.loads(data)

    child = os.fork()
    if child == 0:
        ours.close()
        while (value := receive(theirs)) is not None:
            send(theirs, value)
        os._exit(0)
    theirs.close()

    def round_trip():
        send(ours, image)
        receive(ours)

    round_trip()
    result = statistics.median(timed(round_trip, TENSOR_RUNS)) * 1e3
    ours.close()
    os.waitpid(child, 0)
    return result


def main():
    host = comfyui.install()
    import comfy.model_management
    import codec_bench
    import mirror_bench
    import remote_bench
    import replica_bench
    comfy.model_management.participant = host.link  # as the fake's main.py: loads are charged to the device
    classes, _ = host.bridges.proxy_nodes()
    if "--calls-only" in sys.argv[2:]:  # the run on one CPU (run_bridge_bench.py)
        finish({"node_call_rtt_us": node_call_rtt_us(classes["Nothing"]()),
                "python_socket_rtt_us": python_socket_rtt_us()})
    if "--throughput" in sys.argv[2:]:  # the run with packs_bench.PACKS packs
        import packs_bench
        memory = pack_worker_memory_mb()
        finish({**packs_bench.throughput(host.bridges), "pack_worker_pss_mb_17_workers": statistics.mean(memory["pss"]),
                "pack_worker_uss_mb": statistics.mean(memory["uss"]),
                "template_uss_mb": sum(memory["template_uss"]), "templates": len(memory["template_uss"])})
    image = torch.rand(SIXTEEN_MIB_IMAGE)
    memory = pack_worker_memory_mb()
    results = {
        "pack_worker_pss_mb": statistics.mean(memory["pss"]),
        "pack_worker_rss_mb": statistics.mean(memory["rss"]),
        "node_call_rtt_us": node_call_rtt_us(classes["Nothing"]()),
        "python_socket_rtt_us": python_socket_rtt_us(),
        # In, and back out as it came (Echo: no copy back, as for any tensor returned unchanged).
        **against_pickle5(classes["Echo"]()),
        # The same 16 MiB IMAGE into Echo and back each call, unwritten: its block named again.
        "tensor_resend_rtt_ms_16mib": tensor_rtt_ms(classes["Echo"](), "value", image),
        # In, and a new 16 MiB IMAGE out (CloneImage: the node's own copy, the output's, and
        # the host's copy of it as it arrives).
        "tensor_16mib_new_output_rtt_ms": tensor_rtt_ms(classes["CloneImage"](), "image", image),
        "copy_on_receipt_16mib_ms": copy_on_receipt_ms(host.bridges.links["bridge"].session, image.numel() * 4),
        "memcpy_16mib_ms": memcpy_ms(image),
        "pickle_uds_16mib_ms": pickle_uds_ms(image),
        "remote_call_rtt_us": remote_bench.remote_call_rtt_us(classes),
        "pack_model_step_overhead_us": remote_bench.pack_model_step_overhead_us(classes),
        **remote_bench.callback_cpu_us(classes, host.bridges.links["model"]),
        **replica_bench.patched_model_figures(classes, host.bridges.links["model"].session),
        **mirror_bench.replica_map_figures(classes, host.bridges.drain_idle),
        **codec_bench.figures(),
    }
    finish(results)


def finish(results):
    with open(sys.argv[1], "w") as out:
        json.dump(results, out)
    os.kill(os.getppid(), signal.SIGTERM)
    time.sleep(60)  # the supervisor's Shutdown ends us


if __name__ == "__main__":
    main()
