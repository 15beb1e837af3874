"""Run by the pack worker before any pack of the group is imported, as ComfyUI's main.py runs it."""

import os

os.environ["GROUP_TAKER_PRESTARTUP"] = "ran"
