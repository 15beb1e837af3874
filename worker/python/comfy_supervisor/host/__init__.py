"""ComfyUI's side: what makes a ComfyUI process the supervisor's host participant, and
runs in that process.

- comfyui: install(), called by the custom node (worker/python/comfyui_custom_node):
  admission before upstream's loads, the ledger kept true, the supervisor's commands
  answered through upstream's own model_unload, a prompt as one busy stretch; and the
  same memory integration in a pack's worker (install_in_worker);
- standin: another process's model as an entry of upstream's current_loaded_models;
- model_names: a model's name in the ledger, its class and the file it came from;
- bridges: the host's side of every pack that runs in a worker of its own, fed by the
  supervisor's control socket; its proxy classes given to upstream;
- proxy_nodes: the host's end of one pack's bridge (its link, its sessions, its calls);
- pack_routes: a pack's HTTP routes, given to ComfyUI's server and answered in its worker.

Imports participant, bridge and upstream; never pack_worker, whose code has no place in
ComfyUI's process. Imported by the custom node, and by pack_worker for install_in_worker.
What this code writes into upstream's modules is listed in tests/python/layering_check.py,
each write with its reason: nothing else may.
"""
