"""The packs a ComfyUI-Manager snapshot or a comfy-cli lock lists, as the names of their
folders in custom_nodes: a git pack under its repository's name, a registry (CNR) pack
under its id, a single file under its file name; those marked disabled left out.

A Manager snapshot (`ComfyUI-Manager/snapshots/*.json`, or YAML from `cm-cli save-snapshot
--output`) holds `git_custom_nodes` ({url: {"hash", "disabled"}}), `cnr_custom_nodes` ({id:
version}) and `file_custom_nodes` ([{"filename", "disabled"}]) at its top; comfy-cli's
`comfy-lock.yaml` holds the same under `custom_nodes`."""

import json
import os

from ..environments.errors import Refused

_SECTIONS = ("git_custom_nodes", "cnr_custom_nodes", "file_custom_nodes")


def _load(path):
    try:
        with open(path, encoding="utf-8") as text:
            content = text.read()
    except OSError as error:
        raise Refused(f"cannot read the pack list {path}: {error.strerror}; name a ComfyUI-Manager snapshot or a "
                      "comfy-cli comfy-lock.yaml") from None
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise Refused(f"{path} is YAML and this Python has no PyYAML; install it (Debian: python3-yaml)") from None
        try:
            return yaml.safe_load(content)
        except yaml.YAMLError as error:
            raise Refused(f"{path} is not YAML ({str(error).splitlines()[0]}); name the snapshot or lock as "
                          "Manager or comfy-cli wrote it") from None
    try:
        return json.loads(content)
    except ValueError as error:
        raise Refused(f"{path} is not JSON ({error}); name the snapshot as ComfyUI-Manager wrote it") from None


def _folder_of_url(url):
    name = url.rstrip("/").rsplit("/", 1)[-1]
    return name[:-len(".git")] if name.endswith(".git") else name


def _disabled(value):
    return value is True or (isinstance(value, dict) and value.get("disabled") is True)


def pack_names(path):
    """The folder names the list at `path` names, lower-cased (ComfyUI-Manager matches them so)."""
    data = _load(path)
    if isinstance(data, dict) and isinstance(data.get("custom_nodes"), dict):
        data = data["custom_nodes"]  # comfy-cli's lock
    if not isinstance(data, dict) or not any(section in data for section in _SECTIONS):
        raise Refused(f"{path} lists no packs (none of {', '.join(_SECTIONS)}); name a ComfyUI-Manager snapshot "
                      "or a comfy-cli comfy-lock.yaml")
    names = set()
    git = data.get("git_custom_nodes") or {}
    names |= {_folder_of_url(url) for url, value in git.items() if isinstance(url, str) and not _disabled(value)}
    cnr = data.get("cnr_custom_nodes") or {}
    names |= {name for name in cnr if isinstance(name, str)}
    for item in data.get("file_custom_nodes") or []:
        if isinstance(item, dict) and isinstance(item.get("filename"), str) and not _disabled(item):
            names.add(os.path.basename(item["filename"]))
    return {name.lower() for name in names}
