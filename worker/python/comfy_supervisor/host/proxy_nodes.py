"""The isolated packs' nodes in the ComfyUI host: one proxy class per node, which runs the
node in its pack's worker (the host side of docs/PACKS.md).

The supervisor tells this life, on its bridge control socket (read by bridges.py), which
packs run in workers (packs), hands it a call socket, the arena of each pack life and the
arena to write for that life alone (pack_started), and says when one exits (pack_exited,
with the signal) or is failed (pack_failed). Each pack's link asks each life for its node
interfaces; per node, a class with the pack's own INPUT_TYPES, RETURN_TYPES,
RETURN_NAMES, FUNCTION, CATEGORY, OUTPUT_NODE (node_interfaces.py; a node whose interface upstream could not use is left
out, in one line for its pack); IS_CHANGED and VALIDATE_INPUTS go to the worker. A call:

- waits for the pack's worker if it is (re)starting, and fails with one line if the pack
  is failed;
- runs one at a time per pack; packs run in parallel;
- sends the inputs (tensors written once into the arena the host writes for that pack
  life, plain values as data, the pack's own objects as their handles) and waits, reading
  the reply itself; ComfyUI's interrupt (upstream's interrupt_current_processing, wrapped)
  reaches the worker's interrupt checks as it happens (that arena's interrupt word,
  bridge/arena.py), the worker's progress drives the host's ProgressBar, and the pack's
  messages to the browser go to this ComfyUI's PromptServer within the pack's bounds
  (browser_messages.py);
- is ended with its worker when the node still runs the pack's cancel_grace_ms after
  ComfyUI's Cancel: the host asks the supervisor (on the control socket,
  supervisor/bridge/host_requests.hpp), which restarts the pack at once, and the call
  raises upstream's InterruptProcessingException; the next call runs in the new life.
  So does a use of the pack's objects the host waits on outside a node call (a pack's
  CFG function or patch under the host's sampler, a function the pack returned): Cancel
  reaches the worker's interrupt checks while it serves that use, and one line names the
  pack; past the grace period its life ends, and the use raises upstream's
  InterruptProcessingException. Nested waits (a callback of the pack under the host's
  model under the pack's node...) end with that life, each as the interrupt;
- while it waits, the host's own models may be evicted at once (the prompt thread holds
  none in use), so a pack's load never waits on the host's prompt;
- returns the outputs copied out of the worker's arena (the worker could change them
  afterwards), its other objects as PackObjects; or
  raises upstream's InterruptProcessingException, upstream's OOM exception, PackNodeError
  with the worker's traceback, or PackWorkerDied naming the signal.

A session with a pack's life that breaks while the life goes on (the worker broke the
call protocol, or closed its socket) is of no more use: the host asks the supervisor to
end that life, which logs why and restarts it as after a crash.
"""

import itertools
import logging
import os
import socket
import threading
import weakref

from .. import participant as sv
from ..bridge.arena import CopiedArena, OwnArena
from ..bridge.channel import SPIN_S
from ..bridge.conversation import Conversation, use_interrupt_id
from ..bridge.session import SESSION_OPS, PeerSession
from ..bridge.values import ValueCrossingError
from ..crossing.replicas import owner as replica_owner
from ..upstream.comfyui_startup import prompt_server
from . import pack_routes
from .browser_messages import BrowserGate

log = logging.getLogger("comfy_supervisor")

CALL_WAIT_S = 60.0        # for a (re)starting worker, at a call
STOPPED_REASON = "stopped by an operator"  # how the supervisor's pack_failed begins for comfyctl stop
EXIT_NOTICE_WAIT_S = 2.0  # for the supervisor's pack_exited after a call socket closed, or its pack_failed after


class PackNodeError(RuntimeError):
    """A pack's node raised in its worker; the message carries the worker's traceback."""


class PackWorkerDied(RuntimeError):
    """A pack's worker died while it ran a node."""


class PackUnavailable(RuntimeError):
    """A pack's worker is failed, or did not start in time."""


class PackObjectError(AttributeError):
    """A host node used an object that stays in a pack's worker."""


