"""comfyctl adopt: an installed ComfyUI's custom nodes isolated in one command, without
their authors. It reads each pack of `custom_nodes` (inventory.py, pack_lists.py for the
list ComfyUI-Manager or comfy-cli keeps), decides to isolate, group or keep it in ComfyUI's
own process with the reason (plan.py, from `comfyctl pack check`'s estimate and the pack's
own isolation table), builds each environment through `comfyctl pack add` in parallel
(builds.py), and writes the config ComfyUI then runs under (config_update.py). cli.py
ties them together; docs/ADOPTING.md says what a user sees. A tool beside ComfyUI: it
imports environments and pack_check of the package, and only comfyctl's tools import it."""
