"""Who can read an environment, and why one cannot be used.

An environment is made readable by every user of the machine (folders 0755, files
world-readable, executables world-executable), as a system site-packages is: it holds
published packages and nothing secret, and the user a config's worker runs as (the unit's
service user) is often not the one who built it (root, in the /etc flow). Handing it to the
config's owner instead (chown) would not do: a config in /etc is root's while its workers
run as another user, and one environment serves every config that names it.

problem() names the real cause of an environment that cannot be used, in a few words:
missing, unreadable by this user (which path, whose, which mode), or unfinished."""

import os
import pwd
import stat

from . import lock


def user_name(uid=None):
    uid = os.geteuid() if uid is None else uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _opened_mode(mode):
    """`mode` with read (and search or execute, where the owner has it) for everyone."""
    if stat.S_ISDIR(mode):
        return mode | 0o755
    return mode | 0o444 | (0o111 if mode & stat.S_IXUSR else 0)


def open_to_all(folder):
    """Every folder and file under `folder` (itself too) made readable by every user; links
    are left as they are (a link's own mode means nothing). The number of paths changed."""
    changed = 0
    for path in [folder] + [os.path.join(top, name) for top, dirs, files in os.walk(folder)
                            for name in dirs + files]:
        found = os.lstat(path)
        if stat.S_ISLNK(found.st_mode):
            continue
        wanted = _opened_mode(found.st_mode)
        if wanted != found.st_mode:
            os.chmod(path, stat.S_IMODE(wanted))
            changed += 1
    return changed


def make_root(envs):
    """The environments folder, made when missing and then readable by every user (a umask
    of 077 would otherwise keep its environments from the service user)."""
    if not os.path.isdir(envs):
        os.makedirs(envs, exist_ok=True)
        os.chmod(envs, stat.S_IMODE(os.stat(envs).st_mode) | 0o755)


def _blocker(path):
    """The first folder on the way to `path` this user cannot search, else `path` itself."""
    parts = os.path.abspath(path).split(os.sep)[1:]
    for depth in range(1, len(parts)):
        folder = os.sep + os.path.join(*parts[:depth])
        if not os.access(folder, os.X_OK, effective_ids=True):
            return folder
    return path


def denied(path):
    """The words for a permission denied on the way to `path`: which path, whose, which mode."""
    blocker = _blocker(path)
    try:
        found = os.stat(blocker)
        whose = f", {user_name(found.st_uid)}'s, mode {stat.S_IMODE(found.st_mode):04o}"
    except OSError:
        whose = ""
    return f"cannot be read by user {user_name()} (permission denied on {blocker}{whose})"


class Problem:
    """Why an environment cannot be used: `kind` is "missing", "denied" or "unfinished";
    `words` complete "the environment ENV ...". `owner` is the user who can repair a denied
    one (an add run again as them makes it readable to every user), when known."""

    def __init__(self, kind, words, owner=None):
        self.kind, self.words, self.owner = kind, words, owner

    def __str__(self):
        return self.words


def _owner(env_dir):
    try:
        return user_name(os.stat(env_dir).st_uid)
    except OSError:
        return None


def problem(env_dir):
    """None when this user can read the environment's lock (it is finished, as far as its
    presence says); else the Problem."""
    lock_path = os.path.join(env_dir, lock.NAME)
    try:
        with open(lock_path, "rb"):
            return None
    except PermissionError:
        return Problem("denied", denied(lock_path), _owner(env_dir))
    except (FileNotFoundError, NotADirectoryError):
        pass
    try:
        found = os.stat(env_dir)
    except FileNotFoundError:
        return Problem("missing", "is missing")
    except PermissionError:
        return Problem("denied", denied(env_dir))
    if not stat.S_ISDIR(found.st_mode):
        return Problem("missing", "is not a folder")
    return Problem("unfinished", f"is unfinished (no {lock.NAME}: its build never ended)")
