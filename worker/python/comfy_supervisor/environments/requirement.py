"""One requirement a pack declares, where it declared it, and the error a manifest raises."""

import re

_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_URL = re.compile(r"^[A-Za-z0-9+.-]+://")
# What a requirement installs from when it names no index package: a URL (after PEP 508's
# "name @", or bare) or a path (already made absolute from the pack's folder: pack_folder).
_TARGET = re.compile(r"^(?:[^@]*@\s*)?((?:[A-Za-z0-9+.-]+:|/)[^\s;]*)")


class ManifestError(Exception):
    """A manifest this cannot read or honour: one line naming the file, the key and what to do."""


def canonical(name):
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


class Requirement:
    """`text` as pip takes it (a PEP 508 line or a URL), `source` the file and line or key."""

    def __init__(self, text, source):
        self.text = " ".join(text.split())
        self.source = source
        match = _NAME.match(self.text)
        # A bare URL or path names no distribution until pip reads it.
        bare = _URL.match(self.text) or self.text.startswith((".", "/"))
        self.name = canonical(match.group(1)) if match and not bare else None
        target = _TARGET.match(self.text)
        # pip builds what is not a wheel (a folder, an sdist, a VCS URL), running its build
        # code, even under --only-binary :all:.
        self.builds_from_source = bool(target) and not \
            target.group(1).split("#")[0].split("?")[0].lower().endswith(".whl")

    def __repr__(self):
        return f"{self.text} ({self.source})"
