"""A participant of comfy-supervisor, from Python, over libcomfy_participant.so (ctypes).

A process the supervisor started (COMFY_SV_SLOT and the other COMFY_SV_* variables set)
opens a Participant to take part: report the models it holds to the machine-wide
ledger, ask admission before it loads, take the supervisor's commands and answer them
with the bytes it really freed, measured. ctypes over a C ABI rather than a compiled
extension: one .so that any Python 3 (ComfyUI's own venv) loads without being built
against its ABI. Every failure raises ParticipantError with one line.

The binding is this room's whole: it imports nothing else of comfy_supervisor (the
_installed.py that cmake --install writes lives beside it). Imported by host and
pack_worker, and by a host program of one's own (examples/host_participant.py).
"""

import ctypes
import functools
import math
import os
import pathlib
import threading
from dataclasses import dataclass

LIBRARY_NAME = "libcomfy_participant.so"
UNKNOWN_BYTES = 2**64 - 1  # a figure not known yet; never read as zero

# Command types, as participant_c_api.h numbers them (the protocol's message types).
SHUTDOWN = 3
PARTIAL_UNLOAD = 10
DETACH = 11
RELEASE_NODE_BOUNDARY = 13
CAST_EPOCH_BOUNDARY = 14
FULL_RELEASE = 15
PARTIAL_RELEASE = 16
RELEASE_PINS = 17
RELEASES = (RELEASE_NODE_BOUNDARY, CAST_EPOCH_BOUNDARY, FULL_RELEASE, PARTIAL_RELEASE, RELEASE_PINS)

# Capabilities declared in Hello.
CAP_NODE_BOUNDARY_RELEASE = 1 << 0
CAP_PINNED_MEMORY = 1 << 1
CAP_PARTIAL_UNLOAD = 1 << 2
# Joins before its start-up is done (a pack's import) and says ready() once it is: until
# then the supervisor shows it spawning and sends it no work.
CAP_READY_LATER = 1 << 3
# ready()'s count from a participant with no node classes of its own (COMFY_NODE_CLASSES_UNCOUNTED).
NODE_CLASSES_UNCOUNTED = 2**32 - 1

# Model kinds of the ledger.
KIND_UNKNOWN, KIND_DIFFUSION, KIND_TEXT_ENCODER, KIND_VAE, KIND_CLIP_VISION, KIND_CONTROLNET, KIND_OTHER = range(7)
MODEL_NAME_CHARS = 63  # of a model's name in the ledger (shared/name_field.hpp, kModelNameBytes less its NUL)
PACK_NAME_BYTES = 32    # of a pack's name in a ledger row, its NUL included (COMFY_PACK_NAME_BYTES)

REFUSAL_REASONS = ("it cannot fit", "it waited too long", "the supervisor is shutting down")

# What a stand-in unload came to (participant_c_api.h, COMFY_STANDIN_*).
STANDIN_UNLOADED, STANDIN_OWNER_GONE, STANDIN_DEFERRED, STANDIN_TIMED_OUT, STANDIN_REFUSED = range(5)


class ParticipantError(RuntimeError):
    """A call into the participant library failed; the message is one line."""


class _Command(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("node_index", ctypes.c_uint32), ("correlation", ctypes.c_uint64),
                ("model_id", ctypes.c_uint64), ("bytes", ctypes.c_uint64), ("prompt_epoch", ctypes.c_uint64),
                ("reason", ctypes.c_uint32), ("grace_ms", ctypes.c_uint32)]


