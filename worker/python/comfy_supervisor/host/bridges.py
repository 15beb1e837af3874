"""The host's side of every isolated pack (docs/PACKS.md), fed by the supervisor's bridge
control socket: which packs run in workers (packs), each life's call socket and arenas
(pack_started), their exits and failures (pack_exited, pack_failed), each a PackLink
(proxy_nodes.py). At ComfyUI's start it waits for each pack's node interfaces
(PACK_WAIT_S) and gives upstream their proxy classes; a pack described later registers
then, without a restart (register_late). It wraps upstream's interrupt so that a pack's
running node hears Cancel as it happens, and asks the supervisor to end a life whose
session broke (end_life).
"""

import contextlib
import json
import logging
import os
import socket
import sys
import threading
import time

from .. import crossing
from ..bridge.channel import control_socket, receive_control
from .browser_messages import Limits
from ..upstream.comfyui_startup import prompt_server
from .node_interfaces import proxy_class
from .pack_routes import PackRoutes
from .proxy_nodes import PackLink, PackSession, one_line

log = logging.getLogger("comfy_supervisor")

PACK_WAIT_S = float(os.environ.get("COMFY_SV_PACK_WAIT_S", "120"))  # for interfaces at ComfyUI's start
MAX_REQUEST_DETAIL = 200  # what a request to the supervisor says of its cause, at most


