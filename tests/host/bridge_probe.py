"""A participant that reports what the supervisor's bridge hands it, for
tests/python/bridge_processes_test.cpp. It joins through comfy_supervisor.participant (so the
handshake and heartbeat go as for any participant, and the supervisor's Shutdown ends it),
then reads its control socket and writes one JSON line per thing seen to REPORT:

    bridge_probe.py --role host|pack|plain --report FILE [--deaf] [anything else, recorded]

- "start": its argv, PYTHONPATH, the COMFY_SV_BRIDGE_FD, _ARENA_FD and _ARENA_BYTES it
  found, its own arena's size and seals, and any descriptor it holds that its environment
  does not name (none should leak in);
- "event": each control message, with what each descriptor attached to it is: its kind,
  access mode, inode, size and seals, and for an arena whether a shared writable mapping
  is refused and a private one allowed;
- "call": for each call channel, that a line went across and back: the host writes
  "ping NAME GEN", the pack answers "pong " and what it read; then the reader of each
  arena reads the marker its producer wrote there first.

A pack writes "arena of pack generation GEN" at the start of its own arena before it
joins, and the host writes "arena of host generation GEN for NAME generation GEN" at the
start of the arena it was handed for a pack life before it pings that life, so that a
reader that hears from the producer on the call channel finds the marker there.
With --deaf it never reads its control socket (the supervisor must stop it once the
socket is full).
"""

import argparse
import fcntl
import json
import mmap
import os
import socket
import stat
import threading

parser = argparse.ArgumentParser()
parser.add_argument("--role", required=True, choices=("host", "pack", "plain"))
parser.add_argument("--report", required=True)
parser.add_argument("--deaf", action="store_true")
args, rest = parser.parse_known_args()

GENERATION = os.environ.get("COMFY_SV_GENERATION", "?")
NAMED = ("COMFY_SV_DOORBELL_FD", "COMFY_SV_SEGMENT_FD", "COMFY_SV_REGION_FD", "COMFY_SV_BRIDGE_FD",
         "COMFY_SV_ARENA_FD")
SEALS = {"seal": fcntl.F_SEAL_SEAL, "shrink": fcntl.F_SEAL_SHRINK, "grow": fcntl.F_SEAL_GROW,
         "write": fcntl.F_SEAL_WRITE}
report_lock = threading.Lock()


def stray_descriptors():
    """Descriptors above stderr that the environment does not name: leaked into the child."""
    named = {int(os.environ[name]) for name in NAMED if name in os.environ}
    stray = []
    for entry in os.listdir("/proc/self/fd"):
        fd = int(entry)
        if fd <= 2 or fd in named:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        stray.append(f"{fd} -> {target}")
    return stray


STRAY = stray_descriptors()  # first, before this program opens anything


def write(record):
    record.update(role=args.role, generation=GENERATION)
    with report_lock, open(args.report, "a") as out:
        out.write(json.dumps(record) + "\n")


def seals_of(fd):
    try:
        bits = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        return None
    return sorted(name for name, bit in SEALS.items() if bits & bit)


def access_of(fd):
    return {os.O_RDONLY: "read-only", os.O_WRONLY: "write-only", os.O_RDWR: "read-write"}[
        fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE]


def describe(fd):
    """What a received descriptor is."""
    st = os.fstat(fd)
    mode = access_of(fd)
    if stat.S_ISSOCK(st.st_mode):
        kind = socket.socket(fileno=os.dup(fd))
        described = {"kind": "socket", "type": int(kind.type), "access": mode}
        kind.close()
        return described
    described = {"kind": "file" if stat.S_ISREG(st.st_mode) else oct(st.st_mode), "access": mode,
                 "inode": st.st_ino, "size": st.st_size, "seals": seals_of(fd)}
    try:
        mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE).close()
        described["shared_writable"] = "mapped"
    except OSError as error:
        described["shared_writable"] = f"refused: {error.strerror}"
    try:
        private = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_COPY)
        private[:4] = b"junk"  # lands in this copy only
        private.close()
        described["private"] = "mapped"
    except OSError as error:
        described["private"] = f"refused: {error.strerror}"
    return described