class _AdmissionAnswer(ctypes.Structure):
    _fields_ = [("granted", ctypes.c_int32), ("vram_state", ctypes.c_uint32), ("device_free", ctypes.c_uint64),
                ("reserve_bytes", ctypes.c_uint64), ("shortfall", ctypes.c_uint64), ("needed_bytes", ctypes.c_uint64),
                ("held_by_others", ctypes.c_uint64), ("refusal_reason", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class _LedgerEntry(ctypes.Structure):
    _fields_ = [("owner_slot", ctypes.c_uint32), ("owner_generation", ctypes.c_uint32), ("model_id", ctypes.c_uint64),
                ("weights_id", ctypes.c_uint64), ("total_bytes", ctypes.c_uint64), ("loaded_bytes", ctypes.c_uint64),
                ("load_order", ctypes.c_uint64), ("device", ctypes.c_uint32), ("references", ctypes.c_uint32),
                ("kind", ctypes.c_uint16), ("currently_used", ctypes.c_uint8), ("dynamic", ctypes.c_uint8),
                ("reserved", ctypes.c_uint32), ("name", ctypes.c_char * (MODEL_NAME_CHARS + 1)),
                ("owner_name", ctypes.c_char * PACK_NAME_BYTES)]


class _StandInResult(ctypes.Structure):
    _fields_ = [("bytes_freed", ctypes.c_uint64), ("loaded_bytes", ctypes.c_uint64), ("outcome", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32)]


class _Census(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "pinned_bytes", "pinned_ceiling", "bytes_evicted", "bytes_evicted_active", "churn", "allocator_reserved",
        "allocator_active", "cast_buffer_bytes", "resident_set_bytes", "prompt_epoch")] + [
        ("last_node", ctypes.c_uint32), ("pin_errors", ctypes.c_uint32)]


@dataclass(frozen=True)
class Command:
    """One command from the supervisor; answer it with the matching receipt."""
    type: int
    correlation: int
    model_id: int
    bytes: int
    prompt_epoch: int
    node_index: int
    reason: int
    grace_ms: int


@dataclass(frozen=True)
class LedgerEntry:
    """One model some participant holds, as the supervisor's ledger shows it."""
    owner_slot: int
    owner_generation: int
    model_id: int
    weights_id: int
    total_bytes: int
    loaded_bytes: int       # UNKNOWN_BYTES when not reported yet
    load_order: int         # larger is more recent
    device: int
    references: int
    kind: int
    currently_used: bool
    dynamic: bool
    name: str = ""          # as its owner registered it; "" for none
    owner_name: str = ""    # the owner's pack name; "" when the library could not read it

    @property
    def key(self):
        """Names the model across the machine and across its owner's lives."""
        return (self.owner_slot, self.owner_generation, self.model_id)


@dataclass(frozen=True)
class StandInResult:
    outcome: int            # a STANDIN_*
    bytes_freed: int        # measured by the owner
    loaded_bytes: int       # still loaded after it; UNKNOWN_BYTES when not known


@dataclass(frozen=True)
class AdmissionAnswer:
    granted: bool
    reserve_bytes: int      # publish as upstream's EXTRA_RESERVED_VRAM
    device_free: int
    shortfall: int          # granted short under policy "admit"
    needed_bytes: int       # refused: the admission target
    held_by_others: int     # refused: what the other participants hold
    refusal_reason: int     # refused: an index into REFUSAL_REASONS

    def refusal(self):
        """Why a load was refused, in one line."""
        reason = REFUSAL_REASONS[self.refusal_reason] if self.refusal_reason < len(REFUSAL_REASONS) else "unknown"
        return (f"the supervisor refused the load because {reason}: it needs {self.needed_bytes} bytes, "
                f"{self.device_free} are free, other processes hold {self.held_by_others}")


def resident_set_bytes():
    """This process's resident set, for the census."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def find_library():
    """The library's path: $COMFY_SV_LIBRARY (the supervisor sets it to the one of its own
    build or install), else next to this package, else where `cmake --install` put it
    (recorded in the installed package's _installed.py), else the repository's build/lib."""
    here = pathlib.Path(__file__).resolve().parents[1]  # the folder of the package comfy_supervisor
    candidates = [os.environ.get("COMFY_SV_LIBRARY"), here / LIBRARY_NAME]
    try:
        from . import _installed  # cmake --install writes it beside this module
        candidates.append(here / _installed.LIBRARY)
    except ImportError:  # a source tree, or a pip install: no cmake --install wrote it
        pass
    candidates.append(here.parents[2] / "build" / "lib" / LIBRARY_NAME)
    for candidate in candidates:
        if candidate and pathlib.Path(candidate).is_file():
            return str(candidate)
    looked = ", ".join(str(c) for c in candidates if c)
    raise ParticipantError(f"cannot find {LIBRARY_NAME} (looked at {looked}); build or install the project "
                           "(cmake --build build, cmake --install build) or set COMFY_SV_LIBRARY to its path")


_u32, _u64, _int, _p = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p
_SIGNATURES = {
    "comfy_participant_open": (_p, [_u64]),
    "comfy_participant_close": (None, [_p]),
    "comfy_participant_last_error": (ctypes.c_char_p, []),
    "comfy_participant_ready": (_int, [_p, _u32]),
    "comfy_participant_slot": (_u32, [_p]),
    "comfy_participant_generation": (_u32, [_p]),
    "comfy_participant_register_model": (_int, [_p, _u64, _u64, _u64, _u64, _u32, ctypes.c_uint16, _int,
                                                ctypes.c_char_p]),
    "comfy_participant_report_residency": (_int, [_p, _u64, _u64, _u64, _u32, _int, _int]),
    "comfy_participant_drop_model": (_int, [_p, _u64]),
    "comfy_participant_request_admission": (_int, [_p, _u32, _u64, _u64, _u32, _u64, ctypes.POINTER(_u64), _u32, _u32,
                                                   ctypes.POINTER(_AdmissionAnswer)]),
    "comfy_participant_request_pin": (_int, [_p, _u64, ctypes.POINTER(_u64)]),
    "comfy_participant_read_ledger": (_int, [_p, ctypes.POINTER(_LedgerEntry), _u32, ctypes.POINTER(_u32)]),
    "comfy_participant_ledger_generation": (_int, [_p, ctypes.POINTER(_u64)]),
    "comfy_participant_unload_standin": (_int, [_p, _u32, _u32, _u64, _u64, _int, _u32,
                                                ctypes.POINTER(_StandInResult)]),
    "comfy_participant_node_started": (_int, [_p, _u64, _u32]),
    "comfy_participant_callback_started": (_int, [_p, _u64]),
    "comfy_participant_node_finished": (_int, [_p, _u64, _u32, _int]),
    "comfy_participant_update_census": (_int, [_p, ctypes.POINTER(_Census)]),
    "comfy_participant_next_command": (_int, [_p, _u32, ctypes.POINTER(_Command)]),
    "comfy_participant_send_unload_receipt": (_int, [_p, _u64, _u64, _u64, _u64, _u64, _u64, _int]),
    "comfy_participant_send_release_receipt": (_int, [_p, _u64, _u32, _u64, _u64, _int]),
    "comfy_participant_device_allocate": (_int, [_p, _u64]),
    "comfy_participant_device_release": (_int, [_p, _u64]),
    "comfy_participant_device_free": (_int, [_p, ctypes.POINTER(_u64)]),
    "comfy_participant_device_used": (_int, [_p, ctypes.POINTER(_u64)]),
    "comfy_participant_watch_word": (_int, [_p, _u32, _u64]),
}


def _text(field):
    """A name field of the library's: ctypes gives its bytes up to the NUL, printable ASCII
    (the library checked them); "replace" all the same, since a str must come out."""
    return field.decode("ascii", "replace")


def _load(path):
    try:
        library = ctypes.CDLL(path)
    except OSError as error:
        raise ParticipantError(f"cannot load {path}: {error}; rebuild the project") from None
    for name, (result, arguments) in _SIGNATURES.items():
        function = getattr(library, name)
        function.restype = result
        function.argtypes = arguments
    return library


@functools.lru_cache(maxsize=None)
def _library(path):
    return _load(path)


def word_watcher():
    """watch(address, seen, spin_s): whether the 32-bit word at `address`, which another
    process writes, moved from `seen` within `spin_s`; None where the library is not found.
    The library watches with the GIL let go (ctypes), so that the process's other threads
    run meanwhile: the bridge's reader watches its peer's frames word so (bridge/channel.py)."""
    try:
        watch = _library(find_library()).comfy_participant_watch_word
    except ParticipantError:
        return None
    return lambda address, seen, spin_s: watch(address, seen, int(spin_s * 1e9)) == 1


class Participant:
    """This process's place in the supervisor's segment. Methods may be called from any
    thread: one thread may wait in next_command() while another waits for an admission."""

    def __init__(self, capabilities=CAP_PARTIAL_UNLOAD, library=None):
        self._lib = _library(library or find_library())
        self._handle = self._lib.comfy_participant_open(capabilities)
        if not self._handle:
            raise ParticipantError("cannot join the supervisor: " + self._error())
        self._sequences = {}  # model id -> last residency sequence sent
        self._sequence_lock = threading.Lock()
        # The ledger as last read, and the generation it was read at: read again only when
        # the supervisor changed it (read_ledger). Guarded by _ledger_lock.
        self._ledger = ()
        self._ledger_generation = None
        self._ledger_lock = threading.Lock()

    def _error(self):
        return self._lib.comfy_participant_last_error().decode(errors="replace") or "unknown failure"

    def _check(self, status):
        if status < 0:
            raise ParticipantError(self._error())
        return status

    def close(self):
        """Stops the heartbeat and detaches; the supervisor sees the process leave when it exits."""
        if self._handle:
            self._lib.comfy_participant_close(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def ready(self, node_classes=NODE_CLASSES_UNCOUNTED):
        """Its start-up is done: ready from now on, with how many node classes it registered
        (the supervisor warns of a pack with none). Once, and only with CAP_READY_LATER."""
        self._check(self._lib.comfy_participant_ready(self._handle, node_classes))

    @property
    def slot(self):
        return self._lib.comfy_participant_slot(self._handle)

    @property
    def generation(self):
        return self._lib.comfy_participant_generation(self._handle)

    def register_model(self, model_id, total_bytes, loaded_bytes=UNKNOWN_BYTES, weights_id=None, device=0,
                       kind=KIND_UNKNOWN, dynamic=False, name=""):
        """A model now held on the device; ids are this process's own, 1 to 2**48 - 1. `name`
        is what the operator reads for it (comfyctl, the dashboard, the log): its first
        MODEL_NAME_CHARS characters are sent, each one outside printable ASCII as '?'."""
        with self._sequence_lock:
            self._sequences[model_id] = 0
        encoded = (name or "")[:MODEL_NAME_CHARS].encode("ascii", "replace")  # the library replaces control characters
        self._check(self._lib.comfy_participant_register_model(
            self._handle, model_id, weights_id or model_id, total_bytes, loaded_bytes, device, kind, int(dynamic),
            encoded))

    def _next_sequence(self, model_id):
        with self._sequence_lock:
            sequence = self._sequences.get(model_id, 0) + 1
            self._sequences[model_id] = sequence
        return sequence

    def report_residency(self, model_id, loaded_bytes, references=1, currently_used=True, just_used=False):
        """How much of a model is on the device now (numbered, so a late report never wins).
        just_used: a load just used it (upstream's load_models_gpu), which moves it to the
        front of the eviction order."""
        self._check(self._lib.comfy_participant_report_residency(
            self._handle, model_id, self._next_sequence(model_id), loaded_bytes, references, int(currently_used),
            int(just_used)))

    def drop_model(self, model_id):
        with self._sequence_lock:
            self._sequences.pop(model_id, None)
        self._check(self._lib.comfy_participant_drop_model(self._handle, model_id))

    def request_admission(self, nbytes, largest_tensor=0, streams=1, pinned_bytes=0, keep_loaded=(), dynamic=False,
                          device=0):
        """Asks leave to load `nbytes`; blocks until the supervisor answers (or shuts down)."""
        keep = (_u64 * max(1, len(keep_loaded)))(*keep_loaded)
        answer = _AdmissionAnswer()
        self._check(self._lib.comfy_participant_request_admission(
            self._handle, device, nbytes, largest_tensor, streams, pinned_bytes, keep, len(keep_loaded),
            1 if dynamic else 0, ctypes.byref(answer)))
        return AdmissionAnswer(bool(answer.granted), answer.reserve_bytes, answer.device_free, answer.shortfall,
                               answer.needed_bytes, answer.held_by_others, answer.refusal_reason)

    def request_pin(self, nbytes):
        """The bytes of host memory the supervisor lets this process pin (maybe fewer, or 0)."""
        granted = _u64()
        self._check(self._lib.comfy_participant_request_pin(self._handle, nbytes, ctypes.byref(granted)))
        return granted.value

    def ledger_generation(self):
        """How many times the supervisor has changed the ledger: equal to a value read
        before, no row of it changed since. One load of shared memory."""
        generation = _u64()
        self._check(self._lib.comfy_participant_ledger_generation(self._handle, ctypes.byref(generation)))
        return generation.value

    def read_ledger(self):
        """Every model in the machine-wide ledger, this process's own included, most
        recently loaded first, as a tuple. While the ledger's generation stays where it
        was, the tuple read last is returned again: an idle process that looks at the
        ledger reads nothing and builds nothing."""
        with self._ledger_lock:
            generation = self.ledger_generation()
            if generation == self._ledger_generation:
                return self._ledger
            capacity = max(256, len(self._ledger))
            while True:
                rows = (_LedgerEntry * capacity)()
                count = _u32()
                self._check(self._lib.comfy_participant_read_ledger(self._handle, rows, capacity, ctypes.byref(count)))
                if count.value <= capacity:
                    break
                capacity = count.value  # more rows than room: read again, larger
            # Read at `generation` or later: a change during the read moves the generation
            # past it, so the next call reads again.
            self._ledger = tuple(
                LedgerEntry(r.owner_slot, r.owner_generation, r.model_id, r.weights_id, r.total_bytes, r.loaded_bytes,
                            r.load_order, r.device, r.references, r.kind, bool(r.currently_used), bool(r.dynamic),
                            _text(r.name), _text(r.owner_name))
                for r in rows[:count.value])
            self._ledger_generation = generation
            return self._ledger

    def unload_standin(self, entry, nbytes=0, detach=False, timeout_s=30.0):
        """Has the owner of ledger `entry` (another participant) free `nbytes` of it, or
        all of it with `detach`; blocks until its answer, or `timeout_s`."""
        result = _StandInResult()
        self._check(self._lib.comfy_participant_unload_standin(
            self._handle, entry.owner_slot, entry.owner_generation, entry.model_id, 0 if detach else nbytes,
            int(detach), int(max(0.0, timeout_s) * 1000), ctypes.byref(result)))
        return StandInResult(result.outcome, result.bytes_freed, result.loaded_bytes)

    def node_started(self, prompt_epoch, node_index=0):
        self._check(self._lib.comfy_participant_node_started(self._handle, prompt_epoch, node_index))

    def callback_started(self, prompt_epoch):
        """node_started for a busy stretch that serves the peer's use of our objects (a
        pack's function the host calls back): comfyctl shows it in a callback."""
        self._check(self._lib.comfy_participant_callback_started(self._handle, prompt_epoch))

    def node_finished(self, prompt_epoch, node_index=0, ok=True):
        self._check(self._lib.comfy_participant_node_finished(self._handle, prompt_epoch, node_index, int(ok)))

    def update_census(self, **fields):
        """Publishes the census fields given (names as in comfy_census); the rest become 0."""
        unknown = set(fields) - {name for name, _ in _Census._fields_}
        if unknown:
            raise ParticipantError("unknown census field(s): " + ", ".join(sorted(unknown)))
        self._check(self._lib.comfy_participant_update_census(self._handle, ctypes.byref(_Census(**fields))))

    def next_command(self, timeout_s):
        """The next command, or None when `timeout_s` seconds passed first. The library
        waits whole milliseconds: a part of one is waited as a whole one, never as none,
        which would have a caller that waits for a deadline spin through its last
        millisecond (an idle worker's 700 calls, 1.8 ms of CPU, at each of its wake-ups)."""
        command = _Command()
        got = self._check(self._lib.comfy_participant_next_command(
            self._handle, math.ceil(max(0.0, timeout_s) * 1000), ctypes.byref(command)))
        if not got:
            return None
        return Command(command.type, command.correlation, command.model_id, command.bytes, command.prompt_epoch,
                       command.node_index, command.reason, command.grace_ms)

    def send_unload_receipt(self, command, bytes_freed, loaded_bytes, bytes_requested=None, deferred=False):
        """Answers partial_unload or detach with the bytes really freed and what stays loaded
        (0 after a detach; ignored when deferred). Call it before drop_model for a detach."""
        asked = command.bytes if bytes_requested is None else bytes_requested
        self._check(self._lib.comfy_participant_send_unload_receipt(
            self._handle, command.correlation, command.model_id, asked, bytes_freed,
            self._next_sequence(command.model_id), loaded_bytes, int(deferred)))

    def send_release_receipt(self, command, bytes_freed, deferred=False):
        """Answers a release command with the bytes really freed."""
        self._check(self._lib.comfy_participant_send_release_receipt(
            self._handle, command.correlation, command.type, command.bytes, bytes_freed, int(deferred)))

    def device_allocate(self, nbytes):
        """Reserves `nbytes` on this participant's device; False when they do not fit."""
        return self._check(self._lib.comfy_participant_device_allocate(self._handle, nbytes)) == 1

    def device_release(self, nbytes):
        self._check(self._lib.comfy_participant_device_release(self._handle, nbytes))

    def device_free(self):
        """Free on the whole device, every process's use counted."""
        figure = _u64()
        self._check(self._lib.comfy_participant_device_free(self._handle, ctypes.byref(figure)))
        return figure.value

    def device_used(self):
        """What this process holds on the device."""
        figure = _u64()
        self._check(self._lib.comfy_participant_device_used(self._handle, ctypes.byref(figure)))
        return figure.value
