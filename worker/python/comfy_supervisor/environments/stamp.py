"""Whether a pack's environment still matches what it was built from, asked by the pack's
worker at every start inside the environment's own interpreter: stale_reason(). It reads
the lock, the pack's manifests and the host's package metadata, and runs nothing."""

import os
import platform
import sys

from . import access, baseline, key, lock, manifests
from .requirement import ManifestError


def _today(recorded, pack_dirs, comfyui_dir):
    """The key's inputs as they are now, seen from inside the environment. The host's site
    dirs are those the environment was built over (its .pth reads them): a host whose dirs
    move changes its interpreter too, or loses a dir, which is said."""
    version = platform.python_version()
    declarations = manifests.read_packs(pack_dirs, ".".join(version.split(".")[:2]))
    install_py = key.install_py_hashes(pack_dirs) if recorded.get("install_py") is not None else None
    interpreter = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    site_dirs = recorded.get("baseline", {}).get("site_dirs", [])
    host = {"path": interpreter, "version": version}
    return key.inputs(declarations, install_py, host, baseline.of_host(site_dirs, comfyui_dir)), declarations


def _changes(was, now):
    return [name for name in sorted(set(was) | set(now)) if was.get(name) != now.get(name)]


def _difference(recorded, today, declarations):
    """The first input that changed, in words."""
    was_host, now_host = recorded.get("interpreter", {}), today["interpreter"]
    if was_host != now_host:
        return f"the host's Python is now {now_host['version']} at {now_host['path']} (was " \
               f"{was_host.get('version')} at {was_host.get('path')})"
    gone = [folder for folder in today["baseline"]["site_dirs"] if not os.path.isdir(folder)]
    if gone:
        return f"the host's site dir {gone[0]} is gone"
    was_base, now_base = recorded.get("baseline", {}), today["baseline"]
    for name in _changes(was_base.get("packages", {}), now_base["packages"]):
        now = now_base["packages"].get(name)
        return f"the host's {name} is now {now}" if now else f"the host no longer has {name}"
    if was_base.get("comfyui_requirements") != now_base["comfyui_requirements"]:
        return "ComfyUI's requirements.txt changed"
    was, now = set(recorded.get("declarations", [])), set(today["declarations"])
    if was != now:
        added = [requirement for requirement in declarations.requirements if requirement.text in now - was]
        files = sorted({requirement.source.split(":")[0] for requirement in added}) or declarations.files
        parts = ([f"now {', '.join(sorted(now - was))}"] if now - was else []) + \
            ([f"no longer {', '.join(sorted(was - now))}"] if was - now else [])
        return f"{' and '.join(os.path.basename(file) for file in files) or 'its manifests'} changed " \
               f"({'; '.join(parts)})"
    if recorded.get("install_py") != today["install_py"]:
        return "install.py changed"
    return "its inputs changed"


def stale_reason(env_dir, pack_dirs, comfyui_dir):
    """None when the environment at `env_dir` was built from today's inputs for the packs at
    `pack_dirs` over the checkout `comfyui_dir`; else why not, in a few words: the real
    cause when it cannot be used at all (missing, unreadable by this user, unfinished)."""
    found = access.problem(env_dir)
    if found is not None:
        repair = f"; an add run again as {found.owner} makes it readable to every user" \
            if found.kind == "denied" and found.owner else ""
        return f"it {found.words}{repair}"
    try:
        recorded = lock.read(env_dir)
    except lock.LockError as error:
        return str(error)
    if recorded is None:
        return f"it is unfinished (no {lock.NAME})"  # taken away since problem() looked
    try:
        today, declarations = _today(recorded["inputs"], pack_dirs, comfyui_dir)
    except ManifestError as error:
        return str(error)
    if key.key_of(today) == recorded["key"]:
        return None
    return _difference(recorded["inputs"], today, declarations)
