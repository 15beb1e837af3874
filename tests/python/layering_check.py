"""The rooms of the Python package comfy_supervisor and what may import what, read from
every module's source with ast: nothing of the package is imported or run. As the CMake
targets' dependencies say it for the C++ side:

- each room imports only the rooms ROOMS names for it, lazy imports inside functions
  included: participant, upstream and bridge nothing else of the package, host not
  pack_worker, the package's own __init__ nothing;
- every module is in a room, every room is in ROOMS, says in its __init__ docstring who
  imports it, is listed in worker/python/pyproject.toml (or pip leaves it out) and has
  its line in docs/ARCHITECTURE.md;
- at module level the package imports the standard library only; upstream ComfyUI and
  its dependencies (torch, numpy, aiohttp) inside functions, where they run; a room that
  runs as a tool (TOOLS: environments, pack_check, adopt, tools) only what TOOLS lists for it (yaml),
  and never those;
- the bridge names no module of ComfyUI (NAMES_NO_UPSTREAM): no import of one, and no
  string that is a dotted module path under one of ComfyUI's top-level modules
  ("comfy.model_management", "comfy.ldm."); what of ComfyUI crosses, and how, is the
  crossing room's, which hands it to the bridge (bridge/rules.py);
- the code that runs in ComfyUI's process (host and every module it imports of the
  package) writes into upstream ComfyUI only what HOST_WRITES lists, each write with its
  reason, and every listed write is still there: a new patch of ComfyUI fails here until
  someone lists it and says why.

Then it checks itself: the same rules run over the package's sources with one bad line
added must fail, once per rule, so this check cannot pass by reading nothing.

Prints one PASS or FAIL line per check and "python-package: N passed, M failed"; exit
status 1 on any failure. Standard library only, Python 3.11 or later (tomllib).
"""

import ast
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "host"))

from check_report import CheckReport  # noqa: E402
from package_reading import UPSTREAM, Package, host_writes  # noqa: E402

PACKAGE_DIR = os.path.join(ROOT, "worker", "python", "comfy_supervisor")

# Each room and the rooms it may import (the package's own __init__, which holds only
# __version__, may be imported by any).
ROOMS = {
    "participant": set(),
    "upstream": set(),
    "bridge": set(),
    "crossing": {"bridge"},
    "host": {"participant", "bridge", "upstream", "crossing"},
    "pack_worker": {"participant", "bridge", "upstream", "host", "environments", "crossing"},
    "environments": {"pack_check"},
    "pack_check": {"crossing"},
    "adopt": {"environments", "pack_check"},
    "tools": {"environments", "adopt"},
    "template": set(),  # it runs pack_worker by name (runpy), as `-m` would: no import of it
}

# Rooms that name no module of ComfyUI, in an import or in a string: the bridge knows no
# ComfyUI (it takes what crosses, and how, from crossing: bridge/rules.py).
NAMES_NO_UPSTREAM = ("bridge",)
# A string that is a module's dotted path, or the prefix of one ("comfy.ldm.").
_MODULE_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\.?")

# Rooms that run as a tool beside ComfyUI, never in its process, and what each may import
# inside functions besides the standard library: nothing of ComfyUI, torch or numpy.
TOOLS = {"environments": {"yaml"}, "adopt": {"yaml"}, "tools": set(), "pack_check": set()}

