"""The supervisor's JSON config as the pack command uses it: its defaults (the ComfyUI
checkout and interpreter, the optional `environments` section), and a pack's entry added,
replaced or taken out, the file rewritten atomically with its keys in their order, and
another pack command's write in the meantime kept.
Relative paths are the config folder's, as the supervisor reads them (docs/CONFIG.md)."""

import json
import os
import re

from .errors import Refused
from .files import held, replace_with_json

_PYTHON = re.compile(r"^python(3(\.\d+)?)?$")


def read_config(path, shown):
    try:
        with open(path, encoding="utf-8") as text:
            data = json.load(text)
    except OSError as error:
        raise Refused(f"cannot read the config {shown}: {error.strerror}; name the supervisor's config file") from None
    except ValueError as error:
        raise Refused(f"the config {shown} is not JSON ({error}); fix it, then run this again") from None
    if not isinstance(data, dict):
        raise Refused(f"the config {shown} is not a JSON object; name the supervisor's config file")
    return data


class Config:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.data = read_config(self.path, path)
        # What this command changed, replayed over the file as it is when written: another
        # add may have written it meanwhile (a build takes minutes), and its pack must stay.
        self._changes = []

    def path_of(self, value):
        return os.path.normpath(os.path.join(os.path.dirname(self.path), value)) if isinstance(value, str) else None

    def comfyui_checkout(self):
        return self.path_of(self.data.get("comfyui", {}).get("checkout"))

    def host_python(self):
        """The host's command when it is a Python interpreter (python, python3, python3.X)."""
        command = self.data.get("comfyui", {}).get("command")
        if isinstance(command, str) and _PYTHON.match(os.path.basename(command)):
            return self.path_of(command)
        return None

    def environments(self):
        section = self.data.get("environments", {})
        return {"root": self.path_of(section.get("root")),
                "find_links": [self.path_of(folder) for folder in section.get("find_links", [])],
                "no_index": bool(section.get("no_index", False)), "index_url": section.get("index_url")}

    def packs(self):
        return self.data.setdefault("packs", [])

    def entry(self, name):
        return next((pack for pack in self.packs() if isinstance(pack, dict) and pack.get("name") == name), None)

    def put(self, entry):
        """The entry added, or merged over the pack of its name (keys it does not set are kept);
        whether anything changed."""
        self._changes.append((self.put, entry))
        current = self.entry(entry["name"])
        if current is None:
            self.packs().append(json.loads(json.dumps(entry)))
            return True
        before = json.dumps(current, sort_keys=True)
        python = current.setdefault("python", {})
        current.pop("command", None)
        current.pop("args", None)
        python.pop("interpreter", None)  # the environment's interpreter is the pack's
        python.update(entry["python"])
        if "sandbox" in entry:
            current.setdefault("sandbox", entry["sandbox"])  # a sandbox of the user's own stays as it is
        if "env" in entry:
            current.setdefault("env", {}).update(entry["env"])  # the user's other variables stay
        return json.dumps(current, sort_keys=True) != before

    def take(self, name):
        self._changes.append((self.take, name))
        entry = self.entry(name)
        if entry is None:
            raise Refused(f"no pack named \"{name}\" in {self.path}; name one of "
                          f"{', '.join(pack.get('name', '?') for pack in self.packs()) or 'its packs (it has none)'}")
        self.packs().remove(entry)
        return entry

    def write(self):
        """This command's changes made to the file as it is now, under the folder's lock, and
        written beside and renamed over, so the supervisor never reads half a file."""
        folder = os.path.dirname(self.path)
        # The folder, not the file, which each write replaces by a new one.
        with held(folder):
            changes, self._changes = self._changes, []
            self.data = read_config(self.path, self.path)
            for change, argument in changes:
                change(argument)
            self._changes = []
            replace_with_json(self.path, self.data)


def entry(name, pack_dir, env_dir, comfyui_args, sandbox=False, env=None):
    python = {"pack": pack_dir, "environment": env_dir}
    if comfyui_args:
        python["comfyui_args"] = list(comfyui_args)
    return {"name": name, "python": python, **({"sandbox": {}} if sandbox else {}), **({"env": env} if env else {})}
