"""An environment built under its key: a venv of the host's interpreter, made without pip
in a folder beside the others, that reads the host's site dirs after its own (so ComfyUI's
torch is the pack's, and the pack's pins shadow the host's), resolved, installed, locked
last and renamed into place. A crash leaves only a `.building-*` folder, removed by the
next build of that key (or by `comfyctl env gc`); a lock file per key makes concurrent
builds of one key wait for the first, which the others then reuse. Made readable by every
user before the rename (access.py says why), so a root's build serves the service user."""

import glob
import os
import shutil
import subprocess
import tempfile

from . import access, install_script, installer, lock, processes, resolve
from .errors import InstallFailed, Refused
from .files import held

HOST_PTH = "_comfy_supervisor_host.pth"


def env_dir_of(envs, key):
    return os.path.join(envs, key[:16])


def complete(env_dir, key):
    """Whether `env_dir` holds a finished environment of `key`."""
    try:
        found = lock.read(env_dir)
    except lock.LockError:
        return False
    return found is not None and found["key"] == key


def site_dir_of(env_dir, version):
    major, minor = version.split(".")[:2]
    return os.path.join(env_dir, "lib", f"python{major}.{minor}", "site-packages")


def _make_venv(host_python, folder, site_dir, host_site_dirs):
    done = subprocess.run([host_python, "-m", "venv", "--without-pip", folder], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InstallFailed(f"{host_python} -m venv failed ({last}); install the venv module for it "
                            "(Debian: python3-venv)")
    # addsitedir, not a bare path: the host's own .pth files are read too, as in ComfyUI.
    with open(os.path.join(site_dir, HOST_PTH), "w", encoding="utf-8") as pth:
        pth.writelines(f"import site; site.addsitedir({folder_!r})\n" for folder_ in host_site_dirs)


def _relocate(folder, final):
    """Scripts and pyvenv.cfg name the folder they were made in: made to name `final`."""
    old, new = folder.encode(), final.encode()
    paths = [os.path.join(folder, "pyvenv.cfg")] + glob.glob(os.path.join(folder, "bin", "*"))
    for path in paths:
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as data:
            content = data.read()
        if old in content:
            with open(path, "wb") as data:
                data.write(content.replace(old, new))


def _refuse_protected_after_script(after, pack):
    replaced = sorted(name for name in after if resolve.protected(name))
    if replaced:
        raise Refused(f"pack \"{pack}\"'s install.py installed {replaced[0]} {after[replaced[0]]} into its "
                      "environment, which would replace ComfyUI's; add the pack without --run-install-py")


class Job:
    """What one build needs: the key and its inputs, the host, the pack and where to install from."""

    def __init__(self, envs, key, inputs, host, declarations, pack, pack_dirs, index, run_install_py):
        self.envs, self.key, self.inputs, self.host = envs, key, inputs, host
        self.declarations, self.pack, self.pack_dirs = declarations, pack, pack_dirs
        self.index, self.run_install_py = index, run_install_py


def _build(job, folder, final, host_python):
    site_dir = site_dir_of(folder, job.host["version"])
    _make_venv(host_python, folder, site_dir, job.host["site_dirs"])
    env_python = os.path.join(folder, "bin", "python")
    requirements = job.declarations.requirements
    items = resolve.resolve(installer.pip_command(), env_python, requirements, job.index) \
        if requirements else []
    resolve.refuse_protected(items, requirements, job.pack, job.inputs["baseline"]["packages"])
    met = len(job.declarations.normalized()) - sum(1 for item in items if item.requested)
    processes.say(f"resolved: {len(items)} to install"
                  f"{': ' + ', '.join(f'{item.name} {item.version}' for item in items) if items else ''}; "
                  f"{max(met, 0)} requirement(s) met by ComfyUI's environment")
    installer.install(items, env_python, job.index)
    packages = [item.locked() for item in items]
    after = None
    # A group's scripts in its packs' order, as ComfyUI-Manager would have run them.
    for pack_dir in job.pack_dirs if job.run_install_py else []:
        if not os.path.isfile(os.path.join(pack_dir, "install.py")):
            continue
        changed, after = install_script.run(pack_dir, folder, env_python, site_dir)
        _refuse_protected_after_script(after, job.pack)
        processes.say(f"install.py changed: {'; '.join(changed) if changed else 'nothing in the environment'}")
    if after is not None:
        locked = {package["name"] for package in packages}
        packages += [{"name": name, "version": version, "sha256": None, "source": "install.py"}
                     for name, version in sorted(after.items()) if name not in locked]
    _relocate(folder, final)
    lock.write(folder, job.key, job.inputs, packages)
    # mkdtemp made the folder 0700 and the lock's mkstemp 0600: readable by its builder alone.
    access.open_to_all(folder)


def ensure(job, host_python):
    """The environment of job.key, built unless a finished one is there: (its folder, built?)."""
    access.make_root(job.envs)
    final = env_dir_of(job.envs, job.key)
    short = job.key[:16]
    with held(os.path.join(job.envs, f".{short}.lock")):
        if complete(final, job.key):
            return final, False
        for leftover in glob.glob(os.path.join(job.envs, f".building-{short}-*")):
            shutil.rmtree(leftover, ignore_errors=True)
        if os.path.lexists(final):
            # Unfinished, or another key's sharing these 16 digits: out of the way first.
            aside = tempfile.mkdtemp(prefix=f".building-{short}-old-", dir=job.envs)
            os.rename(final, os.path.join(aside, "env"))
            shutil.rmtree(aside, ignore_errors=True)
        folder = tempfile.mkdtemp(prefix=f".building-{short}-", dir=job.envs)
        processes.say(f"building the environment {final} (key {short}...)")
        try:
            _build(job, folder, final, host_python)
            os.rename(folder, final)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return final, True
