"""comfyctl's Python commands, `python3 -m comfy_supervisor.tools COMMAND ARGS...` (__main__):
pack, env and adopt, each a tool beside ComfyUI, never in its process. It imports the room
of the command it runs (environments, adopt) when it runs it, and no room imports it."""
