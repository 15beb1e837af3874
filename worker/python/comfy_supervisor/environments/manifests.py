"""What a pack declares, read from the four manifests packs ship for the isolators: pip's
requirements.txt, PEP 621's pyproject.toml, comfy-env's comfy-env.toml and pyisolate's
pyisolate.yaml. Each is read whole: an unknown key stops the add in one line naming the
file, the key and the keys known; a known key this does not honour is a note the user
sees. docs/ENVIRONMENTS.md says what each key means here."""

import os
import platform
import sys

from . import requirements_txt
from .requirement import ManifestError, Requirement

MANIFESTS = ("requirements.txt", "pyproject.toml", "comfy-env.toml", "pyisolate.yaml")

_PEP621 = {"name", "version", "description", "readme", "requires-python", "license", "license-files", "authors",
           "maintainers", "keywords", "classifiers", "urls", "scripts", "gui-scripts", "entry-points",
           "dependencies", "optional-dependencies", "dynamic", "import-names", "import-namespaces"}
# comfy-env's own tables, then those it passes to pixi: known, and only noted.
_COMFY_ENV = {"python", "cuda", "pypi-dependencies", "target", "apt", "brew", "node_reqs", "options", "env_vars",
              "dependencies"}
_PIXI = {"workspace", "project", "system-requirements", "activation", "tasks", "feature", "environments",
         "pypi-options", "host-dependencies", "build-dependencies"}
_PYISOLATE = {"name", "isolated", "share_torch", "share_cuda_ipc", "dependencies"}
# pixi's platform names for this machine, for comfy-env's [target.PLATFORM] tables.
_PLATFORMS = {("linux", "x86_64"): "linux-64", ("linux", "aarch64"): "linux-aarch64"}


class Declarations:
    """A pack's requirements, the notes its manifests gave, and which manifests it has."""

    def __init__(self):
        self.requirements = []
        self.notes = []
        self.files = []

    def normalized(self):
        """The requirements as the key takes them: each once, in order, wherever declared."""
        return sorted({requirement.text for requirement in self.requirements})


def _known(file, keys, known, where=""):
    unknown = sorted(set(keys) - known)
    if unknown:
        raise ManifestError(f"{file}: unknown key {where}{unknown[0]!r} (known: {', '.join(sorted(known))}); "
                            "remove it, or tell us what it means")


def _toml(path, file):
    try:
        import tomllib
    except ImportError:
        raise ManifestError(f"{file}: reading it needs Python 3.11 or newer (tomllib), and this is "
                            f"{platform.python_version()}; run ComfyUI on Python 3.11 or newer") from None
    try:
        with open(path, "rb") as text:
            return tomllib.load(text)
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(f"{file}: not TOML ({error}); fix the file") from None


def _strings(value, file, key):
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ManifestError(f"{file}: {key} must be a list of strings, found {value!r}; fix the file")
    return value


def _pyproject(path, file, found):
    project = _toml(path, file).get("project")
    if project is None:
        return
    _known(file, project, _PEP621, "project.")
    for index, text in enumerate(_strings(project.get("dependencies", []), file, "project.dependencies")):
        found.requirements.append(Requirement(text, f"{file}: project.dependencies[{index}]"))
    if "dependencies" in project.get("dynamic", []):
        found.notes.append(f"{file}: project.dependencies is dynamic: only what requirements.txt lists is read")


def _pypi_dependency(name, value, file, key, base):
    """comfy-env's (pixi's) `name = "spec"` or `name = {version, extras, git, rev, url, path}`."""
    if isinstance(value, str):
        return f"{name}{'' if value.strip() == '*' else value}"
    if not isinstance(value, dict):
        raise ManifestError(f"{file}: {key}.{name} must be a version string or a table, found {value!r}")
    _known(file, value, {"version", "extras", "git", "rev", "branch", "tag", "url", "path"}, f"{key}.{name}.")
    extras = f"[{','.join(_strings(value.get('extras', []), file, f'{key}.{name}.extras'))}]" \
        if value.get("extras") else ""
    if "git" in value:
        ref = value.get("rev") or value.get("tag") or value.get("branch")
        return f"{name}{extras} @ git+{value['git']}{'@' + ref if ref else ''}"
    if "url" in value:
        return f"{name}{extras} @ {value['url']}"
    if "path" in value:
        return f"{name}{extras} @ file://{os.path.abspath(os.path.join(base, value['path']))}"
    version = value.get("version", "*")
    return f"{name}{extras}{'' if version.strip() == '*' else version}"


