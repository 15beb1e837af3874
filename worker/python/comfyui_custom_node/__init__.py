"""comfy-supervisor's ComfyUI custom node. Symlink this folder into ComfyUI/custom_nodes:

    ln -s /path/to/comfy-supervisor/worker/python/comfyui_custom_node ComfyUI/custom_nodes/comfy_supervisor

When the supervisor started this ComfyUI (COMFY_SV_SLOT is set) it makes the process the
host participant (comfy_supervisor.host.comfyui), and its nodes are the proxies of every
pack that runs in a worker of its own (comfy_supervisor.host.bridges, docs/PACKS.md),
under the packs' own names and categories. Otherwise it does nothing and adds no nodes.
"""

import os
import sys

NODE_CLASS_MAPPINGS = {}
NODE_DISPLAY_NAME_MAPPINGS = {}

if os.environ.get("COMFY_SV_SLOT"):
    try:
        import comfy_supervisor  # noqa: F401 (on PYTHONPATH)
    except ImportError:
        # The package sits beside this folder; the symlink resolves to it.
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    from comfy_supervisor.host import comfyui

    _host = comfyui.install()
    if _host is not None and _host.bridges is not None:
        NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = _host.bridges.proxy_nodes()