class Bridges:
    """The host's side of every isolated pack, fed by the bridge control socket."""

    def __init__(self, control, memory):
        self.control = control
        self.memory = memory       # comfyui._Host, for the prompt epoch and evictions while waiting
        self.links = {}            # pack name -> PackLink
        self.listed = False        # the supervisor's packs message came
        # pack name -> (the interfaces registered, their node names), once ComfyUI took its start's (proxy_nodes)
        self.registered = None
        self.routes = PackRoutes()     # the packs' HTTP routes given to ComfyUI's server
        self.browser_limits = Limits()  # on the packs' messages to the browser, as the packs message says
        self.changed = threading.Condition()
        self.in_node = False       # a node of the prompt runs (node_running)
        import comfy.model_management as mm
        self.mm = mm               # upstream's, for its interrupt flag and its exceptions

    @classmethod
    def start(cls, memory):
        control = control_socket()
        if control is None:
            return None
        crossing.install()  # what of ComfyUI crosses to a pack, and how: before any pack's session
        bridges = cls(control, memory)
        threading.Thread(target=bridges.take_events, name="bridge control", daemon=True).start()
        bridges.hear_interrupts()
        return bridges

    def hear_interrupts(self):
        """Wraps upstream's interrupt_current_processing (the UI's Cancel, POST /interrupt),
        so a pack's running node hears it as it happens, not at a poll."""
        mm = self.mm
        original = mm.interrupt_current_processing

        def interrupt_current_processing(value=True):
            original(value)
            if value:
                self.interrupt()

        mm.interrupt_current_processing = interrupt_current_processing

    def epoch(self):
        return self.memory.epoch if self.memory is not None else 0

    def waiting(self):
        return self.memory.waiting_outside_upstream() if self.memory is not None else contextlib.nullcontext()

    @contextlib.contextmanager
    def node_running(self):
        """A node of the prompt runs (upstream's execution.execute, wrapped by
        comfyui.install): the uses of packs' objects it makes are held (PackLink.holds_use),
        and its end tells each pack whose objects it used, so that the pack's worker serves
        them as one busy stretch however long the node takes between two of them."""
        self.in_node = True
        try:
            yield
        finally:
            self.in_node = False
            for link in list(self.links.values()):
                link.uses_done()

    def link(self, name):
        with self.changed:
            if name not in self.links:
                self.links[name] = PackLink(name, self)
            return self.links[name]

    def take_events(self):
        while True:
            received = receive_control(self.control, {"pack_started": 3})
            if received is None:
                return
            event, fds = received
            kind, name = event["event"], event.get("pack")
            if kind == "packs":
                self.browser_limits = Limits.from_event(event.get("browser_messages"))
                for link in list(self.links.values()):
                    link.browser.set_limits(self.browser_limits)
                for pack in event.get("packs") or ():
                    link = self.link(str(pack.get("name")))
                    link.folders = pack.get("folders")
                    grace = pack.get("cancel_grace_ms")
                    if type(grace) is int and grace >= 0:
                        link.cancel_grace_s = grace / 1000
                with self.changed:
                    self.listed = True
                    self.changed.notify_all()
            elif kind == "pack_started" and isinstance(name, str):
                link = self.link(name)
                link.started(PackSession(link, self.socket_of(fds[0]), fds[1], fds[2], event.get("generation")))
            elif kind == "pack_exited" and isinstance(name, str):
                self.link(name).exited(event)
            elif kind == "pack_failed" and isinstance(name, str):
                self.link(name).failed(event.get("reason"))

    @staticmethod
    def socket_of(fd):
        import socket
        return socket.socket(fileno=fd)

    def interrupt(self):
        """Upstream's interrupt_current_processing(True) happened: every running call hears it."""
        for link in list(self.links.values()):
            link.interrupt()

    def end_life(self, pack, generation, cause, detail):
        """Asks the supervisor to end `pack`'s life `generation` (`cause` "cancel" or
        "broken_session", supervisor/bridge/host_requests.hpp); it logs why, in its words
        and `detail`'s, and answers with pack_exited."""
        request = {"request": "end_pack", "pack": pack, "generation": generation, "cause": cause,
                   "detail": str(detail)[:MAX_REQUEST_DETAIL]}
        try:
            self.control.send(json.dumps(request).encode(), socket.MSG_DONTWAIT)
        except OSError as error:
            log.error("comfy-supervisor: cannot ask the supervisor to end pack %s's worker (%s): %s", pack, detail,
                      error)

    def drain_idle(self):
        """What the packs' workers sent while no call waited (their releases of the host's
        blocks): the command thread calls this every period."""
        for link in list(self.links.values()):
            session = link.session
            if session is not None:
                session.drain_available()

    def wait_for_packs(self, timeout_s=PACK_WAIT_S):
        """Waits until every isolated pack described its nodes or failed; names the rest."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            self.changed.wait_for(lambda: self.listed, timeout=timeout_s)
            links = list(self.links.values())
        for link in links:
            with link.changed:
                link.changed.wait_for(link.settled, timeout=max(0.0, deadline - time.monotonic()))
            if not link.settled():
                log.error("comfy-supervisor: pack %s did not describe its nodes within %.0f s: ComfyUI starts "
                          "without them, and they register once its worker describes them", link.name, timeout_s)
        return [link for link in links if link.interfaces is not None]

    def proxy_nodes(self, timeout_s=PACK_WAIT_S):
        """NODE_CLASS_MAPPINGS and NODE_DISPLAY_NAME_MAPPINGS of every isolated pack's nodes,
        for ComfyUI's start; a pack described later registers then (register_late)."""
        classes, names, registered = {}, {}, {}
        server = prompt_server()
        self.routes.serve_late(server)
        for link in self.wait_for_packs(timeout_s):
            self.serve_front_end(link)
            self.routes.register(link, server)
            interfaces = link.interfaces
            found, found_names = self.classes_of(link, interfaces)
            classes.update(found)
            names.update(found_names)
            registered[link.name] = (interfaces, set(found))
        with self.changed:
            self.registered = registered
        log.info("comfy-supervisor: %s of %s registered", _counted(len(classes), "node"),
                 _counted(len(self.links), "isolated pack"))
        # What was described meanwhile, or came after the wait, registers as it would later.
        for link in list(self.links.values()):
            self.register_late(link)
        return classes, names

    @staticmethod
    def classes_of(link, interfaces):
        """The proxy classes and display names of `link`'s nodes as `interfaces` describes them."""
        classes, names, left_out = {}, {}, []
        for node, interface in interfaces.items():
            try:
                classes[node] = proxy_class(link, node, interface)
            except Exception as error:  # noqa: BLE001 (what a worker described is input: any fault is that node's)
                left_out.append(f"{node[:60]!r} ({one_line(error)})")
                continue
            shown = interface.get("display_name", node)
            names[node] = None if shown is None else str(shown)  # None: upstream shows a comfy_api node's so
        if left_out:
            log.error("comfy-supervisor: pack %s: %d of its %d nodes cannot be proxied and are left out: %s",
                      link.name, len(left_out), len(interfaces), "; ".join(left_out))
        return classes, names

    def register_late(self, link):
        """A pack that described its nodes after ComfyUI took its start's (its import fixed and
        retried, or a new life that describes them otherwise): its nodes go into upstream's
        mappings now, and the ones it no longer has leave them, so that ComfyUI runs them
        without a restart. The browser sees them once its page is reloaded."""
        nodes = sys.modules.get("nodes")
        with self.changed:
            interfaces = link.interfaces
            if self.registered is None or interfaces is None or \
                    not isinstance(getattr(nodes, "NODE_CLASS_MAPPINGS", None), dict):
                return  # ComfyUI's start takes them (proxy_nodes)
            taken, before = self.registered.get(link.name, (None, set()))
            if interfaces is taken:
                return  # registered already, as described
            classes, names = self.classes_of(link, interfaces)
            for node in before - set(classes):
                nodes.NODE_CLASS_MAPPINGS.pop(node, None)
                nodes.NODE_DISPLAY_NAME_MAPPINGS.pop(node, None)
            nodes.NODE_CLASS_MAPPINGS.update(classes)
            nodes.NODE_DISPLAY_NAME_MAPPINGS.update(names)
            self.registered[link.name] = (interfaces, set(classes))
        self.serve_front_end(link)
        self.routes.check_late(link)
        log.info("comfy-supervisor: pack %s described its nodes after ComfyUI started: its %d nodes are registered "
                 "now (reload the browser's page to see them)", link.name, len(classes))

    @staticmethod
    def serve_front_end(link):
        """The pack's front-end files (its WEB_DIRECTORY, each of a group's), served by this
        ComfyUI under the pack folder's name, as upstream serves a pack it imported itself (its
        nodes module's EXTENSION_WEB_DIRS, read when the server adds its routes, after custom
        nodes load)."""
        nodes = sys.modules.get("nodes")
        if isinstance(getattr(nodes, "EXTENSION_WEB_DIRS", None), dict):
            nodes.EXTENSION_WEB_DIRS.update(link.web_files())


def _counted(count, noun):
    return f"{count} {noun}" + ("" if count == 1 else "s")
