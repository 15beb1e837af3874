"""A custom node pack in a worker process of its own.

    python -m comfy_supervisor.pack_worker --pack DIR [--pack DIR...] [--comfyui DIR] [--describe]
        [--name NAME] [--config FILE] [-- COMFYUI_ARG...]

Run by the supervisor (the pack's entry in the config runs the pack's own interpreter with
these arguments), it joins as a participant, imports the pack from DIR as ComfyUI imports
a custom node folder (its NODE_CLASS_MAPPINGS and NODE_DISPLAY_NAME_MAPPINGS, or the nodes
of its comfy_entrypoint: v3_nodes.py), with the ComfyUI checkout --comfyui first on the
module path so that the pack finds ComfyUI's own `comfy` package, describes each node
class's interface, says it is ready, and serves the supervisor's commands with the host's
memory integration (host.comfyui.install_in_worker): admission before its loads, its
models in the ledger, evictions through upstream's model_unload, releases. It then runs
the host's node calls (node_server.py), and answers the HTTP routes the pack added
(routes.py), for as long as it lives.

A group of packs (--pack again for each, the config's "pack" list) is imported in order into
this one worker, as ComfyUI imports custom node folders one after another into its process:
what one member's node makes is another's own object. A node class that two members define
is refused as an import error is.

A node class that raises while it is described (its INPUT_TYPES(), or a comfy_api class's
schema) is left out alone, with one line naming it and its pack, as ComfyUI's /object_info
leaves it out; the pack's other nodes register. A pack that cannot be imported ends the worker with one line naming the error and exit
status 78 (EX_CONFIG); the supervisor marks the pack failed without restarting it, until
an operator retries it. So does a pack whose environment (built by `comfyctl pack add`) is
stale, before anything is imported (environment.py), when the worker is started from a
config: --name and --config, the pack's name and config file as the supervisor gives them,
go into that line's command. --describe prints the interfaces as JSON and exits, without a
supervisor. What follows `--` are ComfyUI's own flags for the worker's comfy package, as
ComfyUI's main.py takes them (--cpu on a machine without CUDA, --lowvram, ...): upstream's
comfy.cli_args reads them when the pack first imports comfy.
"""

import argparse
import importlib.util
import inspect
import json
import os
import signal
import sys
import threading
import traceback

from .. import crossing
from ..bridge import cuda_ipc
from ..bridge.arena import OwnArena
from ..bridge.channel import control_socket
from ..bridge.remote import one_line
from ..upstream import comfyui_startup
from ..crossing import forwarded
from . import environment, v3_nodes
from .node_server import NodeServer
from .routes import RouteServer

EXIT_CANNOT_RUN = 78  # sysexits.h EX_CONFIG; the supervisor does not restart on it

# Every member of a node class upstream reads (server.py's node_info, execution.py).
_INTERFACE = ("RETURN_TYPES", "RETURN_NAMES", "FUNCTION", "CATEGORY", "OUTPUT_NODE", "OUTPUT_IS_LIST",
              "INPUT_IS_LIST", "DESCRIPTION", "OUTPUT_TOOLTIPS", "DEPRECATED", "EXPERIMENTAL", "API_NODE",
              "NOT_IDEMPOTENT")


def say(line):
    print(f"pack_worker: {line}", file=sys.stderr, flush=True)


def import_pack(folder):
    """The pack's module, imported from its folder's __init__.py under the folder's name."""
    folder = os.path.abspath(folder)
    name = os.path.basename(folder.rstrip("/"))
    init = os.path.join(folder, "__init__.py")
    if not os.path.isfile(init):
        raise ImportError(f"{folder} has no __init__.py: not a custom node pack")
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    found = v3_nodes.node_classes(module)
    if found is None:
        raise ImportError(f"{name} defines no NODE_CLASS_MAPPINGS dict and no comfy_entrypoint")
    module.NODE_CLASS_MAPPINGS, module.NODE_DISPLAY_NAME_MAPPINGS = found  # an entrypoint's, where it has one
    return name, module


