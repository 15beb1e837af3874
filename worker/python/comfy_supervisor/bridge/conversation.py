"""A session's remote objects and the calls on them, both ways (docs/PACKS.md, "Remote
objects"; the objects themselves are bridge/remote.py's).

Each side of a session keeps one Conversation: the objects of its own it handed the peer
(Exports, by id), the proxies that stand for the peer's here (one per peer id while it
lives), and the uses of those proxies waiting for their answers.

A use is {"op": "invoke", "call", "id", "do", "name", "payload"}, or {"op": "invoke",
"call", "function", "payload"} for one of the rules' functions (bridge/rules.py) given a
remote object, and is answered by {"op": "invoked", "call", "value"} or {"op": "invoked",
"call", "error": {...}}. The payload is [args, kwargs, value], encoded as any value is
(bridge/values.py). A use carries "held": true where its maker will say when the run of
uses it belongs to ended, with {"op": "uses_done"} (the host, at the end of the node of its
prompt that made them): the peer serves the run as one busy stretch, however long the
pauses between uses. The thread that waits for an answer reads the call socket itself
(it holds the session's reading lock, taken again where it held it already) and serves
the peer's uses meanwhile: a pack's attention patch that the host's sampler calls, and
that calls the host's model in turn, nests as it would in one process. A thread that
cannot read (another reads) waits for the reader to hand it its answer.

Errors cross by their type's name and message, never as objects: an AttributeError stays
one (hasattr works across), an interrupt is upstream's InterruptProcessingException, an
out-of-memory error upstream's OOM exception (the rules' errors), anything else a
RemoteCallError with the owner's traceback.

ComfyUI's Cancel reaches a use as it reaches a node call: the waiting side names the use
in the interrupt word of the arena it writes for the peer (use_interrupt_id), where the
peer's interrupt checks read it while they serve that use; a use that outruns its grace
period ends with the peer's life (host/proxy_nodes.py), and whatever waited on that life
raises upstream's InterruptProcessingException (ended_at_cancel), not "gone".
"""

import importlib
import itertools
import sys
import threading
import traceback
import weakref

from . import rules
from .channel import SPIN_S
from .remote import Exports, Link, RemoteError, export_kind, kind_named, link_of, make_proxy, serve, type_path_of
from .values import ValueCrossingError

# Errors that cross as themselves: code on the other side tests for them (hasattr,
# getattr with a default, a KeyError caught).
_SAME_ERRORS = {error.__name__: error for error in (AttributeError, KeyError, IndexError, TypeError, ValueError,
                                                    NotImplementedError)}
_WAIT_SLICE_S = 0.05
# The interrupt word holds a node call's id or, with this bit, a use's call number: the
# two counts never meet (node call ids would need 2**31 calls of one pack life).
_USE_BIT = 1 << 31


def use_interrupt_id(call):
    """What the interrupt word holds to stop the peer's serving of our use `call`."""
    return _USE_BIT | (call & (_USE_BIT - 1))


class RemoteCallError(RuntimeError):
    """A use of a remote object raised on its owner's side; the message carries its traceback."""


