"""One requirement a pack declares, where it declared it, and the error a manifest raises."""

import re

_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_URL = re.compile(r"^[A-Za-z0-9+.-]+://")


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

    def __repr__(self):
        return f"{self.text} ({self.source})"
