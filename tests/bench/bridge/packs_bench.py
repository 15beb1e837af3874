"""The throughput figures of scripts/bench bridge (docs/BENCHMARKS.md, "Packs called at
once"), measured by bridge_host.py --throughput against PACKS workers of
tests/packs/bridge_pack, each a pack of its own (run_bridge_bench.py's third run):

- packs_N_calls_per_s, N in COUNTS: N threads of the host, each calling the empty node
  `Nothing` of a pack of its own for WINDOW_S, as N prompts' nodes of N packs at once
  would; every call's round trip counted, in calls a second, the median of RUNS windows;
- packs_16_vs_1: the ratio the issue sets its target on (at least 1 on this machine)."""

import statistics
import threading
import time

COUNTS = (1, 4, 16)
PACKS = max(COUNTS)
WINDOW_S = 2.0
RUNS = 3


def throughput(bridges):
    from comfy_supervisor.host.node_interfaces import proxy_class
    links = sorted((link for link in bridges.wait_for_packs() if "Nothing" in link.interfaces), key=lambda link: link.name)
    if len(links) < PACKS:
        raise SystemExit(f"bench: {len(links)} packs described their nodes, {PACKS} were started")
    nodes = [proxy_class(link, "Nothing", link.interfaces["Nothing"])() for link in links]
    for node in nodes:
        for _ in range(200):  # warm: each session's first calls, its CUDA probe
            node.run()
    figures = {}
    for count in COUNTS:
        rates = [calls_per_s(nodes[:count]) for _ in range(RUNS)]
        figures[f"packs_{count}_calls_per_s"] = statistics.median(rates)
    figures["packs_16_vs_1"] = figures["packs_16_calls_per_s"] / figures["packs_1_calls_per_s"]
    return figures


def calls_per_s(nodes):
    """Every node called in a loop by a thread of its own for WINDOW_S: calls a second, all together."""
    start, counts = threading.Barrier(len(nodes) + 1), [0] * len(nodes)
    deadline = []

    def caller(index, node):
        start.wait()
        while time.perf_counter() < deadline[0]:
            node.run()
            counts[index] += 1
    threads = [threading.Thread(target=caller, args=(index, node)) for index, node in enumerate(nodes)]
    for thread in threads:
        thread.start()
    deadline.append(time.perf_counter() + WINDOW_S)
    started = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)
