"""The pack's environment, checked at the worker's start before the pack is imported. An
environment `comfyctl pack add` built holds its lock (comfy-env.lock.json) in its prefix, and
the lock holds the key of what it was built from: the pack's declarations, the host's
interpreter, ComfyUI's requirements, the host's torch. When today's inputs have another key,
the pack would import against packages resolved for what is no longer there, so the worker
does not start: it says in one line what changed and the command that rebuilds it
(environments/stamp.py reads the inputs). An interpreter with no lock is not one the tool
built (a venv made by hand, the system's python3): nothing to check. A lock this user cannot
read is no stale environment but an unreadable one (built as another user before
environments were made readable by all): the line says so, and who can open it.
"""

import os
import sys

from ..environments import access, lock


def stale_line(name, folders, comfyui, config):
    """None when this interpreter's environment is not the tool's or is current; else the one
    line that says the pack's environment is stale, why, and how to rebuild it. `name` and
    `config` are the pack's name and config file, as the supervisor gives them."""
    if not os.path.isfile(os.path.join(sys.prefix, lock.NAME)):
        return None
    pack = name or os.path.basename(os.path.abspath(folders[0]))
    found = access.problem(sys.prefix)
    if found is not None and found.kind == "denied":
        return (f"pack {pack}'s environment {sys.prefix} {found}: run comfyctl pack add {os.path.abspath(folders[0])} "
                f"--name {pack} --config {config} as {found.owner or 'its owner'}, which makes it readable to every "
                "user")
    from ..environments.stamp import stale_reason
    reason = stale_reason(sys.prefix, [os.path.abspath(folder) for folder in folders], os.path.abspath(comfyui))
    if reason is None:
        return None
    return (f"pack {pack}'s environment {sys.prefix} is stale ({reason}): run comfyctl pack add "
            f"{os.path.abspath(folders[0])} --name {pack} --config {config} to rebuild it")