# Every write into upstream ComfyUI by code that runs in ComfyUI's process:
# (file in the package, function, what is written) -> why. The host wraps upstream's
# memory entry points and its prompt executor (comfy-supervisor has no other hook into
# them), publishes the one value upstream's loads read (the reserve the supervisor
# granted), keeps its stand-ins in upstream's list of loaded models, and serves a pack's
# front-end files as upstream serves a local pack's.
HOST_WRITES = {
    ("host/comfyui.py", "_integrate", "mm.load_models_gpu"):
        "wrapped: the supervisor admits a load before upstream makes room for it",
    ("host/comfyui.py", "_integrate", "mm.free_memory"):
        "wrapped: upstream's every unload path runs under the host's lock, over the stand-ins",
    ("host/comfyui.py", "_integrate", "mm.LoadedModel.model_unload"):
        "wrapped: every unload of a model, the supervisor's or upstream's own, revokes its mirrors first",
    ("host/comfyui.py", "_remember_clip_vision_configs", "clip_vision.ClipVisionModel.__init__"):
        "wrapped: a CLIP vision model remembers the configuration it was built from, its mirror's recipe",
    ("crossing/replicas/vae.py", "remember_builds", "upstream_sd.VAE.__init__"):
        "wrapped: a VAE remembers the shapes, config and metadata it was built from, its replica's recipe",
    ("crossing/replicas/clip.py", "remember_builds", "upstream_sd.CLIP.__init__"):
        "wrapped: a CLIP's text encoder and tokenizer remember what they were built from, its replica's recipe",
    ("host/model_names.py", "install", "sd.load_checkpoint_guess_config"):
        "wrapped: the models a checkpoint's load returns are named after its file (0.3.64 keeps no file on them)",
    ("host/model_names.py", "install", "sd.load_diffusion_model"):
        "wrapped: the model a diffusion model's load returns is named after its file",
    ("host/model_names.py", "install", "sd.load_clip"):
        "wrapped: the text encoder a CLIP load returns is named after its files",
    ("crossing/forwarded.py", "install", "sample.sample"):
        "wrapped: given a MODEL of the other side, upstream's sampling runs where that MODEL is",
    ("crossing/forwarded.py", "install", "sample.sample_custom"):
        "wrapped: given a MODEL of the other side, upstream's sampling runs where that MODEL is",
    ("crossing/forwarded.py", "install", "nodes.common_ksampler"):
        "wrapped: given a MODEL of the other side, upstream's sampling runs where that MODEL is",
    ("crossing/forwarded.py", "install", "sd.load_lora_for_models"):
        "wrapped: a LoRA is loaded where the MODEL's and the CLIP's weights are",
    ("crossing/guided.py", "install", "samplers.CFGGuider.sample"):
        "wrapped: upstream's guider over a pack's MODEL samples in the pack, one crossing a model evaluation",
    ("host/comfyui.py", "install", "execution.PromptExecutor.execute"):
        "wrapped: a prompt is one busy stretch (upstream has no per-node hook)",
    ("host/comfyui.py", "install", "execution.execute"):
        "wrapped: the uses of a pack's objects one node makes are one busy stretch of its worker, ended with the node",
    ("host/comfyui.py", "_Host.load_models_gpu", "self.mm.EXTRA_RESERVED_VRAM"):
        "the one value the host publishes: the reserve the supervisor granted this load",
    ("host/comfyui.py", "_Host.unload", "self.mm.current_loaded_models.remove"):
        "an entry the supervisor's eviction detached leaves the list, as upstream's free_memory does",
    ("host/standin.py", "StandIns._forget", "current.pop"):
        "a stand-in whose model left the ledger leaves upstream's list",
    ("host/standin.py", "StandIns._place", "current[:]"):
        "the stand-ins take their place in upstream's list by the machine-wide load order",
    ("host/standin.py", "StandIns.withdraw", "current[:]"):
        "the stand-ins leave upstream's list while a host load runs (admission made room already)",
    ("host/bridges.py", "Bridges.hear_interrupts", "mm.interrupt_current_processing"):
        "wrapped: ComfyUI's Cancel reaches a pack's running node as it happens",
    ("host/bridges.py", "Bridges.register_late", "nodes.NODE_CLASS_MAPPINGS.update"):
        "a pack described after ComfyUI started (fixed and retried) registers its nodes as a custom node's would",
    ("host/bridges.py", "Bridges.register_late", "nodes.NODE_DISPLAY_NAME_MAPPINGS.update"):
        "and their display names",
    ("host/bridges.py", "Bridges.register_late", "nodes.NODE_CLASS_MAPPINGS.pop"):
        "a node a pack's new life no longer describes leaves upstream's mappings",
    ("host/bridges.py", "Bridges.register_late", "nodes.NODE_DISPLAY_NAME_MAPPINGS.pop"):
        "and its display name",
    ("host/bridges.py", "Bridges.serve_front_end", "nodes.EXTENSION_WEB_DIRS.update"):
        "a pack's front-end folders (a group's packs' each), published where upstream serves a local pack's from",
    ("upstream/comfyui_startup.py", "_install_prompt_server", "server.PromptServer.instance"):
        "a pack worker's PromptServer: run by pack_worker alone (the host imports this module "
        "for prompt_server(), and never calls prepare())",
}


