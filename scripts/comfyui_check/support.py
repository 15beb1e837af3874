"""comfyui-check's helpers (scripts/comfyui_check/check.py): the stand-ins for third-party
modules the interpreter lacks, and small helpers for processes, ports and files."""

import importlib.util
import json
import os
import pathlib
import shutil
import socket
import subprocess

MiB = 1024 * 1024
PROMPT_TIMEOUT_S = 300  # for a prompt's end

# Third-party modules ComfyUI imports while main.py starts, with the submodules imported
# by name. A module the interpreter has is never stubbed.
STUBS = {
    "safetensors": ["torch"],
    "transformers": [],
    "tokenizers": [],
    "torchsde": [],
    "einops": ["layers", "layers.torch"],
    "scipy": ["stats", "integrate", "ndimage"],
    "kornia": ["filters", "morphology", "color"],
    "spandrel": [],
}
STUB_BODY = '''"""Written by comfyui-check: {name} is not installed. ComfyUI imports it while it starts;
the check never uses it, and any use raises."""


class _Missing:
    def __init__(self, *args, **kwargs):
        raise ImportError("{name} is a stand-in written by comfyui-check; install the real package")


def __getattr__(attr):
    if attr.startswith("__"):
        raise AttributeError(attr)
    return type(attr, (_Missing,), {{}})
'''


# What a stand-in gives beside raising: transformers' CLIPTokenizer, which upstream's SD1
# tokenizer builds itself over (clip_tokenizer.py), so that the tiny models' CLIP is upstream's
# own SD1 CLIP.
WORKING = {"transformers": "clip_tokenizer"}


def write_stubs(folder):
    """A stand-in package in `folder` for each of STUBS the interpreter lacks; their names."""
    stubbed = []
    for top, subs in STUBS.items():
        if importlib.util.find_spec(top) is not None:
            continue
        stubbed.append(top)
        for name in [top] + [f"{top}.{sub}" for sub in subs]:
            package = folder.joinpath(*name.split("."))
            package.mkdir(parents=True, exist_ok=True)
            (package / "__init__.py").write_text(STUB_BODY.format(name=name))
        if top in WORKING:
            shutil.copy(pathlib.Path(__file__).with_name(f"{WORKING[top]}.py"), folder / top / f"{WORKING[top]}.py")
            with open(folder / top / "__init__.py", "a") as stub:
                stub.write(f"\n\nfrom .{WORKING[top]} import *  # noqa: E402,F401,F403 (what works of it)\n")
    return stubbed


def mib(nbytes):
    return f"{nbytes / MiB:.1f} MiB"


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes (its parent reaps it).
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_json(path, value):
    path.write_text(json.dumps(value, indent=1) + "\n")


def comfyui_version(folder):
    version = "?"
    try:
        for line in (folder / "comfyui_version.py").read_text().splitlines():
            if line.startswith("__version__"):
                version = line.split("=", 1)[1].strip().strip("\"'")
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
    return version + (f" (commit {commit.stdout.strip()[:12]})" if commit.returncode == 0 else "")
