"""A pack's install.py, which many packs ship to pip-install at install time: never run
silently. Run only when the user asks (--run-install-py), in the pack's environment with the
pack as its folder, and what it changed there is said."""

import importlib.metadata
import os

from . import installer, processes
from .errors import InstallFailed
from .requirement import canonical


def installed(site_dir):
    """{name: version} of what the environment's own site dir holds."""
    return {canonical(dist.metadata["Name"] or ""): dist.version
            for dist in importlib.metadata.distributions(path=[site_dir])}


def changes(before, after):
    """What changed between two snapshots, as lines."""
    lines = [f"added {name} {after[name]}" for name in sorted(set(after) - set(before))]
    lines += [f"removed {name} {before[name]}" for name in sorted(set(before) - set(after))]
    lines += [f"{name} {before[name]} -> {after[name]}" for name in sorted(set(before) & set(after))
              if before[name] != after[name]]
    return lines


def run(pack_dir, env_dir, env_python, site_dir):
    """install.py run in the environment: (what it changed, {name: version} after)."""
    before = installed(site_dir)
    # The installer's environment (installer.environ()): none of the user's other variables.
    environ = dict(installer.environ(), VIRTUAL_ENV=env_dir,
                   PATH=os.pathsep.join([os.path.join(env_dir, "bin"), os.environ.get("PATH", "")]))
    processes.say(f"running {os.path.join(pack_dir, 'install.py')} in the pack's environment")
    status, last = processes.run([env_python, "install.py"], cwd=pack_dir, env=environ)
    if status != 0:
        raise InstallFailed(f"install.py of {pack_dir} failed (exit {status}): {processes.tail(last)}; fix it, "
                            "or add the pack without --run-install-py")
    after = installed(site_dir)
    return changes(before, after), after
