"""What a pack's author said about isolation, read from its manifests: the registry name and
display name of `pyproject.toml`'s `[project]` and `[tool.comfy]`, ComfyUI's own isolation
table (`[tool.comfy.isolation]`, whose `can_isolate` the isolation branch of ComfyUI reads),
and pyisolate's `isolated` switch. Only an explicit no keeps a pack in ComfyUI's process:
silence is the common case, and adopt's point is to isolate packs whose authors said nothing.
A manifest that cannot be read says nothing here; `comfyctl pack add` reports it in full."""

import dataclasses
import os


@dataclasses.dataclass
class AuthorSays:
    project_name: str = None   # [project].name: the registry id, for a pack list's cnr entries
    display_name: str = None   # [tool.comfy].DisplayName
    refusal: str = None        # why the author keeps it in ComfyUI's process, when they do


def _toml(path):
    try:
        import tomllib
        with open(path, "rb") as data:
            return tomllib.load(data)
    except (ImportError, OSError, ValueError):
        return {}


def _yaml(path):
    try:
        import yaml
        with open(path, encoding="utf-8") as text:
            return yaml.safe_load(text)
    except Exception:  # noqa: BLE001 (PyYAML missing or the file unreadable: it says nothing)
        return {}


def read(pack_dir):
    says = AuthorSays()
    pyproject = _toml(os.path.join(pack_dir, "pyproject.toml"))
    project = pyproject.get("project") if isinstance(pyproject.get("project"), dict) else {}
    comfy = pyproject.get("tool", {}).get("comfy", {}) if isinstance(pyproject.get("tool"), dict) else {}
    comfy = comfy if isinstance(comfy, dict) else {}
    isolation = comfy.get("isolation") if isinstance(comfy.get("isolation"), dict) else {}
    if isinstance(project.get("name"), str):
        says.project_name = project["name"]
    if isinstance(comfy.get("DisplayName"), str):
        says.display_name = comfy["DisplayName"]
    if isolation.get("can_isolate") is False:
        says.refusal = "its pyproject.toml says [tool.comfy.isolation] can_isolate = false"
    pyisolate = _yaml(os.path.join(pack_dir, "pyisolate.yaml")) if os.path.isfile(
        os.path.join(pack_dir, "pyisolate.yaml")) else {}
    if isinstance(pyisolate, dict) and pyisolate.get("isolated") is False and not says.refusal:
        says.refusal = "its pyisolate.yaml says isolated: false"
    return says
