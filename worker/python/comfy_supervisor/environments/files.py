"""The room's file work: a file's sha256, a JSON file replaced whole (written beside and
renamed over, so a reader sees all of it or none), and an exclusive lock for a block."""

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile


def file_sha256(path):
    """The hex sha256 of the file at `path`, or None when there is none."""
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def replace_with_json(path, data, sort_keys=False):
    """`path` replaced by `data` as JSON indented by 2, fsynced first; the mode of the file
    it replaces is kept."""
    descriptor, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path))
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as text:
            json.dump(data, text, indent=2, sort_keys=sort_keys)
            text.write("\n")
            text.flush()
            os.fsync(text.fileno())
        if os.path.exists(path):
            os.chmod(temporary, os.stat(path).st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def held(path):
    """An exclusive flock on `path` for the block: a folder, or a lock file made if missing."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else os.O_CREAT)
    descriptor = os.open(path, flags, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)
