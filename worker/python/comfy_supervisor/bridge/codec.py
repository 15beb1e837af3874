"""The bridge's value codec in C++ (worker/python_codec/bridge_codec.cpp), where this process
can load it; values.py's own Python codec otherwise, and always its reference.

Where it is looked for, the first that exists: $COMFY_BRIDGE_CODEC (a path; "python" turns it
off; an operator's, so not a COMFY_SV_ name, which the supervisor keeps for itself), beside the participant library the supervisor names in $COMFY_SV_LIBRARY (build/lib,
or the install's lib: both are built and installed together), and the repository's
build/lib. It is a stable-ABI module (abi3) for Python 3.10 and later: an older interpreter,
a pack environment or a pip install without it, or a module that fails to load, use the
Python codec, which gives the same values and the same errors (tests/fuzz/codec_compare.py).
"""

import importlib.util
import os
import pathlib
import sys

MODULE = "comfy_bridge_codec"
FILE_NAME = MODULE + ".abi3.so"


def candidates():
    """Where the module may be, in the order looked at."""
    given = os.environ.get("COMFY_BRIDGE_CODEC")
    if given:
        return [] if given == "python" else [pathlib.Path(given)]
    found = []
    library = os.environ.get("COMFY_SV_LIBRARY")
    if library:
        found.append(pathlib.Path(library).parent / FILE_NAME)
    found.append(pathlib.Path(__file__).resolve().parents[4] / "build" / "lib" / FILE_NAME)
    return found


def load():
    """The extension module, or None where this process cannot have it."""
    for path in candidates():
        if not path.is_file():
            continue
        try:
            spec = importlib.util.spec_from_file_location(MODULE, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except ImportError as error:  # another interpreter's ABI, or an older Python than the module's
            print(f"comfy-supervisor: the bridge's C++ codec {path} does not load here ({error}); values cross "
                  "through the Python codec (build it for this Python, or set COMFY_BRIDGE_CODEC=python)",
                  file=sys.stderr)
            return None
        return module
    return None
