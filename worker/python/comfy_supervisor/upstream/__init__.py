"""What of upstream ComfyUI's own process state this package reads or sets up, beside the
integration itself: comfyui_startup, ComfyUI's start-up as its main.py makes it (for a
pack's worker, which runs no main.py), and prompt_server(), the one lookup of upstream's
PromptServer instance.

A room of its own because two rooms use it and neither may hold it: the pack worker runs
the start-up and sends a pack's browser messages through it, the host's proxy nodes find
the PromptServer with it. Inside pack_worker the host could not import it; inside host it
would make the worker's start-up look like code that runs in ComfyUI.

Imports nothing else of comfy_supervisor. Imported by host and pack_worker; not by
participant (the bare binding) nor bridge (which knows no ComfyUI).
"""
