"""An environment's key: the sha256 of the canonical JSON of everything that went into it
(the pack's declarations, install.py's hash when it was run, the host's interpreter and
baseline). Equal inputs make one environment, whichever pack asks; a changed one, another."""

import hashlib
import json
import os

from .files import file_sha256


def install_py_hashes(pack_dirs):
    """The sha256 of each pack's install.py that exists, in the packs' order."""
    return [digest for digest in (file_sha256(os.path.join(folder, "install.py")) for folder in pack_dirs) if digest]


def inputs(declarations, install_py, host, baseline):
    """The key's inputs, as the lock records them. `install_py` is None when it was not run."""
    return {"declarations": declarations.normalized(), "install_py": install_py,
            "interpreter": {"path": host["path"], "version": host["version"]}, "baseline": baseline}


def key_of(inputs_):
    text = json.dumps(inputs_, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
