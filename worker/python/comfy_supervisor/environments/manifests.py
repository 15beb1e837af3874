"""What a pack declares, read from the four manifests packs ship for the isolators: pip's
requirements.txt, PEP 621's pyproject.toml, comfy-env's comfy-env.toml and pyisolate's
pyisolate.yaml. Each is read whole: an unknown key stops the add in one line naming the
file, the key and the keys known; a known key this does not honour is a note the user
sees. docs/ENVIRONMENTS.md says what each key means here."""

import os
import platform
import sys

from . import pack_folder, requirements_txt
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

    def _count(self, source):
        if len(self.requirements) + len(self.notes) >= pack_folder.MAX_ENTRIES:
            raise ManifestError(f"{source}: more than {pack_folder.MAX_ENTRIES} requirements and options in the "
                                "pack's manifests, more than any pack needs; shorten them")

    def add(self, text, source, folder):
        """The requirement `text` declared at `source`, its path (if any) from `folder`'s."""
        self._count(source)
        if len(text) > pack_folder.MAX_LINE_CHARS:
            raise ManifestError(f"{source}: a requirement of more than {pack_folder.MAX_LINE_CHARS} characters; "
                                "shorten it")
        # Each requirement is one line of the file pip reads them from: no option rides in.
        if any(word.startswith("-") for word in text.split()) or text.rstrip().endswith("\\"):
            raise ManifestError(f"{source}: \"{' '.join(text.split())}\" is not a requirement (pip options come "
                                "from the config or the command line); write the requirement alone")
        self.requirements.append(Requirement(folder.localized(" ".join(text.split()), source), source))

    def note(self, text, source):
        self._count(source)
        self.notes.append(text)

    def normalized(self):
        """The requirements as the key takes them: each once, in order, wherever declared."""
        return sorted({requirement.text for requirement in self.requirements})


def _known(file, keys, known, where=""):
    unknown = sorted(set(keys) - known)
    if unknown:
        raise ManifestError(f"{file}: unknown key {where}{unknown[0]!r} (known: {', '.join(sorted(known))}); "
                            "remove it, or tell us what it means")


def _shown(value):
    """A manifest's value in a line: repr, cut short."""
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _toml(folder, path, file):
    try:
        import tomllib
    except ImportError:
        raise ManifestError(f"{file}: reading it needs Python 3.11 or newer (tomllib), and this is "
                            f"{platform.python_version()}; run ComfyUI on Python 3.11 or newer") from None
    try:
        return tomllib.loads(folder.read(path, file))
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(f"{file}: not TOML ({error}); fix the file") from None


def _strings(value, file, key):
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ManifestError(f"{file}: {key} must be a list of strings, found {_shown(value)}; fix the file")
    return value


def _pyproject(folder, path, file, found):
    project = _toml(folder, path, file).get("project")
    if project is None:
        return
    if not isinstance(project, dict):
        raise ManifestError(f"{file}: [project] must be a table, found {_shown(project)}; fix the file")
    _known(file, project, _PEP621, "project.")
    for index, text in enumerate(_strings(project.get("dependencies", []), file, "project.dependencies")):
        found.add(text, f"{file}: project.dependencies[{index}]", folder)
    if "dependencies" in project.get("dynamic", []):
        found.note(f"{file}: project.dependencies is dynamic: only what requirements.txt lists is read", file)


def _pypi_dependency(name, value, file, key):
    """comfy-env's (pixi's) `name = "spec"` or `name = {version, extras, git, rev, url, path}`;
    a path is the pack's (pack_folder confines it)."""
    if isinstance(value, str):
        return f"{name}{'' if value.strip() == '*' else value}"
    if not isinstance(value, dict):
        raise ManifestError(f"{file}: {key}.{name} must be a version string or a table, found {_shown(value)}")
    _known(file, value, {"version", "extras", "git", "rev", "branch", "tag", "url", "path"}, f"{key}.{name}.")
    extras = f"[{','.join(_strings(value.get('extras', []), file, f'{key}.{name}.extras'))}]" \
        if value.get("extras") else ""
    for part in ("git", "rev", "tag", "branch", "url", "path", "version"):
        if part in value and not isinstance(value[part], str):
            raise ManifestError(f"{file}: {key}.{name}.{part} must be a string, found {_shown(value[part])}")
    if "git" in value:
        ref = value.get("rev") or value.get("tag") or value.get("branch")
        return f"{name}{extras} @ git+{value['git']}{'@' + ref if ref else ''}"
    if "url" in value:
        return f"{name}{extras} @ {value['url']}"
    if "path" in value:
        return f"{name}{extras} @ file:{value['path']}"
    version = value.get("version", "*")
    return f"{name}{extras}{'' if version.strip() == '*' else version}"