class PackObject:
    """An object a pack's node made (a MODEL, a CLIP, a VAE...), which stays in the pack's
    worker: it goes back to nodes of the same pack, and nowhere else."""

    __slots__ = ("pack", "generation", "id", "type_name", "__weakref__")

    def __init__(self, pack, generation, handle_id, type_name):
        self.pack, self.generation, self.id, self.type_name = pack, generation, handle_id, type_name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise PackObjectError(f"a {self.type_name} made by pack {self.pack} stays in that pack's worker: "
                              f"connect it only to nodes of pack {self.pack}")

    def __repr__(self):
        return f"<{self.type_name} in pack {self.pack}'s worker (generation {self.generation}), handle {self.id}>"


class PackSession(PeerSession):
    """One life of a pack's worker, as the host sees it."""

    def __init__(self, link, sock, arena_fd, own_fd, generation):
        # The host copies what a worker hands it (bridge/session.py): ComfyUI caches outputs
        # beyond the worker's life, and the worker could write them after its node returned.
        super().__init__(sock, CopiedArena(arena_fd), OwnArena(own_fd), generation, f"pack {link.name} {generation}",
                         copy_received=True, watch=sv.word_watcher())
        self.link = link
        self.routes = None  # pack_routes.RouteClient, once the life gave a socket for its HTTP routes
        # The host serves a pack only what object_kinds lists, and only while it waits on
        # that pack (a node call, or its own use of the pack's objects): never on a thread
        # of its own between calls. Another pack's ComfyUI objects (a MODEL it patched) go
        # to this pack as the host's, each use relayed to their owner.
        self.remote = Conversation(self, f"pack {link.name}", enforce=True,
                                   accepts=lambda: link.waits_on(self), holds=lambda: link.holds_use(self),
                                   began=link.use_began,
                                   uses=replica_owner.uses(), relays=True)

    def object_handle(self, value):
        return self.link.handle_ref(value, self)

    def object_from_handle(self, handle):
        return self.link.pack_object(self, handle)

    def ended(self):
        return (f"pack {self.link.name}'s worker life {self.generation} ended, and with it what that life made: "
                "queue the prompt again to run the node that made it")

    def on_message(self, message):
        """A pack's message to the browser, sent while no call waited; or a reply that
        came after its caller stopped waiting (its worker answering a request the host
        gave up on): nothing waits for it."""
        if message.get("op") == "ui":
            self.link.browser.forward(message, self.channel.last_frame_bytes)
        else:
            self.link.answered(self, message)

    def take_routes_socket(self):
        """The socket this life sent with its description, for its HTTP routes' requests."""
        fd = self.channel.take_fd()
        try:
            sock = socket.socket(fileno=fd) if fd is not None else None
        except OSError:
            os.close(fd)
            sock = None
        if sock is None or sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
            log.error("comfy-supervisor: pack %s's worker sent no stream socket for its HTTP routes: they answer 503 "
                      "until its next life", self.link.name)
            if sock is not None:
                sock.close()
            return
        self.routes = pack_routes.RouteClient(sock)
        if self.closed.is_set():
            self.routes.close()

    def on_close(self):
        if self.routes is not None:
            self.routes.close()
        self.own.close()  # written for this life alone: nothing of it is needed any more
        self.peer.close()
        self.link.session_closed(self)


