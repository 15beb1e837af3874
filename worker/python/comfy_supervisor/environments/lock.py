"""comfy-env.lock.json: what an environment was built from and what was installed in it,
with versions and sha256. It is written last, atomically, so its presence says the
environment is complete."""

import json
import os

from .files import replace_with_json

NAME = "comfy-env.lock.json"
FORMAT = 1


class LockError(Exception):
    """A lock that is there but cannot be read: one line."""


def read(env_dir):
    """The lock of `env_dir`, or None when it has none."""
    path = os.path.join(env_dir, NAME)
    try:
        with open(path, encoding="utf-8") as text:
            lock = json.load(text)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise LockError(f"{path} is unreadable ({error})") from None
    if not isinstance(lock, dict) or lock.get("format") != FORMAT or not isinstance(lock.get("key"), str) \
            or not isinstance(lock.get("inputs"), dict):
        raise LockError(f"{path} is not a format {FORMAT} lock")
    return lock


def write(env_dir, key, inputs, packages):
    """The lock, replaced whole, so a reader sees all of it or none."""
    replace_with_json(os.path.join(env_dir, NAME),
                      {"format": FORMAT, "key": key, "inputs": inputs, "packages": packages}, sort_keys=True)
