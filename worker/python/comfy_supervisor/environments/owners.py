"""Which configs use an environments folder, and which of its environments each names.

An environment is kept while any config on the machine names it: several configs (one per
GPU) often share one folder, and a pack removed from one must not take the environment
from under the others. The configs looked at are

- those recorded in ENVS/.configs/: one file per config that an add (or an adopt, or
  `comfyctl env` with --config) used with this folder, named by the sha256 of the config's
  real path and holding that path; a record whose config is gone is dropped;
- every /etc/comfy-supervisor/*.json (the unit's configs), always;
- the config the command was given.

A config that exists but cannot be read or parsed might name any environment: it is a
doubt, and nothing is deleted while there is one.

ENVS/.owners.lock orders the commands that decide over the folder: an add holds it shared
from before its build until its config is written (adding()), so several adds run at once;
remove and gc hold it exclusively (deciding()) while they choose what to delete, so an
environment an add has built and is about to name is never taken."""

import contextlib
import fcntl
import glob
import hashlib
import os

from . import access
from .config_entry import Config
from .errors import Refused
from .processes import say

RECORDS = ".configs"
LOCK = ".owners.lock"
SYSTEM_CONFIGS = "/etc/comfy-supervisor"


def _record_path(envs, config_path):
    real = os.path.realpath(config_path)
    return os.path.join(envs, RECORDS, hashlib.sha256(real.encode("utf-8")).hexdigest()), real


def register(envs, config_path):
    """`config_path` recorded as a user of the environments folder `envs` (made if missing)."""
    record, real = _record_path(envs, config_path)
    folder = os.path.dirname(record)
    access.make_root(folder)
    try:
        with open(record, encoding="utf-8") as text:
            if text.read().strip() == real:
                return
    except FileNotFoundError:
        pass
    temporary = f"{record}.{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as text:
        text.write(real + "\n")
    os.chmod(temporary, 0o644)
    os.replace(temporary, record)


def _recorded(envs):
    """The configs recorded under `envs`; the records of configs that are gone dropped."""
    found = []
    for record in glob.glob(os.path.join(envs, RECORDS, "*")):
        try:
            with open(record, encoding="utf-8") as text:
                path = text.read().strip()
        except OSError:
            continue
        if path and os.path.lexists(path):
            found.append(path)
            continue
        with contextlib.suppress(OSError):
            os.unlink(record)
    return found


class User:
    """One config, read: `names` {an environment's real path: [the names of its packs that
    use it]}, or `doubt` (what could not be read, and why: "the config X is not JSON (...)")
    and no names."""

    def __init__(self, path):
        self.path, self.names, self.doubt = path, {}, None
        try:
            config = Config(path)
        except Refused as error:
            self.doubt = str(error).split("; ")[0]  # the refusal's cause, without its advice
            return
        for pack in config.packs():
            python = pack.get("python") if isinstance(pack, dict) else None
            if not isinstance(python, dict):
                continue
            folder = python.get("environment")
            if not isinstance(folder, str):
                # A hand-written entry may name an environment's interpreter instead.
                interpreter = config.path_of(python.get("interpreter"))
                folder = os.path.dirname(os.path.dirname(interpreter)) if interpreter else None
            if folder:
                real = os.path.realpath(config.path_of(folder))
                self.names.setdefault(real, []).append(str(pack.get("name", "?")))


def users(envs, given=(), system_folder=SYSTEM_CONFIGS):
    """Every config that may use the environments under `envs`, each read once: the
    recorded ones, the system's, and `given`."""
    paths = _recorded(envs) + sorted(glob.glob(os.path.join(system_folder, "*.json"))) + list(given)
    seen, found = set(), []
    for path in paths:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            found.append(User(real))
    return found


def keepers(env_dir, users_):
    """[(config path, [pack names])] of the configs that name `env_dir`."""
    real = os.path.realpath(env_dir)
    return [(user.path, user.names[real]) for user in users_ if real in user.names]


def doubts(users_):
    return [user for user in users_ if user.doubt]


@contextlib.contextmanager
def _locked(envs, operation, waiting):
    access.make_root(envs)
    path = os.path.join(envs, LOCK)
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:
        # A folder another user owns (root's, read by the service user): its lock is
        # readable, and an flock needs no more.
        descriptor = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(descriptor, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            say(waiting)
            fcntl.flock(descriptor, operation)
        yield
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def adding(envs, config_path=None):
    """For an add (or an adopt) from before its build until its config is written: the
    config recorded as a user of `envs`, and no remove or gc deciding meanwhile."""
    with _locked(envs, fcntl.LOCK_SH, f"waiting for a remove or gc under {envs} to finish"):
        if config_path:
            try:
                register(envs, config_path)
            except PermissionError:
                say(f"  note: {config_path} is not recorded as a user of {envs}, which is another user's; an add "
                    f"run as {access.user_name(os.stat(envs).st_uid)} records it (until then a gc may take what it "
                    "names, unless it is in /etc/comfy-supervisor)")
        yield


@contextlib.contextmanager
def deciding(envs):
    """For a remove or a gc choosing what to delete under `envs`: no add in flight."""
    with _locked(envs, fcntl.LOCK_EX, f"waiting for the adds running under {envs} to finish"):
        yield
