"""Wheels made by hand for the environment check, as no package index is reachable: a wheel
is a zip of the module and NAME-VERSION.dist-info/{METADATA,WHEEL,RECORD}."""

import base64
import hashlib
import os
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


def make(folder):
    """The check's wheelhouse: clashlib 1.0 and 2.0, numpy 1.26.3 and 2.0.0, a fake torch
    9.9.9 and needs_torch that pins it, and `broken`, whose file would land outside the
    environment, which pip refuses at install (never at resolve)."""
    os.makedirs(folder)
    for name, version in (("clashlib", "1.0"), ("clashlib", "2.0"), ("numpy", "1.26.3"), ("numpy", "2.0.0"),
                          ("torch", "9.9.9")):
        wheel(folder, name, version)
    wheel(folder, "needs_torch", "1.0", requires=["torch==9.9.9"])
    wheel(folder, "broken", "1.0", files={"../escape.py": "ESCAPED = True\n"})
