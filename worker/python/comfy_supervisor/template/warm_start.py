"""In a worker just forked from the template: go on warm, in the template's memory, or exec the
pack's command and start cold, as the supervisor would have started it.

Warm only when what the template imported is exactly what the pack's own start would import:

- the command runs comfy_supervisor.pack_worker (the config's "python" form);
- every environment variable is the template's, but the life's own (COMFY_SV_*) and
  PYTHONPATH: a variable read at start-up or at torch's import (PYTHONDONTWRITEBYTECODE,
  OMP_NUM_THREADS...) could not be read again;
- the pack's interpreter is the template's version with its flags, and its sys.path, as that
  interpreter reports it (a venv's site-packages, its .pth files, the pack's PYTHONPATH),
  finds each module the template imported where the template found it: an environment
  that pins its own numpy gets its own numpy, by starting cold.

The worker then takes that sys.path, prefix and executable, and runs pack_worker as `-m`
would. Anything else is said in one line and the worker execs the pack's command, which
starts it as before, in the same process, still the supervisor's child.
"""

import importlib.machinery
import json
import os
import runpy
import subprocess
import sys

from . import forking

PACK_WORKER = "comfy_supervisor.pack_worker"
LIFE_PREFIX = "COMFY_SV_"
PROBE_TIMEOUT_S = 30.0
# What an interpreter started in the C locale sets LC_CTYPE to (PEP 538): the template's, when
# its environment had no locale, as a cold start of the same environment would.
_COERCED_LOCALES = ("C.UTF-8", "C.utf8", "UTF-8")
# What the pack's interpreter says of itself, the paths a -m start would have: sys.path[0]
# is the working directory for -m, "" for -c.
_PROBE = ("import json, sys; print(json.dumps({'path': sys.path, 'prefix': sys.prefix, "
          "'exec_prefix': sys.exec_prefix, 'executable': sys.executable, 'version': sys.version, "
          "'flags': list(sys.flags)}))")


def run(argv, environment, template_environment):
    """Never returns: the pack worker's run, warm, or an exec of `argv` (cold)."""
    try:
        probed = warm_paths(argv, environment, template_environment)
    except StartCold as why:
        print(f"pack_worker: started cold, not from the warm template: {why}", file=sys.stderr, flush=True)
        try:
            os.execve(argv[0], argv, environment)
        except OSError as error:
            print(f"pack_worker: cannot run {argv[0]}: {error.strerror}", file=sys.stderr, flush=True)
            os._exit(127)
    if "LC_CTYPE" not in environment and "LC_CTYPE" in template_environment:
        os.environ["LC_CTYPE"] = template_environment["LC_CTYPE"]  # as the interpreter's start would coerce it
    reseed()
    sys.path[:] = probed["path"]
    sys.prefix, sys.exec_prefix, sys.executable = probed["prefix"], probed["exec_prefix"], probed["executable"]
    importlib.invalidate_caches()
    name = argv[argv.index("--name") + 1] if "--name" in argv[:-1] else "pack_worker"
    forking.name_process(f"pack {name}", f"{argv[0]} -m {PACK_WORKER} --name {name} (forked from a warm template)")
    sys.argv = [argv[0], *argv[3:]]  # runpy puts the module's file first, as -m does
    runpy.run_module(PACK_WORKER, run_name="__main__", alter_sys=True)
    sys.exit(0)


class StartCold(Exception):
    """This pack cannot go on in the template's memory; the message is one line saying why."""


def reseed():
    """Random states drawn once in the template would be every worker's: numpy's global
    one is seeded at its import (Python's own random reseeds itself after a fork, and
    torch's default generator has one fixed seed in every process, cold or warm)."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()


def warm_paths(argv, environment, template_environment):
    """What the pack's interpreter says of its paths (sys.path with the working directory
    for "", prefix, exec_prefix, executable), when the pack can go on warm; else raises
    StartCold."""
    if argv[1:3] != ["-m", PACK_WORKER]:
        raise StartCold(f"its command is not {PACK_WORKER}'s")
    for name in sorted(set(environment) | set(template_environment)):
        if name.startswith(LIFE_PREFIX) or name == "PYTHONPATH":
            continue
        if name == "LC_CTYPE" and name not in environment and template_environment[name] in _COERCED_LOCALES:
            continue
        if environment.get(name) != template_environment.get(name):
            raise StartCold(f"its environment variable {name} is not the template's")
    try:
        done = subprocess.run([argv[0], "-c", _PROBE], env=environment, capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False)
        probed = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as error:
        raise StartCold(f"its interpreter {argv[0]} could not say its paths ({error})") from None
    if not isinstance(probed, dict):
        raise StartCold(f"its interpreter {argv[0]} could not say its paths (exit status {done.returncode})")
    if probed.get("version") != sys.version or probed.get("flags") != list(sys.flags):
        raise StartCold(f"its interpreter {argv[0]} is not the template's ({sys.version.split()[0]}, "
                        f"{sys.executable})")
    probed["path"] = [os.getcwd() if entry == "" else entry for entry in probed["path"]]
    shadowed = shadowed_module(probed["path"])
    if shadowed is not None:
        raise StartCold(shadowed)
    return probed


def shadowed_module(path):
    """One line naming a module the template imported that `path` finds elsewhere (or not at
    all), or None when it finds each where the template did."""
    for name, module in sorted(sys.modules.items()):
        if "." in name or module is sys.modules["__main__"]:
            continue  # a submodule is found through its package; the template's own main (also __mp_main__) is none
        loaded = getattr(module, "__spec__", None)
        if loaded is None or not loaded.has_location:
            continue  # built in, frozen, or a namespace package: nothing on the path to differ
        ours = importlib.machinery.PathFinder.find_spec(name, sys.path)
        if ours is None or ours.origin != loaded.origin:
            continue  # loaded from a file by name (an extension the package finds itself), as the pack's would be
        found = importlib.machinery.PathFinder.find_spec(name, path)
        if found is None or found.origin != loaded.origin:
            where = found.origin if found is not None else "nothing"
            return f"its environment finds {name} at {where}, the template's is {loaded.origin}"
    return None