def _pypi_table(table, file, key, found, folder):
    if not isinstance(table, dict):
        raise ManifestError(f"{file}: {key} must be a table, found {_shown(table)}; fix the file")
    for name, value in table.items():
        found.add(_pypi_dependency(name, value, file, key), f"{file}: {key}.{name}", folder)


def _comfy_env(folder, path, file, found, python_version):
    data = _toml(folder, path, file)
    _known(file, data, _COMFY_ENV | _PIXI)
    wanted = data.get("python")
    if wanted is not None and str(wanted) != python_version:
        raise ManifestError(f"{file}: python = {_shown(str(wanted))}, but a pack's environment runs ComfyUI's own "
                            f"interpreter, Python {python_version}, to share its torch; drop the key or run "
                            "the pack in ComfyUI's process")
    cuda = data.get("cuda", {})
    _known(file, cuda, {"packages"}, "cuda.")
    for name in _strings(cuda.get("packages", []), file, "cuda.packages"):
        found.add(name, f"{file}: cuda.packages", folder)
    _pypi_table(data.get("pypi-dependencies", {}), file, "pypi-dependencies", found, folder)
    here = _PLATFORMS.get((sys.platform, platform.machine()))
    for name, target in data.get("target", {}).items():
        _known(file, target, {"pypi-dependencies", "dependencies"}, f"target.{name}.")
        if name == here:
            _pypi_table(target.get("pypi-dependencies", {}), file, f"target.{name}.pypi-dependencies", found, folder)
    for key in sorted(set(data) & ({"apt", "brew", "dependencies", "node_reqs", "options", "env_vars"} | _PIXI)):
        found.note(f"{file}: [{key}] is not honoured here (system, conda or node packages, pixi settings): "
                   "install what it names yourself", file)


def _pyisolate(folder, path, file, found):
    try:
        import yaml
    except ImportError:
        raise ManifestError(f"{file}: reading it needs PyYAML, which {sys.executable} lacks; install it "
                            "(python3-yaml) or run with a Python that has it") from None
    try:
        data = yaml.safe_load(folder.read(path, file)) or {}
    except yaml.YAMLError as error:
        raise ManifestError(f"{file}: not YAML ({' '.join(str(error).split())[:200]}); fix the file") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{file}: expected a mapping of keys, found {type(data).__name__}; fix the file")
    _known(file, data, _PYISOLATE)
    for index, text in enumerate(_strings(data.get("dependencies", []) or [], file, "dependencies")):
        if text.startswith("-"):
            found.note(f"{file}: dependencies[{index}] \"{text[:200]}\" is not honoured (pip options come from "
                       "the config or the command line)", file)
        else:
            found.add(text, f"{file}: dependencies[{index}]", folder)
    if data.get("isolated") is False:
        found.note(f"{file}: isolated: false is pyisolate's switch; this command isolates the pack as asked", file)
    if data.get("share_torch") is False:
        found.note(f"{file}: share_torch: false is not honoured: a pack's environment always shares "
                   "ComfyUI's torch", file)
    if "share_cuda_ipc" in data:
        found.note(f"{file}: share_cuda_ipc is the config's python.cuda_ipc here", file)


def read_pack(pack_dir, python_version, found=None):
    """The declarations of the pack at `pack_dir` (added to `found` when given), for a host
    whose Python is `python_version` ("3.11"); ManifestError for what cannot be read, or
    leads outside the pack's folder (pack_folder)."""
    found = Declarations() if found is None else found
    folder = pack_folder.PackFolder(pack_dir)
    for manifest in MANIFESTS:
        path = os.path.join(folder.path, manifest)
        if not os.path.lexists(path):
            continue
        file = folder.shown(path)
        found.files.append(file)
        if manifest == "requirements.txt":
            requirements_txt.read(folder, path, found)
        elif manifest == "pyproject.toml":
            _pyproject(folder, path, file, found)
        elif manifest == "comfy-env.toml":
            _comfy_env(folder, path, file, found, python_version)
        else:
            _pyisolate(folder, path, file, found)
    return found


def read_packs(pack_dirs, python_version):
    """The declarations of a worker's packs (a group's, in order), together."""
    found = Declarations()
    for pack_dir in pack_dirs:
        read_pack(pack_dir, python_version, found)
    return found