def marker_in(fd):
    """The producer's marker at the start of an arena, read from a private mapping."""
    view = mmap.mmap(fd, 64, access=mmap.ACCESS_COPY)
    try:
        return view[:64].split(b"\0", 1)[0].decode()
    finally:
        view.close()


def read_line(sock):
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(256)
        if not chunk:
            return None
        data += chunk
    return data.decode().rstrip("\n")


def write_marker(fd, marker):
    own = mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    own[:len(marker) + 1] = marker.encode() + b"\0"
    own.close()


def call_as_host(pack, generation, call, arena, for_pack):
    write_marker(for_pack, f"arena of host generation {GENERATION} for {pack} generation {generation}")
    try:
        call.sendall(f"ping {pack} {generation}\n".encode())
        answer = read_line(call)
    except OSError:
        answer = None  # the pack's worker is gone already
    if answer is None:
        write({"call": pack, "peer_generation": generation, "answer": None})
        return
    write({"call": pack, "peer_generation": generation, "answer": answer, "peer_arena": marker_in(arena),
           "own_arena": marker_in(for_pack)})


def call_as_pack(generation, call, arena):
    try:
        asked = read_line(call)
    except OSError:
        asked = None  # the host is gone already
    if asked is None:
        write({"call": "host", "peer_generation": generation, "asked": None})
        return
    call.sendall(f"pong {asked}\n".encode())
    write({"call": "host", "peer_generation": generation, "asked": asked, "peer_arena": marker_in(arena)})


def serve_bridge(control):
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 65536, 8)
        except OSError as error:
            write({"control": f"error: {error.strerror}"})
            return
        if not message:
            write({"control": "end of file"})
            return
        event = json.loads(message)
        write({"event": event, "fds": [describe(fd) for fd in fds]})
        if (event["event"], len(fds)) in (("pack_started", 3), ("host_started", 2)):
            call = socket.socket(fileno=fds[0])
            if event["event"] == "pack_started":
                target, call_args = call_as_host, (event["pack"], event["generation"], call, fds[1], fds[2])
            else:
                target, call_args = call_as_pack, (event["generation"], call, fds[1])
            threading.Thread(target=target, args=call_args, daemon=True).start()
        else:
            for fd in fds:
                os.close(fd)


def write_own_arena():
    if "COMFY_SV_ARENA_FD" not in os.environ:
        return None
    fd = int(os.environ["COMFY_SV_ARENA_FD"])
    write_marker(fd, f"arena of {args.role} generation {GENERATION}")
    return {"size": os.fstat(fd).st_size, "seals": seals_of(fd), "access": access_of(fd),
            "allocated_bytes": os.fstat(fd).st_blocks * 512}


own_arena = write_own_arena()
write({"start": {"argv": rest, "pythonpath": os.environ.get("PYTHONPATH"), "stray": STRAY,
                 "variables": {name: os.environ.get(name) for name in
                               ("COMFY_SV_BRIDGE_FD", "COMFY_SV_ARENA_FD", "COMFY_SV_ARENA_BYTES")},
                 "own_arena": own_arena}})

from comfy_supervisor import participant as sv  # noqa: E402 (after the descriptors were listed)

link = sv.Participant()
if "COMFY_SV_BRIDGE_FD" in os.environ and not args.deaf:
    control = socket.socket(fileno=int(os.environ["COMFY_SV_BRIDGE_FD"]))
    threading.Thread(target=serve_bridge, args=(control,), daemon=True).start()

while True:
    command = link.next_command(1.0)
    if command is None:
        continue
    if command.type == sv.SHUTDOWN:
        os._exit(0)
    if command.type in sv.RELEASES:
        link.send_release_receipt(command, 0)
