"""main.py of the ComfyUI checkout adopt's test makes (tests/python/adopt_test.cpp), copied
beside links to fake_comfyui's other entries: ComfyUI's start as far as custom nodes go. It
parses ComfyUI's flags, runs the packs' prestartup scripts, makes the PromptServer, imports
custom_nodes by upstream's rules (fake_comfyui's nodes.init_external_custom_nodes,
honouring the whitelist adopt writes) and prints the node
classes registered, as one line on stderr:

    adopted_comfyui: registered ["NodeA", "NodeB", ...]

Started by a supervisor (COMFY_SV_SLOT set), the supervisor's custom node is among what it
imports: the process becomes the host and the isolated packs' proxies register; it then
runs until the supervisor's Shutdown. Run alone, it is ComfyUI with every pack in its own
process, and it exits."""

import asyncio
import json
import os
import runpy
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
CUSTOM_NODES = os.path.join(HERE, "custom_nodes")
sys.path.insert(0, HERE)

import comfy.options  # noqa: E402

comfy.options.enable_args_parsing()

from comfy.cli_args import args  # noqa: E402


def execute_prestartup_scripts():
    """Each pack's prestartup_script.py, before any pack is imported, as upstream's main.py
    runs them: the same entries passed over, the whitelist honoured, a failure logged."""
    for name in sorted(os.listdir(CUSTOM_NODES)):
        script = os.path.join(CUSTOM_NODES, name, "prestartup_script.py")
        if name.endswith(".disabled") or not os.path.isfile(script):
            continue
        if args.disable_all_custom_nodes and name not in args.whitelist_custom_nodes:
            continue
        try:
            runpy.run_path(script)
        except Exception as error:  # noqa: BLE001 (upstream's own: logged, the start goes on)
            print(f"Failed to execute startup-script: {script} / {error}", file=sys.stderr, flush=True)


execute_prestartup_scripts()

import nodes  # noqa: E402
import server  # noqa: E402

server.PromptServer(asyncio.new_event_loop())  # before the packs, which add routes to it at import
nodes.init_external_custom_nodes(CUSTOM_NODES)
print(f"adopted_comfyui: registered {json.dumps(sorted(nodes.NODE_CLASS_MAPPINGS))}", file=sys.stderr, flush=True)
if os.environ.get("COMFY_SV_SLOT"):
    threading.Event().wait()  # the supervisor's Shutdown ends the process