class PackLink:
    """One isolated pack: its interfaces, its worker's current life, one call at a time."""

    def __init__(self, name, bridges):
        self.name = name
        self.bridges = bridges
        self.interfaces = None     # node name -> interface, from the first life's describe
        self.folders = None        # the pack's folders (a group's several), as the supervisor's config names them
        self.web_directories = None  # each folder's WEB_DIRECTORY (relative to it) or None, from the describe
        self.routes = []           # its HTTP routes, (method, path), from the describe
        self.session = None
        self.failure = None        # why the supervisor marked the pack failed
        self.exits = {}            # generation -> the supervisor's pack_exited
        self.changed = threading.Condition()
        self.call_lock = threading.Lock()
        self.request_ids = itertools.count(1)
        self.instance_ids = itertools.count(1)
        self.handle_generation = {}  # node -> the life whose handles its last outputs held
        self.cancel_grace_s = None  # how long a node may outrun Cancel (the config's, in the packs event)
        # (session, request id, what) of the node call sent and not answered yet: the one
        # running now, or one whose caller gave up (upstream's progress hook raised at Cancel).
        self.active = None
        self.cancel_watched = None  # (session, interrupt id) of the wait a Cancel grace timer runs for
        self.cancelled = None      # the active call whose life the host had ended for outrunning Cancel
        self.held = None           # the life whose objects the node of the prompt running now used (holds_use)
        self.browser = BrowserGate(name, bridges.browser_limits)  # its messages to the browser

    # ---- the supervisor's events ----

    def started(self, session):
        with self.changed:
            self.session, self.failure = session, None
            # Only a call that died with the life before may still wait for its exit.
            if isinstance(session.generation, int):
                self.exits = {generation: event for generation, event in self.exits.items()
                              if isinstance(generation, int) and generation >= session.generation - 1}
            self.changed.notify_all()
        # Each life describes its nodes: a pack fixed and retried, or changed, comes back
        # with what it has now (Bridges.register_late).
        threading.Thread(target=self.describe, name=f"describe {self.name}", daemon=True).start()

    def describe(self):
        try:
            session, reply = self.request({"op": "describe"}, "its interfaces", with_session=True)
        except (PackUnavailable, PackWorkerDied) as error:
            log.error("comfy-supervisor: %s", error)
            return
        if reply.get("routes_socket") is True:
            session.take_routes_socket()
        nodes = reply.get("nodes")
        if not isinstance(nodes, dict):
            # Settled all the same: ComfyUI's start must not wait for it.
            log.error("comfy-supervisor: pack %s described its nodes as %s, not a dict: none is registered",
                      self.name, type(nodes).__name__)
            nodes = {}
        routes = pack_routes.checked_routes(reply.get("routes"))
        with self.changed:
            changed = nodes != self.interfaces or routes != self.routes
            self.interfaces, self.routes = nodes, routes
            self.web_directories = reply.get("web_directories")
            self.changed.notify_all()
        if changed:
            self.bridges.register_late(self)

    def web_files(self):
        """The folders of the pack's front-end files, for ComfyUI to serve as it serves a local
        pack's WEB_DIRECTORY, by the name of the pack folder each belongs to (a group's packs
        each have theirs). Each pack folder is the config's, and the worker's WEB_DIRECTORY for
        it may only name a directory inside it: the host opens no path a worker chose."""
        if not isinstance(self.folders, list) or not isinstance(self.web_directories, list):
            return {}
        served = {}
        for folder, web_directory in zip(self.folders, self.web_directories):
            if not isinstance(folder, str) or not isinstance(web_directory, str):
                continue
            pack = os.path.realpath(folder)
            web = os.path.realpath(os.path.join(pack, web_directory[:4096]))
            if not web.startswith(pack + os.sep) or not os.path.isdir(web):
                log.warning("comfy-supervisor: pack %s's WEB_DIRECTORY %r is not a folder inside %s: its front-end "
                            "files are not served", self.name, web_directory[:200], pack)
                continue
            served[os.path.basename(pack)] = web
        return served

    def exited(self, event):
        with self.changed:
            self.exits[event.get("generation")] = event
            self.changed.notify_all()
        session = self.session
        if session is not None and session.generation == event.get("generation"):
            session.close()  # its socket says so too, but nobody may be reading it now

    def failed(self, reason):
        with self.changed:
            self.failure = str(reason)
            self.changed.notify_all()
        log.error("comfy-supervisor: %s: its nodes cannot run", self.unavailable())

    def why_not_running(self):
        """Why no life of it answers now, in a few words."""
        if self.failure is not None:
            return self.unavailable()
        return f"pack {self.name}'s worker is starting"

    def unavailable(self):
        """Why its nodes cannot run, and what brings them back."""
        # The supervisor's reason for a pack an operator stopped says how to start it;
        # retry restarts failed packs only.
        if self.failure.startswith(STOPPED_REASON):
            return f"pack {self.name} is {self.failure}"
        return f"pack {self.name} is failed ({self.failure}): fix it, then comfyctl retry {self.name}"

    def session_closed(self, session):
        with self.changed:
            if self.session is session:
                self.session = None
            active = self.active
            if active is not None and active[0] is session:
                self.active = None
            exited = session.generation in self.exits
            self.changed.notify_all()
        if session.protocol_error:
            self.bridges.end_life(self.name, session.generation, "broken_session",
                                  f"it broke the call protocol ({session.protocol_error})")
        elif not exited:
            threading.Thread(target=self.end_if_alive, args=(session,), name=f"{self.name} session end",
                             daemon=True).start()

    def end_if_alive(self, session):
        """The session's socket closed with no word of its life's exit: a worker that died
        is announced within EXIT_NOTICE_WAIT_S; one that closed its socket and lives on
        can run no more calls of this host, and the supervisor is asked to end it."""
        with self.changed:
            if self.changed.wait_for(lambda: session.generation in self.exits, timeout=EXIT_NOTICE_WAIT_S):
                return
        self.bridges.end_life(self.name, session.generation, "broken_session",
                              "it closed its call socket and lives on")

    def settled(self):
        """Its interfaces are known, or it failed: ComfyUI need not wait for it."""
        return self.interfaces is not None or self.failure is not None

    # ---- calls ----

    def current_session(self, timeout_s):
        session = self.session
        if session is not None and not session.closed.is_set() and self.failure is None:
            return session  # the usual case, without the condition's lock
        with self.changed:
            ready = self.changed.wait_for(lambda: self.failure is not None or
                                          (self.session is not None and not self.session.closed.is_set()),
                                          timeout=timeout_s)
            if self.failure is not None:
                raise PackUnavailable(self.unavailable())
            if not ready:
                raise PackUnavailable(f"pack {self.name}'s worker did not start within {timeout_s:.0f} s: "
                                      "see the supervisor's log")
            return self.session

    def ready_session(self):
        """The current life, once it answered the node call whose caller gave up on it
        (upstream's progress hook raised at Cancel while the node ran on): the worker runs
        one call at a time, so the next would only wait behind it. If that node outruns
        the Cancel's grace period its life is ended, and the next call runs in the new one."""
        while True:
            session = self.current_session(CALL_WAIT_S)
            active = self.active
            if active is None or active[0] is not session:
                return session
            with session.read_lock:
                try:
                    self.await_reply(session, active[1], active[2], current=False)
                except PackWorkerDied:
                    pass  # that life ended: the loop waits for the next

    def request(self, message, what, with_session=False):
        """A request other than a node call, answered by one reply (and the life that
        answered it, `with_session`)."""
        with self.call_lock:
            session = self.ready_session()
            message["id"] = next(self.request_ids)
            with session.read_lock:
                session.send(message)
                reply = self.await_reply(session, message["id"], what, current=False)
                session.settle()  # the releases that came with it (bridge/session.py)
                return (session, reply) if with_session else reply

    def call(self, node, kind, inputs, instance=None):
        with self.call_lock:
            session = self.ready_session()
            encoded, encoder = session.encode(inputs)
            message = {"op": "call", "id": next(self.request_ids), "node": node, "kind": kind, "inputs": encoded,
                       "epoch": self.bridges.epoch(), "instance": instance, **prompt_context()}
            session.lend(encoder)
            with self.bridges.waiting(), session.read_lock:
                session.send(message)
                reply = self.await_reply(session, message["id"], f"node {node}")
                if reply["op"] == "result":
                    # Still reading: no release of a block the reply sends back is read before.
                    return self.outputs(session, node, reply.get("value"))
            raise self.error_of(self.bridges.mm, node, reply)

    def await_reply(self, session, request_id, what, current=True):
        """The reply to `request_id`, read from the call socket by this thread (holding
        the session's read_lock). The call this thread makes now (`current`) is the
        active one: it takes ComfyUI's interrupts meanwhile (interrupt()), and the
        worker's progress drives a ProgressBar on the way."""
        progress = None
        if current:
            self.active = (session, request_id, what)  # one store: interrupt() reads it from any thread
            if self.bridges.mm.processing_interrupted():  # set before the call began
                self.interrupt()
        while True:
            reply = session.next_message(None, SPIN_S)
            if not reply:
                raise self.died(session, request_id, what, current)
            if reply.get("op") in SESSION_OPS or reply.get("op") == "ui":
                session.dispatch(reply)  # a "ui" message goes on to the browser (on_message)
            elif reply.get("id") != request_id:
                self.answered(session, reply)  # a reply to a request given up on
            elif reply.get("op") == "progress":
                if current:
                    progress = self.progress(progress, reply)
            else:
                self.answered(session, reply)
                return reply

    def answered(self, session, reply):
        """`reply` from `session` ends the active call if it is its result or error."""
        active = self.active
        if active is not None and active[0] is session and active[1] == reply.get("id") and \
                reply.get("op") in ("result", "error"):
            self.active = None

    def interrupt(self):
        """ComfyUI's interrupt, to what the host waits on in this pack now, if anything: the
        node call running now, else the newest use of the pack's objects (a callback), the
        nested ones within it included. Through the interrupt word of the arena the host
        writes for that life, which its interrupt checks read; and the pack's grace period
        starts, after which what still runs is ended with its worker."""
        active = self.active
        if active is not None:
            active[0].own.interrupt(active[1])
            self.watch_cancel(active, lambda: self.active is active, "cancel")
            return
        session = self.session
        waited = session.remote.newest_wait() if session is not None else None
        if waited is not None:
            call, what = waited
            use = (session, use_interrupt_id(call), f"callback {what}")
            session.own.interrupt(use[1])
            if self.watch_cancel(use, lambda: session.remote.waits_on(call), "cancel_callback"):
                log.warning("comfy-supervisor: pack %s: ComfyUI's Cancel reached its callback (%s); it has %.0f ms to "
                            "end before its worker is ended", self.name, what, self.cancel_grace_s * 1000)

    def holds_use(self, session):
        """Whether the use of `session`'s objects sent now is held (bridge/conversation.py):
        a node of the prompt makes it (Bridges.node_running), outside a node call of this
        pack, whose own end ends the worker's busy stretch. The node's end then tells the
        worker (uses_done), which serves the node's uses as one stretch."""
        if not self.bridges.in_node:
            return False
        active = self.active
        if active is not None and active[0] is session:
            return False
        self.held = session
        return True

    def uses_done(self):
        """The node of the prompt that held uses of this pack's objects ended: its worker is told."""
        session, self.held = self.held, None
        if session is not None and not session.closed.is_set() and not session.send({"op": "uses_done"}):
            session.close()

    def use_began(self):
        """A use of the pack's objects was sent: a Cancel that came before reaches it too,
        as a node call's does."""
        if self.bridges.mm.processing_interrupted():
            self.interrupt()

    def watch_cancel(self, waited, running, cause):
        """Ends `waited` (session, interrupt id, what) with its life if `running()` still
        says so after the grace period; whether a timer started (not for a second Cancel of
        the same wait, nor with a supervisor that has no grace setting)."""
        grace = self.cancel_grace_s
        if grace is None or self.cancel_watched == waited[:2]:
            return False
        self.cancel_watched = waited[:2]
        timer = threading.Timer(grace, self.cancel_overdue, args=(waited, running, cause))
        timer.daemon = True
        timer.start()
        return True

    def cancel_overdue(self, waited, running, cause):
        if not running():
            return  # answered within the grace period
        session = waited[0]
        session.ended_at_cancel = True  # every wait on that life, however nested, is interrupted
        self.cancelled = waited
        self.bridges.end_life(self.name, session.generation, cause, waited[2])

    @staticmethod
    def progress(bar, reply):
        value, total = reply.get("value"), reply.get("total")
        if not all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in (value, total)):
            return bar
        import comfy.utils
        if bar is None:
            bar = comfy.utils.ProgressBar(total)
        bar.update_absolute(value, total)
        return bar

    def died(self, session, request_id, what, current):
        """What the call `request_id` raises when its session ended before its reply."""
        cancelled = self.cancelled
        if current and cancelled is not None and cancelled[0] is session and cancelled[1] == request_id:
            # Ended for outrunning ComfyUI's Cancel: as upstream's own check raises it.
            self.bridges.mm.throw_exception_if_processing_interrupted()
            return self.bridges.mm.InterruptProcessingException()
        if session.protocol_error:
            return PackWorkerDied(f"pack {self.name}'s worker broke the call protocol during {what} "
                                  f"({session.protocol_error}); the supervisor restarts it: queue the prompt again")
        with self.changed:
            self.changed.wait_for(lambda: session.generation in self.exits, timeout=EXIT_NOTICE_WAIT_S)
            event = self.exits.get(session.generation, {})
            # The supervisor decided before it told the exit whether it restarts the pack; one
            # it does not is said failed (or stopped) right after, in the same turn, but at
            # its shutdown: that notice is on its way.
            restarts = event.get("restarts") is not False
            if not restarts:
                self.changed.wait_for(lambda: self.failure is not None, timeout=EXIT_NOTICE_WAIT_S)
            failure = self.failure
        reason = str(event.get("reason") or "its call socket closed")
        if failure is not None:
            return PackWorkerDied(f"pack {self.name}'s worker died during {what} ({reason}), and "
                                  f"{self.unavailable().removeprefix(f'pack {self.name} ')}")
        if not restarts:
            return PackWorkerDied(f"pack {self.name}'s worker died during {what} ({reason}), and the supervisor "
                                  "does not restart it: see the supervisor's log")
        return PackWorkerDied(f"pack {self.name}'s worker died during {what} ({reason}); the supervisor "
                              "restarts it: queue the prompt again")

    def outputs(self, session, node, value):
        made_here = []

        def resolve(handle):
            made_here.append(True)
            return self.pack_object(session, handle)

        proxies_before = session.remote.made
        try:
            result = session.decoder(resolve).decode(value)
        except ValueCrossingError as error:
            raise PackNodeError(f"pack {self.name}'s node {node} returned {error}") from None
        # Outputs that hold handles or the pack's remote objects die with this life: IS_CHANGED
        # then names the life, so ComfyUI runs the node again rather than reuse them.
        made_here = made_here or session.remote.made > proxies_before
        self.handle_generation[node] = session.generation if made_here else None
        session.call_done()  # the result decoded: releases applied and sent (bridge/session.py)
        return result

    def pack_object(self, session, handle):
        obj = PackObject(self.name, session.generation, handle.get("id"), str(handle.get("type"))[:80])
        weakref.finalize(obj, session.releases.push, "handles", handle.get("id"))
        return obj

    def waits_on(self, session):
        """The host waits on `session` now: a node call of it runs, or a use of its objects."""
        active = self.active
        return (active is not None and active[0] is session) or bool(session.remote.waits)

    def error_of(self, mm, node, reply):
        kind, text = str(reply.get("type"))[:80], str(reply.get("message"))
        if reply.get("interrupted"):
            mm.throw_exception_if_processing_interrupted()
            return mm.InterruptProcessingException()
        where = f"(in pack {self.name}'s worker, node {node})"
        if reply.get("oom"):
            return mm.OOM_EXCEPTION(f"{text} {where}")
        return PackNodeError(f"{kind}: {text} {where}\nThe worker's traceback:\n{reply.get('traceback', '')}")

    def handle_ref(self, value, session):
        if isinstance(value, PackObject):
            if value.pack != self.name:
                raise ValueCrossingError(f"a {value.type_name} made by pack {value.pack} cannot go to pack "
                                         f"{self.name}: connect it only to nodes of pack {value.pack}, or run the "
                                         "two as one group (list both packs' folders in one entry's \"pack\")")
            if value.generation != session.generation:
                raise ValueCrossingError(f"the {value.type_name} made by pack {self.name} was lost when its worker "
                                         "restarted: run the node that made it again")
            return {"$": "handle", "id": value.id}
        raise ValueCrossingError(f"a {type(value).__name__} cannot cross into pack {self.name}'s worker: only "
                                 "tensors, plain values, ComfyUI's models and functions (as remote objects) and "
                                 f"objects that nodes of {self.name} made can")

    def forget_instance(self, instance):
        session = self.session
        if session is not None:
            session.releases.push("instances", instance)

    def stats(self):
        """The worker's figures (its arena's bytes in use, what the host holds of it)."""
        return self.request({"op": "stats"}, "its figures")


def one_line(error):
    text = str(error)
    return text.splitlines()[0][:200] if text else type(error).__name__


def prompt_context():
    """Which browser and node the prompt runs for now (upstream's PromptServer knows), so
    that a pack's messages to the browser go where they would in one process."""
    server = prompt_server()
    if server is None:
        return {}
    return {"client_id": getattr(server, "client_id", None), "node_id": getattr(server, "last_node_id", None)}
