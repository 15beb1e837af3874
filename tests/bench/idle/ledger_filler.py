"""The idle benchmark's filler (run_idle_bench.py): a participant that, when the driver asks
(a file named `fill` in the control folder), registers N models of its own in the ledger,
reads the whole ledger once as a participant would (timed: what each look at the ledger
cost when every look read it), then looks at it again while it stands still (timed: what
a look costs now), says so (`filled`, a JSON object) and then sits idle, answering the
supervisor's commands, until it is stopped.

argv: CONTROL_FOLDER"""

import json
import os
import sys
import time

from comfy_supervisor import participant as sv


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.05)


def main():
    folder = sys.argv[1]
    link = sv.Participant()
    with open(os.path.join(folder, "joined.tmp"), "w") as out:
        json.dump({"pid": os.getpid(), "slot": link.slot}, out)
    os.rename(os.path.join(folder, "joined.tmp"), os.path.join(folder, "joined"))
    wait_for(os.path.join(folder, "fill"))
    with open(os.path.join(folder, "fill")) as source:
        models = json.load(source)["models"]
    for model_id in range(1, models + 1):
        link.register_model(model_id, 4096, 4096)
    # The supervisor applies the reports in order: wait until the generation stands still
    # with every model in the ledger.
    ledger = ()
    while len(ledger) < models:
        generation = link.ledger_generation()
        time.sleep(0.5)
        if link.ledger_generation() != generation:
            continue
        started = time.perf_counter()
        ledger = link.read_ledger()  # the generation moved since the last read: a whole read
        read_ms = (time.perf_counter() - started) * 1e3
    # A look while nothing changes: the generation, and the tuple read last.
    looks = 10_000
    started = time.perf_counter()
    for _ in range(looks):
        link.read_ledger()
    look_us = (time.perf_counter() - started) * 1e6 / looks
    with open(os.path.join(folder, "filled.tmp"), "w") as out:
        json.dump({"rows": len(ledger), "ledger_read_ms": read_ms, "ledger_look_unchanged_us": look_us}, out)
    os.rename(os.path.join(folder, "filled.tmp"), os.path.join(folder, "filled"))
    while True:
        command = link.next_command(1.0)
        if command is None:
            continue
        if command.type == sv.SHUTDOWN:
            return
        if command.type in (sv.PARTIAL_UNLOAD, sv.DETACH):
            link.send_unload_receipt(command, 0, 4096)
        else:
            link.send_release_receipt(command, 0)


if __name__ == "__main__":
    main()