# A type name and an input name no pack declares: what a wildcard type compares equal to,
# and what a section that takes inputs of any name contains.
_PROBE = "comfy-supervisor: no such type"
# The types a type of customised equality is asked about (upstream's core sockets).
_CORE_TYPES = ("IMAGE", "MASK", "LATENT", "CONDITIONING", "MODEL", "CLIP", "VAE", "CONTROL_NET", "CLIP_VISION",
               "CLIP_VISION_OUTPUT", "STYLE_MODEL", "UPSCALE_MODEL", "GLIGEN", "SAMPLER", "SIGMAS", "NOISE", "GUIDER",
               "HOOKS", "AUDIO", "VIDEO", "INT", "FLOAT", "STRING", "BOOLEAN")


def _plain(value):
    """`value` as JSON can carry it: tuples as lists, anything else as its repr; a type whose
    equality the pack customised (a str subclass: upstream compares types with !=) as
    {"$any": name} when it equals every type, else {"$equal": name, "to": the core types it
    equals}; a section of inputs that takes any name (a dict subclass, as rgthree's
    FlexibleOptionalInputType) as {"$inputs": its items, "$default": what any other name is}."""
    if isinstance(value, str) and type(value).__ne__ is not str.__ne__:
        if not value != _PROBE:
            return {"$any": str(value)}
        equal = [kind for kind in _CORE_TYPES if not value != kind]
        if set(equal) <= {str(value)}:
            return str(value)  # equal to no other (comfy_api's io types: their own name, or a list of names)
        return {"$equal": str(value), "to": equal}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        items = {str(k): _plain(v) for k, v in value.items()}
        if type(value) is not dict and _PROBE in value:
            return {"$inputs": items, "$default": _plain(value[_PROBE])}
        return items
    return repr(value)


def describe(module, pack):
    """Each node class's interface, by its name, as the host's proxy nodes need it, and a
    line for each class left out because describing it raised: ComfyUI's /object_info
    leaves such a class out too (its node_info raises), and lists the pack's other nodes."""
    names = getattr(module, "NODE_DISPLAY_NAME_MAPPINGS", {}) or {}
    folder = os.path.basename(os.path.normpath(pack))
    # The python_module upstream gives the classes of a pack in custom_nodes/ (the pack's
    # folder, or its file without .py).
    python_module = "custom_nodes." + (os.path.splitext(folder)[0] if os.path.isfile(pack) else folder)
    nodes, left_out = {}, []
    for node_name, cls in module.NODE_CLASS_MAPPINGS.items():
        v3 = v3_nodes.is_v3(cls)
        try:
            nodes[node_name] = describe_class(cls, v3, names.get(node_name, node_name), python_module)
        except Exception as error:  # noqa: BLE001 (whatever the class raises is the pack's error)
            # A comfy_api class fails in its schema, most often one written for a newer comfy_api.
            part, advice = ("schema", "update the pack, or ComfyUI where the class is written for a newer comfy_api") \
                if v3 else ("interface", "fix or update the pack")
            left_out.append(f"{folder}: node class {node_name[:60]!r} left out (ComfyUI leaves it out too): its {part} "
                            f"raised {one_line(error)} ({where_raised(error, pack)}); its other nodes register; "
                            f"{advice}")
    return nodes, left_out


def describe_class(cls, v3, display_name, python_module):
    """One node class's interface; raises what the class raises while it is read."""
    if v3:
        display_name = cls.GET_SCHEMA().display_name  # upstream shows a comfy_api node's from its schema alone
    interface = {"display_name": display_name, "INPUT_TYPES": _plain(cls.INPUT_TYPES()), "python_module": python_module}
    for member in _INTERFACE:
        if hasattr(cls, member):
            interface[member] = _plain(getattr(cls, member))
    interface["IS_CHANGED"] = v3_nodes.overrides(cls, "fingerprint_inputs") is not None if v3 else \
        hasattr(cls, "IS_CHANGED")
    validate = v3_nodes.overrides(cls, "validate_inputs") if v3 else getattr(cls, "VALIDATE_INPUTS", None)
    interface["check_lazy_status"] = v3_nodes.overrides(cls, "check_lazy_status") is not None if v3 else \
        getattr(cls, "check_lazy_status", None) is not None
    interface["VALIDATE_INPUTS"] = None
    if validate is not None:
        # Upstream passes VALIDATE_INPUTS only the inputs its signature names: the
        # host's proxy takes the same signature.
        spec = inspect.getfullargspec(validate)
        interface["VALIDATE_INPUTS"] = {"args": spec.args, "varkw": spec.varkw is not None}
    return interface