class Conversation:
    """`session`: the PeerSession; `peer`: who owns the proxies here, for messages ("the
    host", "pack impact"); `enforce`: serve the peer only what object_kinds lists (the
    host serving a pack); `may_invoke()`: whether this side may use the peer's objects
    now; `accepts()`: whether the peer may use ours now; `serving(held)`: called before
    each use of ours is served (the worker: busy to the memory integration, as during a
    node), `held` whether the peer holds it (below); `holds()`: whether our use sent now is
    held, one of a conversation whose end we will tell the peer ("uses_done": the host,
    for the uses a node of its prompt makes); `began()`: called once each use of ours is
    sent, before its answer is awaited (the host: a Cancel that came before it reaches it
    too); `relays`: another peer's remote object crosses to this one as ours, its uses
    served by asking its owner (the host, between packs)."""

    def __init__(self, session, peer, enforce, may_invoke=lambda: True, accepts=lambda: True,
                 serving=lambda held: None, holds=lambda: False, began=lambda: None, replicas=None, uses=None,
                 relays=False):
        rules.check_installed()  # without them, ComfyUI's objects would cross as mere handles
        self.session = session
        # The pack's side: (replica_for, origin_of) of crossing/replicas. An object of the
        # peer's arrives as its replica where its kind has one, and a replica as handed over
        # goes back as the peer's own.
        self.replicas = replicas
        # The host's side: uses of its objects beyond object_kinds' (a replica's recipe and
        # loads, crossing/replicas/owner.py): use -> fn(object, kind, args, conversation),
        # and "closed" -> fn(conversation) once the session ended.
        self.uses = dict(uses or {})
        self.relays = relays
        self.peer = peer
        self.enforce = enforce
        self.may_invoke = may_invoke
        self.accepts = accepts
        self.before_serving = serving
        self.holds = holds
        self.began = began
        self.exports = Exports()
        self.proxies = {}           # the peer's id -> (weak reference to its proxy here, [times received])
        # Reentrant: a proxy's finalizer takes it, and the collector may run one at any
        # allocation of the thread that holds it (making a proxy imports upstream's module).
        self.proxies_lock = threading.RLock()
        self.answers = {}           # call -> its answer, None until it came
        self.answered = threading.Condition()
        self.calls = itertools.count(1)
        self.waits = {}             # our uses of the peer's objects waiting now: call -> what, for messages
        self.served = []            # the peer's calls of its uses of ours served now, innermost last
        self.made = 0               # proxies made so far (the host: outputs that hold them die with the life)

    # ---- values ----

    def tag_of(self, value):
        """The wire tag of a remote object, or None for a value that is not one."""
        origin = self.replicas[1](value) if self.replicas is not None else None
        link = link_of(value if origin is None else origin)
        if link is not None and link.session is self:
            return {"$": "own", "id": link.id}
        if link is not None:
            if link.session.session.closed.is_set():
                raise ValueCrossingError(link.session.gone(link.describe()))
            if not self.relays:
                raise ValueCrossingError(f"{link.describe()} cannot go to {self.session.name.rsplit(' ', 1)[0]}: "
                                         f"connect it only to nodes of {link.owner}")
            # Another pack's MODEL (or function...) into this pack: the proxy is ours to lend,
            # as any object of its kind, and each use of it is its owner's, asked by us.
        kind = export_kind(value, self.enforce and self.peer)  # to a pack: only what it may have
        if kind is None:
            return None
        return {"$": "remote", "id": self.exports.export(value, kind), "kind": kind.name,
                "type": type_path_of(value)[:200]}

    def resolve(self, tag):
        """The object a remote or own tag stands for here."""
        number = tag.get("id")
        if tag.get("$") == "own":
            try:
                return self.exports.get(number)[0]
            except RemoteError as error:
                raise ValueCrossingError(str(error)) from None
        if type(number) is not int:
            raise ValueCrossingError("a remote object without its id")
        try:
            kind = kind_named(tag.get("kind"))
        except RemoteError as error:
            raise ValueCrossingError(str(error)) from None
        with self.proxies_lock:
            known = self.proxies.get(number)
            proxy = known[0]() if known is not None else None
            if proxy is None:
                receipts = [0]
                proxy = make_proxy(Link(self, number, kind, str(tag.get("type"))[:200], self.peer))
                self.proxies[number] = (weakref.ref(proxy), receipts)
                weakref.finalize(proxy, self._proxy_gone, number, receipts)
            else:
                receipts = known[1]
            receipts[0] += 1
            self.made += 1
        return proxy

    def arrived(self, value, depth=0):
        """`value` as this side's code gets it: on the pack's side, each of the peer's objects
        in it (in its lists, tuples and dicts) its replica, where its kind has one. Called
        where a use may be made (a node's inputs, a use's answer, the arguments of the
        peer's use of ours), never while a message is decoded."""
        if self.replicas is None or depth > 4:
            return value
        link = link_of(value)
        if link is not None:
            return self.replicas[0](value)
        if type(value) is list:
            return [self.arrived(item, depth + 1) for item in value]
        if type(value) is tuple:
            return tuple(self.arrived(item, depth + 1) for item in value)
        if type(value) is dict:
            return {key: self.arrived(item, depth + 1) for key, item in value.items()}
        return value

    def _proxy_gone(self, number, receipts):
        with self.proxies_lock:
            known = self.proxies.get(number)
            if known is not None and known[1] is receipts:
                del self.proxies[number]
        self.session.releases.push("objects", [number, receipts[0]])

    # ---- our uses of the peer's objects ----

    def invoke(self, link, do, name, args, kwargs, value):
        """A use of the peer's object `link` stands for."""
        what = f"{name} of {link.describe()}"
        return self._request({"id": link.id, "do": do, "name": name}, [args, kwargs, value], what)

    def call_function(self, name, args, kwargs):
        """The peer's own `name` (one of the rules' functions) with our proxies of its objects."""
        return self._request({"function": name}, [list(args), dict(kwargs), None], f"{name} in {self.peer}")

    def _request(self, fields, payload, what):
        session = self.session
        if session.closed.is_set():
            raise RemoteError(self.gone(what))
        if not self.may_invoke():
            raise RemoteError(f"{what} can be used only while {self.peer} waits on this worker (during a node "
                              "call): keep it from other threads and from after the node returned")
        encoded, encoder = session.encode(payload)
        call = next(self.calls)
        with self.answered:
            self.answers[call] = None
            self.waits[call] = what
        session.lend(encoder)
        message = {"op": "invoke", "call": call, **fields, "payload": encoded}
        if self.holds():
            message["held"] = True
        try:
            if not session.send(message):
                session.close()
            self.began()
            answer = self._await(call, what)
        finally:
            with self.answered:
                self.answers.pop(call, None)
                self.waits.pop(call, None)
        outcome, detail = answer
        if outcome == "error":
            raise self.error_of(detail, what)
        if outcome == "malformed":
            raise RemoteError(f"{what} answered {detail}")
        return self.arrived(detail) if fields.get("do") not in _ANSWERS_AS_THEY_ARE else detail

    def _await(self, call, what):
        session = self.session
        while True:
            with self.answered:
                answer = self.answers.get(call)
                if answer is not None:
                    return answer
            if session.closed.is_set():
                raise self.ended_error(what)
            if session.read_lock.acquire(blocking=False):
                try:
                    while self.answers.get(call) is None:
                        message = session.next_message(None, SPIN_S)
                        if not message:
                            break
                        session.dispatch(message)
                finally:
                    session.read_lock.release()
            else:
                with self.answered:
                    self.answered.wait_for(lambda: self.answers.get(call) is not None or session.closed.is_set(),
                                           timeout=_WAIT_SLICE_S)

    def gone(self, what):
        return f"{what} is gone: {self.session.ended()}"

    def ended_error(self, what):
        """What a use raises whose peer's life ended before it answered: upstream's
        InterruptProcessingException where the life was ended for outrunning ComfyUI's
        Cancel (the flag spent, as upstream's own check spends it), else RemoteError."""
        interrupt = rules.errors.interrupt(set_flag=False) if self.session.ended_at_cancel else None
        return RemoteError(self.gone(what)) if interrupt is None else interrupt

    def newest_wait(self):
        """(call, what) of the newest of our uses that waits for its answer now, or None."""
        with self.answered:
            return max(self.waits.items(), default=None)

    def waits_on(self, call):
        """Whether our use `call` still waits for its answer."""
        return call in self.waits

    def error_of(self, error, what):
        error = error if isinstance(error, dict) else {}
        kind, text = str(error.get("type"))[:80], str(error.get("message"))[:2000]
        # As upstream's own check raises it here: the flag set (every wait on a pack hears
        # it), then spent by the raise.
        interrupt = rules.errors.interrupt(set_flag=True) if error.get("interrupted") else None
        if interrupt is not None:
            return interrupt
        where = f"(in {self.peer}, {what})"
        oom = rules.errors.oom_type() if error.get("oom") else None
        if oom is not None:
            return oom(f"{text} {where}")
        if kind in _SAME_ERRORS:
            return _SAME_ERRORS[kind](f"{text} {where}")
        if kind == "RemoteError":
            return RemoteError(text)
        return RemoteCallError(f"{kind}: {text.splitlines()[0] if text else ''} {where}\n"
                               f"{str(error.get('traceback'))[:20000]}")

    # ---- the peer's uses of ours ----

    def on_invoke(self, message):
        call = message.get("call")
        self.served.append(call)
        try:
            if not self.accepts():
                raise RemoteError(f"{self.peer} used an object while no call waited on it")
            self.before_serving(message.get("held") is True)
            result = self._serve(message)
            value, encoder = self.session.encode(result)
            self.session.lend(encoder)
            answer = {"op": "invoked", "call": call, "value": value}
        except Exception as error:  # noqa: BLE001 (whatever the use raised is the answer)
            # A read of a name the object lacks is hasattr's question, asked of a pack's
            # patches once per sampling run for each: its answer needs no traceback, which
            # took 0.5-1 ms to format.
            missing = message.get("do") == "get" and isinstance(error, AttributeError)
            answer = {"op": "invoked", "call": call, "error": error_fields(error, with_traceback=not missing)}
        finally:
            self.served.remove(call)
        if not self.session.send(answer):
            self.session.close()

    def _serve(self, message):
        payload = message.get("payload")
        if not (isinstance(payload, list) and len(payload) == 3):
            raise RemoteError("a use of a remote object without its arguments")
        function = message.get("function")
        target = kind = None
        if function is not None:
            if function not in rules.functions:
                raise RemoteError(f"{str(function)[:80]!r} is not a function another process may call here; those "
                                  "are listed in comfy_supervisor.crossing.functions.FUNCTIONS")
        else:
            target, kind = self.exports.get(message.get("id"))
        args, kwargs, value = self.arrived(self.session.decoder().decode(payload))
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise RemoteError("a use of a remote object whose arguments are not a list and a dict")
        if function is not None:
            module, _, name = function.rpartition(".")
            return getattr(importlib.import_module(module), name)(*args, **kwargs)
        if message.get("do") == "mirror":
            return self.session.grants.grant(target, kind, message.get("name"))
        use = self.uses.get(message.get("do")) if message.get("do") != "closed" else None
        if use is not None:
            return use(target, kind, args, self)
        return serve(target, kind, message.get("do"), message.get("name"), args, kwargs, value,
                     self.enforce and self.peer)

    def on_invoked(self, message):
        """An answer, decoded by the thread that read it (holding the reading lock: a
        release the peer sent after it, of a block the answer hands back to us, is not
        read before we hold the block), for the thread that waits for it."""
        call = message.get("call")
        with self.answered:
            if call not in self.answers or self.answers[call] is not None:
                return  # an answer nobody asked for: nothing of it is used
        if "error" in message:
            outcome = ("error", message["error"])
        else:
            try:
                outcome = ("value", self.session.decoder().decode(message.get("value")))
            except ValueCrossingError as error:
                outcome = ("malformed", str(error))
        with self.answered:
            self.answers[call] = outcome
            self.answered.notify_all()

    def on_release(self, receipts):
        self.exports.release(receipts if isinstance(receipts, list) else ())

    def close(self):
        """The session ended: what we handed over is ours alone, and every waiting use hears it."""
        if "closed" in self.uses:
            self.uses["closed"](self)
        self.exports.clear()
        with self.answered:
            self.answered.notify_all()


# Uses whose answers are the replica's own material, kept as the peer's objects: a recipe's
# object patches are the host's objects as upstream set them, never replicas.
_ANSWERS_AS_THEY_ARE = ("replica", "mirror", "replica_mirror")


def error_fields(error, with_traceback=True):
    """What an error crosses as."""
    interrupted = rules.errors.is_interrupt(error)
    oom_types = tuple(t for t in (rules.errors.oom_type(),
                                  getattr(getattr(sys.modules.get("torch"), "cuda", None), "OutOfMemoryError", None))
                      if isinstance(t, type) and t is not Exception)
    return {"type": type(error).__name__, "message": str(error), "interrupted": interrupted,
            "oom": bool(oom_types) and isinstance(error, oom_types),
            "traceback": "" if interrupted or not with_traceback else "".join(traceback.format_exception(error))}