def upstream_names(package, room):
    """(file:line, name) of each module of ComfyUI a module of `room` names: an import of one,
    or a string that is a dotted module path whose first name is a top-level module of a
    ComfyUI checkout (package_reading.UPSTREAM)."""
    found = []
    for path, tree in sorted(package.trees.items()):
        if path.split("/")[0] != room:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module] if node.level == 0 and node.module else []
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_PATH.fullmatch(node.value):
                names = [node.value]
            else:
                names = []
            found += [(f"{path}:{node.lineno}", name) for name in names if name.partition(".")[0] in UPSTREAM]
    return found


def check_package(package, check):
    """Every rule over `package`, each through check(rule, ok, line)."""
    for room, allowed in sorted(ROOMS.items()):
        wrong = [edge for edge in package.imports if package.room(edge.source) == room and
                 package.room(edge.target) not in allowed | {room, ""}]
        check(f"imports of {room}", not wrong, f"{room} imports " +
              (f"only {', '.join(sorted(allowed))}" if allowed else "nothing else") + " of the package" +
              "".join(f"\n    {edge}" for edge in wrong))
    root = [edge for edge in package.imports if edge.source == "comfy_supervisor"]
    check("imports of the root", not root, "the package's __init__ imports nothing of it" +
          "".join(f"\n    {edge}" for edge in root))
    outside = package.outside_rooms(ROOMS)
    check("rooms", not outside, "every module is in a room of ROOMS" +
          "".join(f"\n    {path} is not" for path in outside))
    external = package.external_imports(TOOLS)
    check("external imports", not external, "the package imports the standard library only at module level, "
          "and inside functions besides it only upstream ComfyUI and torch, numpy, aiohttp (a tool's room only "
          "what TOOLS lists)" +
          "".join(f"\n    {where}: {name}" for where, name in external))
    for room in NAMES_NO_UPSTREAM:
        named = upstream_names(package, room)
        check(f"ComfyUI named in {room}", not named, f"{room} names no module of ComfyUI, in an import or a string "
              "(what of ComfyUI crosses, and how, is crossing's)" +
              "".join(f"\n    {where}: {name}" for where, name in named))
    found = host_writes(package, "host")
    new = {key: line for key, line in found.items() if key not in HOST_WRITES}
    gone = [key for key in HOST_WRITES if key not in found]
    check("host writes", not new and not gone, f"the {len(package.closure('host'))} modules that run in "
          f"ComfyUI's process write into upstream only the {len(HOST_WRITES)} writes HOST_WRITES lists" +
          "".join(f"\n    not listed: {key[0]}:{line} in {key[1]}: {key[2]}" for key, line in new.items()) +
          "".join(f"\n    listed, no longer written: {key}" for key in gone))