def where_raised(error, pack, frames=2):
    """Where `error` was raised, on one line: the innermost frame of its traceback (a library
    the pack imports, by its file's name), and the pack's own innermost `frames` frames,
    named from its folder ("in pack/nodes.py:12, from pack/__init__.py:3")."""
    parent, folder = os.path.dirname(os.path.abspath(pack)), os.path.abspath(pack) + os.sep
    stack = [frame for frame in traceback.extract_tb(error.__traceback__) if not frame.filename.startswith("<frozen")]
    ours = [frame for frame in stack if os.path.abspath(frame.filename).startswith(folder)]
    places = [f"{os.path.relpath(os.path.abspath(frame.filename), parent)}:{frame.lineno}"
              for frame in reversed(ours[-frames:])]
    where = "in " + ", from ".join(places) if places else ""
    if stack and stack[-1] not in ours[-1:]:
        where = f"at {os.path.basename(stack[-1].filename)}:{stack[-1].lineno}" + (", " + where if where else "")
    return where or "no traceback"


class CannotImport(Exception):
    """A pack of the worker cannot be imported as it is; the message is the one line that says so."""


def import_packs(folders, then):
    """The packs of `folders` imported in order, each as import_pack imports it, and described:
    ([(name, module, WEB_DIRECTORY or None)], each node's interface by its name), with a line
    said for each node class left out (describe). Raises
    CannotImport naming the folder that failed, or the two that define one node class;
    `then` is what to do once the pack is fixed."""
    members, nodes, defined_by, left_out_lines = [], {}, {}, []
    for folder in folders:
        pack = os.path.basename(os.path.abspath(folder))
        try:
            name, module = import_pack(folder)
            described, left_out = describe(module, folder)
        except Exception as error:  # noqa: BLE001 (whatever the pack raises is its error)
            raise CannotImport(f"cannot import {pack}: {one_line(error)} ({where_raised(error, folder)}); "
                               f"fix the pack or its venv, then {then}") from error
        left_out_lines += left_out
        for node in described:
            if node in defined_by:
                raise CannotImport(f"cannot import {pack} beside {defined_by[node]}: both define the node class "
                                   f"{node[:60]!r}, and one worker has one class of a name; leave one of the two "
                                   "out of the group (the config's \"pack\" list)")
            defined_by[node] = pack
        nodes.update(described)
        web_directory = getattr(module, "WEB_DIRECTORY", None)
        members.append((name, module, web_directory if isinstance(web_directory, str) else None))
    for line in left_out_lines:  # once every pack imported: a run that fails says that one line alone
        say(line)
    return members, nodes


def take_comfyui_args(comfyui_args):
    """ComfyUI's flags, for comfy.cli_args to parse as main.py has it parse sys.argv."""
    try:
        import comfy.options
    except ImportError:
        return  # no ComfyUI checkout there: the pack's import says so
    sys.argv = [sys.argv[0]] + comfyui_args
    if hasattr(comfy.options, "enable_args_parsing"):
        comfy.options.enable_args_parsing()


