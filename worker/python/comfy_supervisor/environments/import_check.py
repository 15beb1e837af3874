"""The import check: the pack's worker run with --describe exactly as the supervisor will
start it, by the supervisor itself. `comfy-supervisor check` reads a config that holds the
pack's entry alone (written beside the user's config, so its relative paths and working
directory are the same) and starts the worker with the environment the supervisor gives a
worker (the entry's env and env_allowlist, nothing else of the user's), in the entry's
bwrap sandbox when it has one, bounded by limits.ready_timeout_ms, and nothing it started
left behind.

Why the supervisor and not a copy here: what a worker is given (its environment, its command
line, the sandbox's mounts and the paths a sandboxed Python pack needs shown) is the
supervisor's to decide (config/, lifecycle/sandbox.cpp); a second copy of those rules in
Python would drift from them, and the check would then vouch for a start that is not the
real one."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from .errors import Refused

# comfyctl names the comfy-supervisor beside it here; otherwise the first on the PATH.
SUPERVISOR_VARIABLE = "COMFY_SV_SUPERVISOR"
_PREFIX = "comfy-supervisor: "
_NODES = re.compile(r"\((\d+) node class(?:es)?\)")
_NOT_IMPORTED = "does not import in its worker: "
_WORKER_ADVICE = "; fix the pack or its venv"


def supervisor_program():
    chosen = os.environ.get(SUPERVISOR_VARIABLE) or shutil.which("comfy-supervisor")
    if not chosen:
        raise Refused("the import check starts the pack's worker as the supervisor does, and there is no "
                      "comfy-supervisor on the PATH; run this as comfyctl pack add, or name the program in "
                      f"{SUPERVISOR_VARIABLE}")
    return chosen


def _config_of(entry, comfyui, config):
    """A config holding `entry` alone (its checkout named, as the user's config may name it
    in its comfyui section) and the user's limits (the import's time limit among them)."""
    entry = json.loads(json.dumps(entry))
    entry["python"].setdefault("comfyui", comfyui)
    data = {"packs": [entry]}
    if config and isinstance(config.data.get("limits"), dict):
        data["limits"] = config.data["limits"]
    return data


def _problem(line, shown_file, real_file, index):
    """check's line about the one-pack config, told of the user's: its name and the pack's
    place in it."""
    line = line[len(_PREFIX):] if line.startswith(_PREFIX) else line
    line = line.replace(shown_file, real_file)
    return line.replace("at /packs/0/", f"at /packs/{index}/").replace("at /packs/0:", f"at /packs/{index}:")


def run(name, entry, comfyui, config, env_dir, envs):
    """The number of node classes the pack describes in its worker, or Refused in one line:
    the worker's own when the pack does not import, else what check found."""
    program = supervisor_program()
    # Beside the user's config, so that its relative paths and the worker's working
    # directory are theirs; without one, in a folder of its own under the envs folder.
    own_folder = None if config else tempfile.mkdtemp(prefix=".import-check-", dir=envs)
    folder = os.path.dirname(config.path) if config else own_folder
    descriptor, path = tempfile.mkstemp(prefix=".pack-check-", suffix=".json", dir=folder)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as text:
            json.dump(_config_of(entry, comfyui, config), text, indent=2)
        done = subprocess.run([program, "check", path], capture_output=True, text=True, errors="replace",
                              stdin=subprocess.DEVNULL)
    except OSError as error:
        raise Refused(f"cannot run {program} check for the import check ({error.strerror}); name a comfy-supervisor "
                      f"in {SUPERVISOR_VARIABLE}") from None
    finally:
        os.unlink(path)
        if own_folder:
            shutil.rmtree(own_folder, ignore_errors=True)
    if done.returncode == 0:
        found = _NODES.search(done.stdout)
        return int(found.group(1)) if found else 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    real = config.path if config else "the pack's entry"
    index = next((index for index, pack in enumerate(config.packs()) if isinstance(pack, dict) and
                  pack.get("name") == name), 0) if config else 0
    said = _problem(lines[0], path, real, index) if lines else f"{program} check ended with status {done.returncode}"
    if _NOT_IMPORTED in said:
        # The worker's own advice (fix the pack or its venv) gives way to the tool's.
        cause = said.split(_NOT_IMPORTED, 1)[1].split(_WORKER_ADVICE, 1)[0]
        raise Refused(f"pack \"{name}\" does not import in its environment {env_dir}: "
                      f"{cause}; fix the pack or its declarations, then run this again "
                      "(the environment is kept)")
    raise Refused(f"pack \"{name}\" cannot be started as its worker would be: {said} (the environment {env_dir} is "
                  "kept)")
