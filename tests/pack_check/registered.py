"""Run in a child by pack_check_check.py: imports the pack PACK_DIR as its worker imports it
(ComfyUI's start-up first: the checkout COMFYUI_DIR on the path, its flags after `--`, the
pack's prestartup_script.py), and prints the names its NODE_CLASS_MAPPINGS registers (or its
comfy_entrypoint's extension lists) as JSON: {"names": [...]}, or {"error": one line}.

    python3 registered.py PACK_DIR COMFYUI_DIR [-- COMFYUI_ARG...]
"""

import json
import os
import sys


def main():
    arguments = sys.argv[1:]
    comfyui_args = arguments[arguments.index("--") + 1:] if "--" in arguments else []
    pack, comfyui = (os.path.abspath(a) for a in arguments[:2])
    sys.path.insert(0, comfyui)
    sys.path.insert(0, os.path.dirname(pack))
    from comfy_supervisor.pack_worker.__main__ import import_pack, take_comfyui_args
    from comfy_supervisor.upstream import comfyui_startup
    take_comfyui_args(comfyui_args)
    comfyui_startup.prepare(comfyui, [pack], quiet=True)
    try:
        _, module = import_pack(pack)
    except Exception as error:  # noqa: BLE001 (the pack's import error is the answer)
        print(json.dumps({"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}))
        return
    print(json.dumps({"names": sorted(module.NODE_CLASS_MAPPINGS)}))


if __name__ == "__main__":
    main()
