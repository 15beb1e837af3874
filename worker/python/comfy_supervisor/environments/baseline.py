"""What of ComfyUI's own environment a pack's environment sees and is keyed by: the host
interpreter, its site dirs (the pack's environment reads them after its own), the versions
of torch, torchvision, torchaudio and numpy found there, and ComfyUI's requirements.txt.
The versions are read from the site dirs' metadata (importlib.metadata), never by importing
anything, so a pack's worker can check them at every start at little cost."""

import importlib.metadata
import json
import os
import subprocess

from .files import file_sha256
from .requirement import canonical

PACKAGES = ("torch", "torchvision", "torchaudio", "numpy")

# Run by the host's interpreter: the interpreter as a venv made from it runs (the base's,
# which a venv of a venv names too), its version, and the site dirs that exist.
_PROBE = """import json, os, site, sys
dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
print(json.dumps({"path": os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
                  "version": "%d.%d.%d" % sys.version_info[:3],
                  "site_dirs": [os.path.realpath(d) for d in dirs if os.path.isdir(d)]}))"""


class HostError(Exception):
    """The host interpreter cannot be run or asked: one line saying what to do."""


def probe(host_python):
    """{"path", "version", "site_dirs"} of the host interpreter, asked once."""
    try:
        done = subprocess.run([host_python, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except OSError as error:
        raise HostError(f"cannot run the host's Python {host_python}: {error.strerror}; name ComfyUI's "
                        "interpreter with --host-python") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise HostError(f"the host's Python {host_python} failed to say its site dirs ({last}); name ComfyUI's "
                        "interpreter with --host-python")
    host = json.loads(done.stdout)
    major, minor = (int(part) for part in host["version"].split(".")[:2])
    if (major, minor) < (3, 9):
        raise HostError(f"the host's Python {host_python} is {host['version']}, and comfy_supervisor needs 3.9 "
                        "or newer; name a newer interpreter with --host-python")
    return host


def package_versions(site_dirs, names=PACKAGES):
    """{name: version or None} of `names` as the first of `site_dirs` to hold each has it,
    as an import finds it."""
    wanted = {canonical(name): name for name in names}
    found = {}
    for site_dir in site_dirs:
        for distribution in importlib.metadata.distributions(path=[site_dir]):
            name = canonical(distribution.metadata["Name"] or "")
            if name in wanted and wanted[name] not in found:
                found[wanted[name]] = distribution.version
    return {name: found.get(name) for name in names}


def of_host(site_dirs, comfyui_dir):
    """The baseline as the key takes it."""
    return {"comfyui_requirements": file_sha256(os.path.join(comfyui_dir, "requirements.txt")),
            "packages": package_versions(site_dirs), "site_dirs": list(site_dirs)}
