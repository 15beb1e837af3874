"""A pack's worker runs the host's node calls (the worker side of docs/PACKS.md).

The supervisor hands this life a call socket for each host life, and the arena that host
life writes for this pack life alone (the bridge control socket's host_started). The main
thread reads the host's messages and runs its calls one at a time, which makes the pack
the unit of concurrency; nothing else reads the socket. While a node runs, or the pack
serves the host's use of its objects (its CFG function or patch under the host's
sampler, a function it returned), the host's Cancel reaches it through that arena's
interrupt word (bridge/arena.py), which upstream's interrupt checks, wrapped here, read;
the releases the host sends meanwhile wait in the socket for the node's end. A call:

- decodes its inputs over the host's arena, in place (bridge/values.py), with the handles
  of this life;
- runs the node as upstream runs it: one instance per host node (kept until the host's
  proxy instance goes), its FUNCTION, or its IS_CHANGED or VALIDATE_INPUTS classmethod;
- reports comfy.utils.ProgressBar updates to the host as they happen, and hears Cancel
  there as upstream's own progress hook does (main.py's hijack_progress);
- answers with its outputs written once into this life's arena, objects that are
  neither tensors nor plain values kept here as handles; or with the error: an
  interrupt as such, an out-of-memory error marked so the host raises upstream's own
  OOM exception, anything else with its traceback;
- is busy for the memory integration (host.comfyui._Host.node_call): the command thread
  defers evictions while it runs; the supervisor hears node_started at the first call of
  a run and node_finished once none came for IDLE_AFTER_S; the node's caches are
  released at its end (release_node_boundary, done here); cast_epoch_boundary comes
  from the supervisor when the host's prompt changes.

The host's uses of the pack's objects are busy the same way (callback_started), with one
difference: the uses a node of the host's prompt makes come held (bridge/conversation.py),
and the host says when that node ended (uses_done). Until then this worker stays in the
conversation, busy, however long the host's steps take between two uses: no
node_finished and callback_started around each (two messages and a wake-up a step, on a
GPU sampler). A life of the host that ends meanwhile ends the stretch as well.
"""

import contextlib
import itertools
import os
import queue
import socket
import sys
import threading
import traceback

from .. import participant as sv
from ..bridge import written_back
from ..bridge.arena import PeerArena
from ..bridge.channel import SPIN_S, receive_control
from ..bridge.conversation import Conversation, use_interrupt_id
from ..bridge.remote import RemoteError
from ..bridge.session import PeerSession
from ..bridge.values import ValueCrossingError
from ..crossing import replicas
from ..upstream import comfyui_startup
from . import v3_nodes

CALL_KINDS = ("function", "is_changed", "validate_inputs", "check_lazy_status")
# No call for this long after one ends: the worker tells the supervisor it is idle. Calls
# closer together (a pack's nodes in a row) stay one busy stretch to the supervisor.
IDLE_AFTER_S = 0.002