def _pypi_table(table, file, key, found, base):
    if not isinstance(table, dict):
        raise ManifestError(f"{file}: {key} must be a table, found {table!r}; fix the file")
    for name, value in table.items():
        found.requirements.append(Requirement(_pypi_dependency(name, value, file, key, base), f"{file}: {key}.{name}"))


def _comfy_env(path, file, found, python_version):
    data = _toml(path, file)
    _known(file, data, _COMFY_ENV | _PIXI)
    wanted = data.get("python")
    if wanted is not None and str(wanted) != python_version:
        raise ManifestError(f"{file}: python = {str(wanted)!r}, but a pack's environment runs ComfyUI's own "
                            f"interpreter, Python {python_version}, to share its torch; drop the key or run "
                            "the pack in ComfyUI's process")
    cuda = data.get("cuda", {})
    _known(file, cuda, {"packages"}, "cuda.")
    for name in _strings(cuda.get("packages", []), file, "cuda.packages"):
        found.requirements.append(Requirement(name, f"{file}: cuda.packages"))
    _pypi_table(data.get("pypi-dependencies", {}), file, "pypi-dependencies", found, os.path.dirname(path))
    here = _PLATFORMS.get((sys.platform, platform.machine()))
    for name, target in data.get("target", {}).items():
        _known(file, target, {"pypi-dependencies", "dependencies"}, f"target.{name}.")
        if name == here:
            _pypi_table(target.get("pypi-dependencies", {}), file, f"target.{name}.pypi-dependencies", found,
                        os.path.dirname(path))
    for key in sorted(set(data) & ({"apt", "brew", "dependencies", "node_reqs", "options", "env_vars"} | _PIXI)):
        found.notes.append(f"{file}: [{key}] is not honoured here (system, conda or node packages, pixi settings): "
                           "install what it names yourself")


def _pyisolate(path, file, found):
    try:
        import yaml
    except ImportError:
        raise ManifestError(f"{file}: reading it needs PyYAML, which {sys.executable} lacks; install it "
                            "(python3-yaml) or run with a Python that has it") from None
    try:
        with open(path, encoding="utf-8") as text:
            data = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise ManifestError(f"{file}: not YAML ({' '.join(str(error).split())}); fix the file") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{file}: expected a mapping of keys, found {type(data).__name__}; fix the file")
    _known(file, data, _PYISOLATE)
    for index, text in enumerate(_strings(data.get("dependencies", []) or [], file, "dependencies")):
        if text.startswith("-"):
            found.notes.append(f"{file}: dependencies[{index}] \"{text}\" is not honoured (pip options come from "
                               "the config or the command line)")
        else:
            found.requirements.append(Requirement(text, f"{file}: dependencies[{index}]"))
    if data.get("isolated") is False:
        found.notes.append(f"{file}: isolated: false is pyisolate's switch; this command isolates the pack as asked")
    if data.get("share_torch") is False:
        found.notes.append(f"{file}: share_torch: false is not honoured: a pack's environment always shares "
                           "ComfyUI's torch")
    if "share_cuda_ipc" in data:
        found.notes.append(f"{file}: share_cuda_ipc is the config's python.cuda_ipc here")


def read_pack(pack_dir, python_version, found=None):
    """The declarations of the pack at `pack_dir` (added to `found` when given), for a host
    whose Python is `python_version` ("3.11"); ManifestError for what cannot be read."""
    found = Declarations() if found is None else found
    pack = os.path.basename(os.path.normpath(pack_dir))
    for manifest in MANIFESTS:
        path = os.path.join(pack_dir, manifest)
        if not os.path.isfile(path):
            continue
        file = os.path.join(pack, manifest)
        found.files.append(file)
        if manifest == "requirements.txt":
            found.requirements += requirements_txt.read(path, os.path.dirname(os.path.normpath(pack_dir)),
                                                        found.notes)
        elif manifest == "pyproject.toml":
            _pyproject(path, file, found)
        elif manifest == "comfy-env.toml":
            _comfy_env(path, file, found, python_version)
        else:
            _pyisolate(path, file, found)
    return found


def read_packs(pack_dirs, python_version):
    """The declarations of a worker's packs (a group's, in order), together."""
    found = Declarations()
    for pack_dir in pack_dirs:
        read_pack(pack_dir, python_version, found)
    return found
