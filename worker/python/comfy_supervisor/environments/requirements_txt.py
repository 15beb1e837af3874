"""requirements.txt as pip reads it, for what a pack declares: comments, blank lines,
continued lines and `-r` includes; every other option line is reported, since the index
and the wheelhouse are the user's to choose (docs/ENVIRONMENTS.md)."""

import os
import re

from .requirement import ManifestError, Requirement

_INCLUDE = re.compile(r"^(?:-r|--requirement)(?:\s+|=)(\S+)$")
_COMMENT = re.compile(r"(^|\s+)#.*$")


def _logical_lines(path):
    """(line number, text) of each line, continuations joined and comments cut."""
    with open(path, encoding="utf-8") as text:
        physical = text.read().splitlines()
    pending, start = "", 0
    for number, line in enumerate(physical, 1):
        if not pending:
            start = number
        line = _COMMENT.sub("", line) if not line.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        yield start, (pending + line).strip()
        pending = ""
    if pending.strip():
        yield start, pending.strip()


def read(path, root, notes, seen=None):
    """The requirements of `path` (and of what it includes), each with its file and line
    relative to `root`; an option line is added to `notes`."""
    seen = set() if seen is None else seen
    real = os.path.realpath(path)
    if real in seen:
        return []
    seen.add(real)
    where = os.path.relpath(path, root)
    found = []
    for number, line in _logical_lines(path):
        if not line:
            continue
        include = _INCLUDE.match(line)
        if include:
            target = os.path.join(os.path.dirname(path), include.group(1))
            if not os.path.isfile(target):
                raise ManifestError(f"{where}:{number}: -r {include.group(1)}: no such file; fix the include")
            found += read(target, root, notes, seen)
        elif line.startswith("-"):
            notes.append(f"{where}:{number}: \"{line}\" is not honoured: the index and wheelhouse come from the "
                         "config's environments section or --index-url/--find-links")
        else:
            found.append(Requirement(line, f"{where}:{number}"))
    return found
