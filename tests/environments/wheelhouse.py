"""Wheels made by hand for the environment check, as no package index is reachable: a wheel
is a zip of the module and NAME-VERSION.dist-info/{METADATA,WHEEL,RECORD}. And one sdist,
whose build logs to a file each time its code runs: it must run only when allowed."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def wheel(folder, name, version, requires=(), files=None):
    """The wheel's path; `files` (path: text) replace the module `name` saying its version."""
    dist = f"{name}-{version}.dist-info"
    contents = dict(files or {f"{name}/__init__.py": f"VERSION = {version!r}\n"})
    contents[f"{dist}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" +
                                    "".join(f"Requires-Dist: {line}\n" for line in requires))
    contents[f"{dist}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: environment_check\nRoot-Is-Purelib: true\n" \
                                "Tag: py3-none-any\n"
    encoded = {path: text.encode() for path, text in contents.items()}
    record = [_record_line(path, data) for path, data in encoded.items()] + [f"{dist}/RECORD,,"]
    encoded[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = os.path.join(folder, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in encoded.items():
            archive.writestr(member, data)
    return path


# The sdist's build backend (in its tree, so pip installs nothing to build it): each hook
# logs the names of the variables it was given, then builds the wheel with this module,
# which the sdist carries beside it.
_BACKEND = """import json, os
import wheelhouse

def _ran(hook):
    with open({log!r}, "a", encoding="utf-8") as log:
        log.write(json.dumps({{"hook": hook, "environ": sorted(os.environ)}}) + "\\n")

def get_requires_for_build_wheel(config_settings=None):
    _ran("get_requires_for_build_wheel")
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _ran("build_wheel")
    return os.path.basename(wheelhouse.wheel(wheel_directory, {name!r}, {version!r}))
"""


def sdist(folder, name, version, log):
    """NAME-VERSION.tar.gz, whose build code appends a line to `log` whenever it runs."""
    root = f"{name}-{version}"
    with open(__file__, encoding="utf-8") as own:
        files = {"pyproject.toml": "[build-system]\nrequires = []\nbuild-backend = \"backend\"\n"
                                   "backend-path = [\".\"]\n",
                 "backend.py": _BACKEND.format(log=log, name=name, version=version), "wheelhouse.py": own.read(),
                 "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}
    path = os.path.join(folder, f"{root}.tar.gz")
    with tarfile.open(path, "w:gz") as archive:
        for member, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{member}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def make(folder, sdist_log=None):
    """The check's wheelhouse: clashlib 1.0 and 2.0, numpy 1.26.3 and 2.0.0, a fake torch
    9.9.9 and needs_torch that pins it, `broken`, whose file would land outside the
    environment, which pip refuses at install (never at resolve), and the sdist `canary` 1.0
    (no wheel), whose build logs to `sdist_log` (by default beside the wheelhouse)."""
    os.makedirs(folder)
    for name, version in (("clashlib", "1.0"), ("clashlib", "2.0"), ("numpy", "1.26.3"), ("numpy", "2.0.0"),
                          ("torch", "9.9.9")):
        wheel(folder, name, version)
    wheel(folder, "needs_torch", "1.0", requires=["torch==9.9.9"])
    wheel(folder, "broken", "1.0", files={"../escape.py": "ESCAPED = True\n"})
    sdist(folder, "canary", "1.0", sdist_log or os.path.join(os.path.dirname(os.path.abspath(folder)), "sdist.log"))
