"""scripts/bench bridge [--json]: runs the supervisor with the bridge test pack in a worker
and the benchmark's host (bridge_host.py) in ComfyUI's slot, then reports the figures
with the ratios the targets are stated in (docs/BENCHMARKS.md)."""

import json
import os
import subprocess
import sys
import tempfile

import start_bench

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TIMEOUT_S = 300
SIZES = ("1kib", "1mib", "16mib", "256mib")  # bridge_host.py's
PACKS = 16  # packs_bench.py's
# COMFY_BRIDGE_CODEC=python measures the bridge with values.py's Python codec (bridge/codec.py).
CODEC_ENV = {"COMFY_BRIDGE_CODEC": os.environ["COMFY_BRIDGE_CODEC"]} if os.environ.get("COMFY_BRIDGE_CODEC") else {}


def run(supervisor, python, host_args=(), cpu=None, bridge_packs=1):
    """The figures of one supervisor run; `cpu`: the one CPU the supervisor and every
    process of it run on; `bridge_packs`: how many packs of bridge_pack it runs, each a
    pack of its own (the first is "bridge", the others "bridge-2" on)."""
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as folder:
        results = os.path.join(folder, "results.json")
        config = {
            "device": {"kind": "simulated", "total_bytes": "24GiB"},
            "limits": {"heartbeat_timeout_ms": 20000},
            "comfyui": {"command": python,
                        "args": [os.path.join(ROOT, "tests/bench/bridge/bridge_host.py"), results, *host_args],
                        "env": {"PYTHONPATH": os.path.join(ROOT, "worker/python"),
                                "FAKE_COMFYUI": os.path.join(ROOT, "tests/host/fake_comfyui"),
                                "PYTHONDONTWRITEBYTECODE": "1", **CODEC_ENV}},
            "packs": [*({"name": "bridge" if number == 1 else f"bridge-{number}",
                         "python": {"pack": os.path.join(ROOT, "tests/packs/bridge_pack"), "interpreter": python,
                                    "comfyui": os.path.join(ROOT, "tests/host/fake_comfyui")},
                         "env": {"PYTHONDONTWRITEBYTECODE": "1", **CODEC_ENV}} for number in range(1, bridge_packs + 1)),
                      {"name": "model",
                       "python": {"pack": os.path.join(ROOT, "tests/packs/model_pack"), "interpreter": python,
                                  "comfyui": os.path.join(ROOT, "tests/host/fake_comfyui")},
                       "env": {"PYTHONDONTWRITEBYTECODE": "1", **CODEC_ENV}}],
        }
        path = os.path.join(folder, "config.json")
        with open(path, "w") as out:
            json.dump(config, out)
        pin = None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))
        run = subprocess.run([supervisor, "run", "--config", path, "--instance", f"bench-bridge-{os.getpid()}"],
                             capture_output=True, text=True, timeout=TIMEOUT_S, preexec_fn=pin)
        if not os.path.exists(results):
            sys.stderr.write(run.stderr[-4000:])
            raise SystemExit(f"bench: the bridge benchmark's host wrote no results (supervisor exit {run.returncode}, "
                             "its log above)")
        with open(results) as source:
            return json.load(source)