def main():
    parser = argparse.ArgumentParser(prog="pack_worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", required=True, action="append",
                        help="the custom node pack's folder; once a folder for a group, imported in this order")
    parser.add_argument("--comfyui", help="the ComfyUI checkout whose comfy package the pack imports")
    parser.add_argument("--describe", action="store_true", help="print the node interfaces as JSON and exit")
    parser.add_argument("--no-cuda-ipc", action="store_true",
                        help="stage CUDA tensors to and from the host through host memory, never by CUDA IPC")
    parser.add_argument("--name", help="the pack's name in the config, for messages")
    parser.add_argument("--config", help="the supervisor's config file, for messages")
    arguments = sys.argv[1:]
    comfyui_args = []
    if "--" in arguments:
        split = arguments.index("--")
        arguments, comfyui_args = arguments[:split], arguments[split + 1:]
    options = parser.parse_args(arguments)
    if options.comfyui and options.config:
        # Started from a config (by the supervisor, or comfy-supervisor check), before anything
        # of the pack or ComfyUI is imported and before joining: a stale environment cannot run
        # as configured. (The pack tool, which has just keyed the environment, names no config.)
        stale = environment.stale_line(options.name, options.pack, options.comfyui, options.config)
        if stale is not None:
            say(stale)
            sys.exit(EXIT_CANNOT_RUN)
    if options.no_cuda_ipc:
        cuda_ipc.decline()
    if options.comfyui:
        sys.path.insert(0, os.path.abspath(options.comfyui))
        take_comfyui_args(comfyui_args)
    for folder in reversed(options.pack):
        sys.path.insert(0, os.path.dirname(os.path.abspath(folder)))

    link = None
    if not options.describe:
        # Joined first: an import may take longer than the supervisor waits for a Hello.
        from .. import participant as sv
        try:
            # Node boundaries: node_server releases itself. Ready once the pack is imported.
            link = sv.Participant(capabilities=sv.CAP_PARTIAL_UNLOAD | sv.CAP_PINNED_MEMORY | sv.CAP_READY_LATER)
        except sv.ParticipantError as error:
            say(f"cannot join the supervisor: {error}")
            sys.exit(1)
    skipped = []
    if options.comfyui:
        # A describe-only run prints one line, whatever fails: what the start-up skipped
        # goes into it, should the import then fail.
        skipped = comfyui_startup.prepare(os.path.abspath(options.comfyui),
                                          [os.path.abspath(folder) for folder in options.pack], quiet=options.describe)
        if not options.describe:
            forwarded.install()  # before the pack imports upstream's functions by name
    try:
        members, nodes = import_packs(options.pack, then="run this again" if options.describe else
                                      "comfyctl retry the pack")
    except CannotImport as error:
        startup = f" (ComfyUI's start-up went {'; '.join(skipped)})" if skipped else ""
        say(f"{error}{startup}")
        sys.exit(EXIT_CANNOT_RUN)
    if options.describe:
        print(json.dumps(nodes, indent=2, sort_keys=True))
        return
    name = " + ".join(member[0] for member in members)
    link.ready(len(nodes))  # imported and described: shown ready only now, never before a failed import
    say(f"{name}: {len(nodes)} node classes: {', '.join(sorted(nodes))}")
    routes = RouteServer.of_worker()
    if routes is not None:
        say(f"{name}: {len(routes.routes)} HTTP routes, served by ComfyUI and answered here")
    # The command thread answers the supervisor's Shutdown with SIGTERM, as in ComfyUI's
    # host; a worker has nothing to save, so it ends as a finished worker does.
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(0))
    from ..host import comfyui
    memory = comfyui.install_in_worker(link)
    crossing.install()  # what of ComfyUI crosses from the host, and how: before the host's session
    arena, control = OwnArena.from_environment(), control_socket()
    if arena is None or control is None:
        # Started by a `command` entry: no bridge to the host, memory integration only.
        threading.Event().wait()  # the command thread ends the process at the supervisor's Shutdown
    classes = {node: cls for _, module, _ in members for node, cls in module.NODE_CLASS_MAPPINGS.items()
               if node in nodes}  # a class left out is no node of this worker's
    NodeServer(name, classes, nodes, arena, control, memory, [member[2] for member in members],
               routes).serve_forever()


if __name__ == "__main__":
    main()
