"""A custom node pack in a worker process of its own, run by the supervisor as
`python -m comfy_supervisor.pack_worker --pack DIR ...` (supervisor/config.cpp names the
module): __main__ joins, sets up ComfyUI's start-up, imports the pack and describes its
nodes; node_server, the worker's end of the pack's bridge, runs the host's node calls;
v3_nodes runs the nodes of ComfyUI's newer API (comfy_api) among them as upstream does;
routes answers the pack's HTTP routes that ComfyUI's server forwards; forwarded has
upstream's sampling functions given the host's objects run in the host; environment
refuses to start a pack whose environment (built by `comfyctl pack add`) is stale.

Imports participant, bridge, upstream, and host for the memory integration a worker
shares with ComfyUI (host.comfyui.install_in_worker); environments for the staleness of
its environment (environments.stamp, in environment.py). Imported by nothing: it is a
program, and none of it runs in ComfyUI's process.
"""