def main():
    supervisor, python, as_json = sys.argv[1], sys.argv[2], "--json" in sys.argv[3:]
    figures = run(supervisor, python)
    shared = run(supervisor, python, ["--calls-only"], cpu=min(os.sched_getaffinity(0)))
    figures.update(run(supervisor, python, ["--throughput"], bridge_packs=PACKS))
    figures.update(start_bench.figures(supervisor, python))
    figures["node_call_rtt_shared_cpu_us"] = shared["node_call_rtt_us"]
    figures["socket_floor_shared_cpu_us"] = shared["python_socket_rtt_us"]
    figures["shared_cpu_call_vs_floor"] = shared["node_call_rtt_us"]["p50"] / shared["python_socket_rtt_us"]["p50"]
    figures["pickle5_vs_tensor"] = {size: figures[f"shm_pickle5_rtt_ms_{size}"] / figures[f"tensor_rtt_ms_{size}"]
                                    for size in SIZES}
    figures["pickle5_byref_vs_tensor"] = {
        size: figures[f"shm_pickle5_byref_rtt_ms_{size}"] / figures[f"tensor_rtt_ms_{size}"] for size in SIZES}
    figures["tensor_vs_memcpy"] = figures["tensor_rtt_ms_16mib"] / figures["memcpy_16mib_ms"]
    figures["call_vs_python_floor"] = figures["node_call_rtt_us"]["p50"] / figures["python_socket_rtt_us"]["p50"]
    figures["new_output_vs_memcpy"] = figures["tensor_16mib_new_output_rtt_ms"] / figures["memcpy_16mib_ms"]
    figures["pickle_vs_tensor"] = figures["pickle_uds_16mib_ms"] / figures["tensor_rtt_ms_16mib"]
    figures["copy_on_receipt_vs_memcpy"] = figures["copy_on_receipt_16mib_ms"] / figures["memcpy_16mib_ms"]
    figures["replica_vs_copy"] = figures["replica_map_ms_256mib"] / figures["copy_ms_256mib"]
    pickle5 = figures["pickle5_vs_tensor"]
    figures["targets_met"] = {"node_call_rtt_us_p50_under_100": figures["node_call_rtt_us"]["p50"] < 100,
                              "tensor_no_slower_than_pickle5": all(ratio >= 1 for ratio in pickle5.values()),
                              "tensor_2x_pickle5_at_1kib_1mib": pickle5["1kib"] >= 2 and pickle5["1mib"] >= 2,
                              "tensor_no_slower_than_pickle5_byref": all(
                                  ratio >= 1 for ratio in figures["pickle5_byref_vs_tensor"].values()),
                              "shared_cpu_call_within_2x_floor": figures["shared_cpu_call_vs_floor"] <= 2,
                              "pack_worker_pss_mb_at_most_150": figures["pack_worker_pss_mb"] <= 150,
                              "pack_worker_uss_mb_at_most_40": figures["pack_worker_uss_mb"] <= 40,
                              "pack_worker_start_ms_at_most_500": figures["pack_worker_start_ms"] <= 500,
                              "packs_16_at_least_packs_1": figures["packs_16_vs_1"] >= 1,
                              "tensor_within_3x_memcpy": figures["tensor_vs_memcpy"] <= 3,
                              "tensor_resend_at_most_0_2_ms": figures["tensor_resend_rtt_ms_16mib"] <= 0.2,
                              "tensor_10x_faster_than_pickle": figures["pickle_vs_tensor"] >= 10,
                              "remote_call_rtt_us_p50_under_100": figures["remote_call_rtt_us"]["p50"] < 100,
                              "callback_cpu_us_at_most_250": figures["callback_cpu_us"] <= 250,
                              "sample_step_overhead_us_under_200": all(
                                  overhead < 200 for overhead in figures["sample_step_overhead_us"].values()),
                              "patched_model_crossings_per_eval_at_most_1": all(
                                  crossings <= 1 for crossings in figures["patched_model_crossings_per_eval"].values()),
                              "replica_map_within_0_1_copy": figures["replica_vs_copy"] <= 0.1}
    if as_json:
        print(json.dumps(figures))
        return
    rtt = figures["node_call_rtt_us"]
    floor = figures["python_socket_rtt_us"]
    print(f"node call round trip (empty node, host proxy to worker and back): p50 {rtt['p50']:.1f} us, "
          f"p99 {rtt['p99']:.1f} us (target: p50 < 100 us)")
    print(f"  the floor, a frame between two Python processes and back: p50 {floor['p50']:.1f} us, "
          f"p99 {floor['p99']:.1f} us (the call costs {rtt['p50'] / floor['p50']:.2f} times it)")
    shared, floor = figures["node_call_rtt_shared_cpu_us"], figures["socket_floor_shared_cpu_us"]
    print(f"  on one CPU, host and worker: p50 {shared['p50']:.1f} us, p99 {shared['p99']:.1f} us; the floor there: "
          f"p50 {floor['p50']:.1f} us ({figures['shared_cpu_call_vs_floor']:.2f} times it, target <= 2)")
    print("a float32 tensor into Echo and back, against a careful Python transport (shared memory and pickle 5, "
          "pickle5_peer.py; target: never slower, >= 2x faster at 1 KiB and 1 MiB):")
    for size in SIZES:
        print(f"  {size:>6}: {figures[f'tensor_rtt_ms_{size}']:.3f} ms against "
              f"{figures[f'shm_pickle5_rtt_ms_{size}']:.3f} ms ({pickle5[size]:.2f} times faster); its copy-matched "
              f"echo (one copy a round trip, as ours) {figures[f'shm_pickle5_byref_rtt_ms_{size}']:.3f} ms "
              f"({figures['pickle5_byref_vs_tensor'][size]:.2f} times faster; target: >= 1)")
    print(f"16 MiB IMAGE in and out: {figures['tensor_rtt_ms_16mib']:.2f} ms (Echo: out as it came in)")
    print(f"  the same IMAGE again, unwritten since: {figures['tensor_resend_rtt_ms_16mib']:.3f} ms (its block named "
          f"again, no copy; target <= 0.2 ms; a 1 KiB tensor's round trip, in its frame: "
          f"{figures['tensor_rtt_ms_1kib']:.3f} ms)")
    print(f"  a copy of it in one process: {figures['memcpy_16mib_ms']:.2f} ms "
          f"(ratio {figures['tensor_vs_memcpy']:.2f}, target <= 3)")
    print(f"  pickled over a Unix socket and back: {figures['pickle_uds_16mib_ms']:.2f} ms "
          f"({figures['pickle_vs_tensor']:.1f} times slower, target >= 10)")
    print(f"16 MiB IMAGE in, a new one out: {figures['tensor_16mib_new_output_rtt_ms']:.2f} ms (CloneImage: the node's "
          f"own copy, the output's, and the host's; ratio to the copy {figures['new_output_vs_memcpy']:.2f})")
    print(f"  of which the host's copy of the output as it arrives: {figures['copy_on_receipt_16mib_ms']:.2f} ms "
          f"(ratio to the copy {figures['copy_on_receipt_vs_memcpy']:.2f})")
    print(f"a pack worker's own memory at start (two packs, one interpreter): PSS {figures['pack_worker_pss_mb']:.0f} "
          f"MB, RSS {figures['pack_worker_rss_mb']:.0f} MB (target: PSS <= 150 MB); with 17 packs: PSS "
          f"{figures['pack_worker_pss_mb_17_workers']:.0f} MB, of it private {figures['pack_worker_uss_mb']:.0f} MB "
          f"(target <= 40 MB), beside {figures['templates']} warm template(s) of {figures['template_uss_mb']:.0f} MB "
          "private in all")
    print(f"a pack worker's start, spawn to ready: {figures['pack_worker_start_ms']:.0f} ms forked from a warm template "
          f"(target <= 500 ms), {figures['pack_worker_cold_start_ms']:.0f} ms cold "
          f"({figures['cold_start_vs_warm']:.1f} times it)")
    print("empty node calls a second, each thread of the host calling a pack of its own at once: " +
          ", ".join(f"{count} packs {figures[f'packs_{count}_calls_per_s']:.0f}" for count in (1, 4, 16)) +
          f" (16 over 1: {figures['packs_16_vs_1']:.2f}, target >= 1)")
    remote = figures["remote_call_rtt_us"]
    print(f"remote call (an empty function of the pack's, called from the host): p50 {remote['p50']:.1f} us, "
          f"p99 {remote['p99']:.1f} us (target: p50 < 100 us)")
    print(f"a pack's MODEL sampled by the host's KSampler: {figures['pack_model_step_overhead_us']:.1f} us a step more "
          "than the same model in the host's process")
    print(f"a pack's patch used by the host, a pause of a GPU step between uses, in one host node: "
          f"{figures['callback_cpu_us']:.0f} us of CPU a use, host and worker, more than in one process (target "
          f"<= 250 us); an empty function: {figures['callback_floor_cpu_us']:.0f} us; the worker's busy stretches in "
          f"{figures['callback_uses']} uses: {figures['callback_busy_stretches']}")
    print("the host's MODEL with K attention patches of a pack's, sampled by the host's KSampler (in the pack):")
    for count, crossings in figures["patched_model_crossings_per_eval"].items():
        counted = figures["patched_model_crossings"][count]
        print(f"  K = {count:>2}: {crossings:.3f} requests between host and pack per model evaluation "
              f"({counted['host_to_pack']} + {counted['pack_to_host']} over {counted['evaluations']} evaluations; "
              f"target <= 1), {figures['sample_step_overhead_us'][count]:.1f} us a step more than in one process "
              f"(target < 200 us), where a step takes {figures['patched_model_step_us'][count]:.1f} us")
    if figures["codec_us"] is not None:
        print("the values' codec alone, both sides of a round trip, Python / C++ (codec_bench.py): " + ", ".join(
            f"{name} {codec['python']:.1f} / {codec['cxx']:.1f} us ({codec['python_vs_cxx']:.2f} times)"
            for name, codec in figures["codec_us"].items()))
    print(f"a host MODEL whose diffusion model is 256 MiB, made ready in a worker: its replica "
          f"{figures['replica_map_ms_256mib']:.2f} ms, its weights copied {figures['copy_ms_256mib']:.2f} ms "
          f"(ratio {figures['replica_vs_copy']:.3f}, target <= 0.1); the first replica, whose mirror copies the "
          f"host's weights into their memfd once: {figures['replica_publish_ms_256mib']:.1f} ms")


if __name__ == "__main__":
    main()
