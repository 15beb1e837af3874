"""comfy-supervisor for Python participants, standard library only, in one room per
concern (each room's __init__ says what lives there and who may import it):

- participant: the C ABI library libcomfy_participant.so through ctypes;
- upstream: what of upstream ComfyUI's process state the package reads or sets up;
- bridge: what both ends of a pack's bridge share (values, arenas, CUDA IPC, the wire);
- host: ComfyUI's side, in ComfyUI's process (host.comfyui.install, the stand-ins, the
  proxy nodes);
- pack_worker: a pack in a worker of its own (python -m comfy_supervisor.pack_worker);
- environments: a pack's own Python environment built from what it declares
  (python -m comfy_supervisor.environments, what `comfyctl pack add` runs).

tests/python/layering_check.py holds the rooms to what they may import.
"""

# The project's version, written only here: CMake and pyproject.toml read it.
__version__ = "0.1.0"
