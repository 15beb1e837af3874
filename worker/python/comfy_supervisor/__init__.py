"""comfy-supervisor for Python participants: `participant` wraps the C ABI library
(libcomfy_participant.so) through ctypes; `comfyui` makes a ComfyUI process the host
participant. Standard library only."""

# The project's version, written only here: CMake and pyproject.toml read it.
__version__ = "0.1.0"
