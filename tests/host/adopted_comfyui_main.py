"""main.py of the ComfyUI checkout adopt's test makes (tests/python/adopt_test.cpp), copied
beside links to fake_comfyui's other entries: ComfyUI's start as far as custom nodes go. It
parses ComfyUI's flags, imports custom_nodes by upstream's rules (fake_comfyui's
nodes.init_external_custom_nodes, honouring the whitelist adopt writes) and prints the node
classes registered, as one line on stderr:

    adopted_comfyui: registered ["NodeA", "NodeB", ...]

Started by a supervisor (COMFY_SV_SLOT set), the supervisor's custom node is among what it
imports: the process becomes the host and the isolated packs' proxies register; it then
runs until the supervisor's Shutdown. Run alone, it is ComfyUI with every pack in its own
process, and it exits."""

import json
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import comfy.options  # noqa: E402

comfy.options.enable_args_parsing()

import nodes  # noqa: E402

nodes.init_external_custom_nodes(os.path.join(HERE, "custom_nodes"))
print(f"adopted_comfyui: registered {json.dumps(sorted(nodes.NODE_CLASS_MAPPINGS))}", file=sys.stderr, flush=True)
if os.environ.get("COMFY_SV_SLOT"):
    threading.Event().wait()  # the supervisor's Shutdown ends the process
