"""Run by the pack worker before the pack's import, as ComfyUI's main.py runs it."""

import os

os.environ["STARTUP_PACK_PRESTARTUP"] = "ran"
