"""The config adopt writes: its ComfyUI section (made when missing, the user's kept when
there), ComfyUI told to import only the packs that stay in its process, the supervisor's
custom node linked into custom_nodes, and the entries of packs adopt isolated earlier
recognised, so that a re-run touches only what changed. Every write is under the config
folder's lock and replaces the file whole, as `comfyctl pack add`'s, which runs beside it.

Which packs ComfyUI imports is said with its own flags, `--disable-all-custom-nodes
--whitelist-custom-nodes NAME...` (upstream since 2025), not by moving folders: ComfyUI-
Manager and comfy-cli keep finding, updating and listing every pack where they put it."""

import json
import os

from ..environments.config_entry import read_config
from ..environments.errors import Refused
from ..environments.files import held, replace_with_json
from .inventory import OWN_NODE, OWN_NODE_SOURCE

DISABLE_ALL = "--disable-all-custom-nodes"
WHITELIST = "--whitelist-custom-nodes"


def package_dir():
    """The folder holding the comfy_supervisor package this tool runs."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def knows_whitelist(comfyui_dir):
    try:
        with open(os.path.join(comfyui_dir, "comfy", "cli_args.py"), encoding="utf-8") as text:
            return WHITELIST in text.read()
    except OSError:
        return False


def read(path):
    """The config as it is now: {} where there is none yet (adopt makes it), else as `pack
    add` reads it, refused in one line when it cannot be read or is not a JSON object."""
    return read_config(path, path) if os.path.exists(path) else {}


def _update(path, change):
    """`change(data)` made to the file as it is now, under its folder's lock."""
    with held(os.path.dirname(path)):
        data = read(path)
        before = json.dumps(data, sort_keys=True)
        change(data)
        if json.dumps(data, sort_keys=True) != before:
            replace_with_json(path, data)
            return True
        return False


def ensure_base(path, comfyui_dir, host_python, envs, comfyui_args):
    """The ComfyUI section and the environments' root, where the config has none; a config
    that has them keeps its own. Whether the ComfyUI section was written."""
    written = []

    def change(data):
        if "comfyui" not in data:
            written.append(True)
        data.setdefault("comfyui", {
            "command": host_python,
            "args": [os.path.join(comfyui_dir, "main.py"), *comfyui_args],
            "working_directory": comfyui_dir,
            "checkout": comfyui_dir,
            "env": {"PYTHONPATH": package_dir()},
        })
        data["comfyui"].setdefault("checkout", comfyui_dir)
        data.setdefault("environments", {}).setdefault("root", envs)
        data.setdefault("packs", [])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _update(path, change)
    return bool(written)


def host_env(path):
    """The config's comfyui.env, as it is now."""
    section = read(path).get("comfyui")
    env = section.get("env") if isinstance(section, dict) else None
    return {name: value for name, value in env.items() if isinstance(value, str)} if isinstance(env, dict) else {}


def _without_whitelist(args):
    kept, skipping = [], False
    for arg in args:
        if arg == WHITELIST:
            skipping = True
        elif skipping and not arg.startswith("-"):
            continue
        elif arg != DISABLE_ALL:
            skipping = False
            kept.append(arg)
    return kept


def import_only(path, folders):
    """ComfyUI's own process imports the supervisor's custom node and `folders` alone, its
    whitelist last (it takes every word after it). Whether the file changed."""
    def change(data):
        host = data["comfyui"]
        host["args"] = _without_whitelist(host.get("args", [])) + [DISABLE_ALL, WHITELIST, OWN_NODE, *folders]
    return _update(path, change)


def adopted(data, custom_nodes):
    """{tuple of pack folders: entry name} of the entries whose packs all lie in custom_nodes:
    adopt's own, from an earlier run (or `comfyctl pack add` over the same folders)."""
    home = os.path.realpath(custom_nodes)
    # A pack linked into custom_nodes (a checkout of its own) is there under its real path.
    linked = {os.path.realpath(os.path.join(home, name)) for name in os.listdir(home)}
    found = {}
    for entry in data.get("packs", []):
        python = entry.get("python") if isinstance(entry, dict) else None
        folders = python.get("pack") if isinstance(python, dict) else None
        folders = [folders] if isinstance(folders, str) else folders
        if isinstance(folders, list) and folders and all(isinstance(folder, str) for folder in folders):
            real = tuple(os.path.realpath(folder) for folder in folders)
            if all(folder in linked or os.path.dirname(folder) == home for folder in real):
                found[real] = entry.get("name")
    return found


def link_own_node(custom_nodes):
    """The supervisor's custom node linked into custom_nodes (it registers the isolated
    packs' nodes in ComfyUI); whether the link was made."""
    source = os.path.join(package_dir(), OWN_NODE_SOURCE)
    link = os.path.join(custom_nodes, OWN_NODE)
    if os.path.lexists(link):
        if os.path.realpath(link) == os.path.realpath(source):
            return False
        raise Refused(f"{link} exists and is not the supervisor's custom node ({source}); move it away, then run "
                      "adopt again")
    if not os.path.isdir(source):
        raise Refused(f"the supervisor's custom node is not at {source}; reinstall comfy-supervisor")
    os.symlink(source, link)
    return True