class HostSession(PeerSession):
    """One host life, as this worker sees it."""

    def __init__(self, server, sock, arena_fd, generation):
        super().__init__(sock, PeerArena(arena_fd), server.arena, generation, f"host {generation}", copy_received=False,
                         watch=sv.word_watcher())
        self.server = server
        self.handles = {}     # id -> an object this life made, which the host holds a handle of
        self.instances = {}   # the host's node instance id -> the pack's node object
        self.next_handle = itertools.count(1)
        # The uses served now are held by the host: their stretch ends at its uses_done.
        self.held = False
        # The host reads the call socket only while it waits on this worker: a pack may use
        # the host's objects during a node call, or while it serves the host's use of its own.
        self.remote = Conversation(self, "the host", enforce=False,
                                   may_invoke=lambda: server.current is not None or bool(self.remote.served),
                                   serving=lambda held: server.serving(self, held),
                                   replicas=(replicas.replica_for, replicas.origin_of))

    def object_handle(self, value):
        return self.handle_of(value)

    def object_from_handle(self, handle):
        return self.resolve(handle)

    def ended(self):
        return (f"the host's life {self.generation} ended, and with it what it handed this worker: the node gets "
                "the host's objects again when the prompt is queued again")

    def on_message(self, message):
        op = message.get("op")
        if op == "describe":
            self.describe(message.get("id"))
        elif op == "stats":
            self.send({"op": "stats", "id": message.get("id"), "arena_used": self.server.arena.used,
                               "lent_blocks": len(self.lent), "cuda_lent": len(self.cuda.lent),
                               "handles": len(self.handles), "instances": len(self.instances),
                               "objects": len(self.remote.exports),
                               "busy_stretches": self.server.memory.busy_stretches,
                               "busy": self.server.memory.announced is not None})
        elif op == "call":
            self.server.run(self, message)
            self.call_done()  # its inputs are let go of: the host gets their blocks back now
        elif op == "uses_done":
            self.server.uses_done(self)
        else:
            self.channel.send({"op": "error", "id": message.get("id"), "type": "ProtocolError",
                               "message": f"unknown operation {str(op)[:40]!r}", "traceback": ""})

    def describe(self, request_id):
        """The pack's interfaces, its front-end folder and its HTTP routes, with a socket of
        this host life's own for the routes' requests (pack_worker/routes.py)."""
        described = {"op": "described", "id": request_id, "nodes": self.server.interfaces,
                     "web_directories": self.server.web_directories}
        routes = self.server.routes
        if routes is None:
            self.channel.send(described)
            return
        with routes.connect() as theirs:
            self.channel.send(dict(described, routes=routes.routes, routes_socket=True), fds=[theirs.fileno()])

    def on_release(self, message):
        for key, table in (("handles", self.handles), ("instances", self.instances)):
            for item in message.get(key) or ():
                if type(item) is int:
                    table.pop(item, None)

    def on_close(self):
        self.handles.clear()
        self.instances.clear()

    def handle_of(self, value):
        handle = next(self.next_handle)
        self.handles[handle] = value
        return {"$": "handle", "id": handle, "type": type(value).__name__}

    def resolve(self, handle):
        value = self.handles.get(handle.get("id"), self)
        if value is self:
            raise ValueCrossingError(f"a handle this worker does not hold (id {str(handle.get('id'))[:20]})")
        return value


def _masked_refusal(error):
    """The RemoteError (a use of the host's objects refused, or one whose owner is gone) that
    `error` was raised while handling, where it is not that error itself; None otherwise."""
    seen, cause = set(), error.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, RemoteError):
            return None if isinstance(error, RemoteError) else cause
        seen.add(id(cause))
        cause = cause.__context__
    return None


