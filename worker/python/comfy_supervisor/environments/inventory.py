"""What an environments folder holds, as `comfyctl env list` shows it and `gc` weighs it:
each environment (a folder named by its key's first 16 hex digits), its size, whether it
is finished, and the configs and packs that name it; and the `.building-*` folders a build
that did not end left. Only what the tool built counts as an environment (its lock, or a
venv's pyvenv.cfg, is in it): anything else in the folder is shown and never removed."""

import contextlib
import errno
import fcntl
import os
import stat

from . import access, lock, owners

BUILDING = ".building-"


def size_of(path):
    """The bytes `path` takes on disk, each file once however many links it has."""
    total, seen = os.lstat(path).st_blocks * 512, set()
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                found = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            if (found.st_dev, found.st_ino) not in seen:
                seen.add((found.st_dev, found.st_ino))
                total += found.st_blocks * 512
    return total


def shown_size(count):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return ""


def built_by_tool(path):
    return os.path.isfile(os.path.join(path, lock.NAME)) or os.path.isfile(os.path.join(path, "pyvenv.cfg"))


class Entry:
    """One folder of the environments folder: `kind` is "environment", "building" (a build's
    folder) or "other" (not the tool's); `state` says whether an environment is finished."""

    def __init__(self, envs, name, users):
        self.name, self.path = name, os.path.join(envs, name)
        self.key = name[len(BUILDING):][:16] if name.startswith(BUILDING) else name
        if name.startswith(BUILDING):
            self.kind, self.state = "building", "build folder"
        elif built_by_tool(self.path):
            self.kind = "environment"
            found = access.problem(self.path)
            self.state = "finished" if found is None else found.kind
        else:
            self.kind, self.state = "other", "other"
        self.bytes = size_of(self.path)
        self.users = owners.keepers(self.path, users) if self.kind == "environment" else []

    def as_json(self):
        return {"name": self.name, "path": self.path, "kind": self.kind, "state": self.state, "bytes": self.bytes,
                "used_by": [{"config": config, "packs": packs} for config, packs in self.users]}


def entries(envs, users):
    """Every folder under `envs` but the tool's own (.configs), in name order."""
    found = []
    for name in sorted(os.listdir(envs)):
        path = os.path.join(envs, name)
        if name == owners.RECORDS or os.path.islink(path) or not stat.S_ISDIR(os.lstat(path).st_mode):
            continue
        if name.startswith(".") and not name.startswith(BUILDING):
            continue  # the import check's own folder, while it runs
        found.append(Entry(envs, name, users))
    return found


@contextlib.contextmanager
def unless_building(envs, key):
    """Yields whether no build of `key` is running (its `.KEY.lock` is free); while the block
    runs, none can start."""
    path = os.path.join(envs, f".{key}.lock")
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield True
        return
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            yield False
            return
        yield True
    finally:
        os.close(descriptor)
