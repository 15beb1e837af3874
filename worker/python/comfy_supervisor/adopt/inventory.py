"""What ComfyUI would import from a `custom_nodes` folder, as its loader walks it: each
folder and each `.py` file, but `__pycache__`, what ends in `.disabled` and other files.
Hidden entries (ComfyUI-Manager's `.disabled` folder) are passed over as well, and the
supervisor's own custom node is ours, not a pack to adopt."""

import dataclasses
import os

# The name `comfyctl adopt` links the supervisor's custom node under, in custom_nodes.
OWN_NODE = "comfy_supervisor"
OWN_NODE_SOURCE = "comfyui_custom_node"


@dataclasses.dataclass
class Candidate:
    folder: str    # the entry's name in custom_nodes, as ComfyUI's whitelist names it
    path: str      # its real path
    is_file: bool  # a single-file pack (NAME.py)

    @property
    def importable(self):
        return self.is_file or os.path.isfile(os.path.join(self.path, "__init__.py"))


def is_own_node(path):
    return os.path.basename(os.path.realpath(path)) == OWN_NODE_SOURCE


def candidates(custom_nodes):
    """The entries ComfyUI would try to import, in name order."""
    found = []
    for name in sorted(os.listdir(custom_nodes)):
        path = os.path.join(custom_nodes, name)
        if name == "__pycache__" or name.startswith(".") or name.endswith(".disabled") or is_own_node(path):
            continue
        if os.path.isfile(path):
            if name.endswith(".py"):
                found.append(Candidate(name, os.path.realpath(path), True))
        elif os.path.isdir(path):
            found.append(Candidate(name, os.path.realpath(path), False))
    return found