def check_files(package, report):
    """What only the real tree has: docstrings, pyproject.toml, docs/ARCHITECTURE.md."""
    for room in sorted(package.rooms()):
        doc = package.docstring(f"comfy_supervisor.{room}")
        report.check("import" in doc.lower(), f"{room}/__init__.py's docstring says what lives there and who "
                                              "imports it")
    listed = package.pyproject_packages(os.path.join(ROOT, "worker", "python", "pyproject.toml"))
    on_disk = {"comfy_supervisor"} | {f"comfy_supervisor.{path.removesuffix('/__init__.py').replace('/', '.')}"
                                      for path in package.sources if path.endswith("/__init__.py")}
    report.check(listed == on_disk, "pyproject.toml lists every package of the tree, so pip installs them: "
                                    f"missing {sorted(on_disk - listed)}, extra {sorted(listed - on_disk)}")
    with open(os.path.join(ROOT, "docs", "ARCHITECTURE.md"), encoding="utf-8") as text:
        architecture = text.read()
    missing = [room for room in sorted(package.rooms()) if f"`comfy_supervisor.{room}`" not in architecture]
    report.check(not missing, f"docs/ARCHITECTURE.md has a line for every room: missing {missing}")


# One bad line per rule, added to a copy of the sources: that rule must fail on it.
SPOILERS = [
    ("imports of bridge", "bridge/values.py", "\ndef _spoiled():\n    from ..host import comfyui\n"),
    ("imports of bridge", "bridge/arena.py", "\nfrom ..pack_worker import node_server\n"),
    ("imports of host", "host/standin.py", "\nimport comfy_supervisor.pack_worker.node_server\n"),
    ("imports of participant", "participant/__init__.py", "\nfrom ..bridge import channel\n"),
    ("imports of the root", "__init__.py", "\nfrom . import participant\n"),
    ("rooms", "stray.py", '"""A module outside every room."""\n'),
    ("external imports", "bridge/session.py", "\nimport torch\n"),
    ("external imports", "host/comfyui.py", "\ndef _spoiled():\n    import requests\n"),
    ("external imports", "environments/manifests.py", "\nimport yaml\n"),
    ("external imports", "environments/stamp.py", "\ndef _spoiled():\n    import torch\n"),
    ("imports of environments", "environments/key.py", "\nfrom ..bridge import values\n"),
    ("ComfyUI named in bridge", "bridge/conversation.py", '\n_spoiled = sys.modules.get("comfy.model_management")\n'),
    ("ComfyUI named in bridge", "bridge/mirror.py", '\n_SPOILED = ("comfy.ldm.", "comfy.clip_model.")\n'),
    ("ComfyUI named in bridge", "bridge/session.py", "\ndef _spoiled():\n    import comfy.ops\n"),
    ("ComfyUI named in bridge", "bridge/values.py", "\ndef _spoiled():\n    from nodes import NODE_CLASS_MAPPINGS\n"),
    ("host writes", "host/comfyui.py", "\ndef _spoiled(mm):\n    mm.soft_empty_cache = None\n"),
    ("host writes", "host/proxy_nodes.py", "\ndef _spoiled():\n    import comfy.model_management\n"
     "    state = comfy.model_management.vram_state\n    state.value = 0\n"),
    ("host writes", "host/standin.py", "\n_spoiled = lambda mm: setattr(mm, 'vram_state', None)\n"),
    ("host writes", "bridge/channel.py", "\ndef _spoiled():\n    import execution\n"
     "    setattr(execution, 'validate_prompt', None)\n"),
    ("host writes", "upstream/comfyui_startup.py", "\ndef _spoiled():\n    nodes = sys.modules.get('nodes')\n"
     "    nodes.NODE_CLASS_MAPPINGS.update({})\n"),
]


def failed_rules(package):
    failed = set()
    check_package(package, lambda rule, ok, line: ok or failed.add(rule))
    return failed


def main():
    report = CheckReport("python-package")
    package = Package.read(PACKAGE_DIR)
    check_package(package, lambda rule, ok, line: report.check(ok, line))
    check_files(package, report)
    failed = failed_rules(package)
    for rule, path, line in SPOILERS:
        spoiled = package.with_source(path, package.source(path) + line if package.has(path) else line)
        last = line.strip().splitlines()[-1].strip()
        report.check(rule not in failed and rule in failed_rules(spoiled),
                     f"the rule on {rule} fails on {path} with a line added: {last}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