class NodeServer:
    def __init__(self, pack_name, classes, interfaces, arena, control, memory, web_directories=(), routes=None):
        self.pack_name = pack_name
        self.classes = classes          # NODE_CLASS_MAPPINGS, a group's packs' together
        self.interfaces = interfaces    # __main__.describe()
        # Each pack folder's WEB_DIRECTORY (relative to it) or None, in the order of --pack.
        self.web_directories = list(web_directories)
        self.routes = routes            # routes.RouteServer, where the pack declared HTTP routes
        self.arena = arena
        self.control = control
        self.memory = memory            # host.comfyui._Host of this worker
        self.sessions = queue.SimpleQueue()  # host lives, as the supervisor hands them over
        self.session = None             # the host life served now
        self.current = None             # (session, call id) running now
        import comfy.model_management as mm
        import comfy.utils
        self.mm = mm
        comfy.utils.set_progress_bar_global_hook(self.progress)
        comfyui_startup.forward_to_host = self.to_browser
        self.hear_interrupts()

    def hear_interrupts(self):
        """Upstream's interrupt checks also read the host's interrupt word for the call
        running now, and for the host's uses of the pack's objects served now (the host
        waits on each, bridge/conversation.py). Module attributes: code that imported these
        names before this ran keeps upstream's own and hears only this process's interrupts."""
        mm = self.mm
        original_interrupted, original_throw = mm.processing_interrupted, mm.throw_exception_if_processing_interrupted

        def host_interrupted():
            current = self.current
            if current is not None and current[0].peer.interrupted(current[1]):
                return True
            session = self.session
            return session is not None and any(session.peer.interrupted(use_interrupt_id(call))
                                               for call in session.remote.served if type(call) is int)

        def processing_interrupted():
            return original_interrupted() or host_interrupted()

        def throw_exception_if_processing_interrupted():
            if host_interrupted():
                mm.interrupt_current_processing(True)
            original_throw()

        mm.processing_interrupted = processing_interrupted
        mm.throw_exception_if_processing_interrupted = throw_exception_if_processing_interrupted

    def serve_forever(self):
        threading.Thread(target=self.take_host_lives, name="bridge control", daemon=True).start()
        # Every node call and every use of the pack's objects the host makes is dispatched
        # by this thread: in inference mode, as ComfyUI's executor runs every node (upstream's
        # code relies on it: a tiled VAE encode adds in place into an inference tensor).
        with _as_comfyui_runs_nodes():
            self._serve_lives()

    def _serve_lives(self):
        while True:
            session = self.session = self.sessions.get()
            while True:  # one host life, until it ends
                # Read holding the reading lock, which a thread of the pack waiting for the
                # host's answer takes while this one runs a call or serves a use.
                # Busy, and the host holds no uses: idle once no message came for IDLE_AFTER_S.
                wait_s = IDLE_AFTER_S if self.memory.announced and not session.held else None
                with session.read_lock:
                    message = session.next_message(wait_s, SPIN_S)
                if message is False:
                    self.memory.idle()
                    continue
                if not message:
                    self.memory.idle()
                    if session.protocol_error:
                        self.broken(session)
                    break
                session.dispatch(message)

    def serving(self, session, held):
        """Before each use of the pack's objects by the host: busy (_Host.serving_peer). One
        the host holds, made outside a node call here, keeps this worker in the
        conversation until the host's uses_done."""
        if held and self.current is None:
            session.held = True
        self.memory.serving_peer()

    def uses_done(self, session):
        """The host's node that held its uses ended: idle now, unless a node call runs (its
        end and IDLE_AFTER_S end that stretch)."""
        session.held = False
        if self.current is None:
            self.memory.idle()

    @staticmethod
    def broken(session):
        """The host broke the call protocol: this life can serve no call of it any more
        (the supervisor pairs lives only when one starts), so it ends, and the supervisor
        starts the next."""
        print(f"pack_worker: the host broke the call protocol ({session.protocol_error}); ending this life",
              file=sys.stderr, flush=True)
        os._exit(1)

    def take_host_lives(self):
        while True:
            received = receive_control(self.control, {"host_started": 2})
            if received is None:
                return  # the supervisor is gone; its Shutdown or our death follows
            event, fds = received
            if event["event"] == "host_started":
                self.sessions.put(HostSession(self, socket.socket(fileno=fds[0]), fds[1], event.get("generation")))

    def progress(self, value, total, preview=None, node_id=None, **_):
        # Upstream's hook checks first: in one process a node that only reports progress
        # (a sampler) ends at Cancel there, and so it does here.
        self.mm.throw_exception_if_processing_interrupted()
        current = self.current
        if current is not None:
            session, call_id = current
            session.channel.send({"op": "progress", "id": call_id, "value": value, "total": total})

    def to_browser(self, event, data, sid):
        """A pack's message to the browser (its PromptServer.send_sync), for the host's
        PromptServer to send: during a call, in order with its progress and result."""
        current = self.current
        session = current[0] if current is not None else self.session
        if session is not None:
            session.channel.send({"op": "ui", "event": event, "data": data, "sid": sid})

    def run(self, session, message):
        call_id = message.get("id")
        self.mm.interrupt_current_processing(False)  # an interrupt of an earlier call is spent
        comfyui_startup.set_call_context(message.get("client_id"), message.get("node_id"))
        self.current = (session, call_id)
        epoch = message.get("epoch") if type(message.get("epoch")) is int else 0
        try:
            with self.memory.node_call(epoch):
                result = self.call(session, message)
            # The node's values are let go of before the result goes, so that the blocks of
            # inputs it kept nothing of are released on the result's own frame, not in one
            # of their own that the host must wake for; held, since the result may name them.
            with session.releases.held():
                value, encoder = session.encode(result)
                session.lend(encoder)
                del result, encoder
                self.drop_reads(session)
                sent = session.send({"op": "result", "id": call_id, "value": value})
            if not sent:
                session.close()
        except Exception as error:  # noqa: BLE001 (a node may raise anything: it is the pack's error)
            self.drop_reads(session)
            session.send(self.error_message(call_id, error))
        finally:
            self.current = None

    @staticmethod
    def drop_reads(session):
        """A mirror, and a container read of a host object's attribute that writes its changes
        back, live for the node call that read them, as the host's objects may be used only
        then; they are let go before the host hears the call ended (bridge/mirror.py,
        bridge/written_back.py)."""
        session.mirrors.drop_all("the node call that read it returned")
        written_back.let_go()

    def call(self, session, message):
        node, kind = message.get("node"), message.get("kind")
        cls = self.classes.get(node) if isinstance(node, str) else None
        if cls is None or kind not in CALL_KINDS:
            raise ValueCrossingError(f"no node {str(node)[:60]!r} with {str(kind)[:20]!r} in pack {self.pack_name}")
        inputs = session.remote.arrived(session.decoder(session.resolve).decode(message.get("inputs")))
        if not isinstance(inputs, dict):
            raise ValueCrossingError("inputs that are not a dict of names")
        if v3_nodes.is_v3(cls):
            return v3_nodes.call(cls, kind, inputs)
        if kind == "is_changed":
            return cls.IS_CHANGED(**inputs)
        if kind == "validate_inputs":
            return cls.VALIDATE_INPUTS(**inputs)
        instance_id = message.get("instance")
        instance = session.instances.get(instance_id)
        if instance is None:
            instance = cls()
            if type(instance_id) is int:
                session.instances[instance_id] = instance
        # Upstream asks the node's own instance which lazy inputs it needs, then runs it.
        return getattr(instance, cls.FUNCTION if kind == "function" else kind)(**inputs)

    def error_message(self, call_id, error):
        interrupted = isinstance(error, self.mm.InterruptProcessingException)
        first = _masked_refusal(error)
        kind, text = type(error).__name__, str(error)
        if first is not None:
            # Upstream's clean-up ran into the refusal's consequences and raised in its
            # turn (CFGGuider.sample's finally: UnboundLocalError 'orig_hook_mode'): the
            # user is told first what happened where it happened.
            kind, text = type(first).__name__, f"{first} (then, in the clean-up: {type(error).__name__}: {error})"
        return {"op": "error", "id": call_id, "type": kind, "message": text,
                "traceback": "" if interrupted else "".join(traceback.format_exception(error)),
                "interrupted": interrupted, "oom": isinstance(error, self.oom_types())}

    def oom_types(self):
        """Upstream's OOM exception, and torch's own where upstream's is the catch-all."""
        types = []
        upstream = getattr(self.mm, "OOM_EXCEPTION", None)
        if isinstance(upstream, type) and upstream is not Exception:
            types.append(upstream)
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch.cuda, "OutOfMemoryError"):
            types.append(torch.cuda.OutOfMemoryError)
        return tuple(types)


def _as_comfyui_runs_nodes():
    """torch's inference mode, where this worker's ComfyUI imported torch."""
    torch = sys.modules.get("torch")
    return torch.inference_mode() if torch is not None else contextlib.nullcontext()
