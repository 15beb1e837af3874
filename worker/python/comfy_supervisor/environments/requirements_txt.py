"""requirements.txt as pip reads it, for what a pack declares: comments, blank lines,
continued lines and `-r` includes, each include inside the pack's folder (pack_folder); every
other option line is reported, since the index and the wheelhouse are the user's to choose
(docs/ENVIRONMENTS.md)."""

import os
import re

from . import pack_folder
from .requirement import ManifestError

_INCLUDE = re.compile(r"^(?:-r|--requirement)(?:\s+|=)(\S+)$")
_COMMENT = re.compile(r"(^|\s+)#.*$")


def _logical_lines(text, where):
    """(line number, text) of each line, continuations joined and comments cut."""
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        line = _COMMENT.sub("", line) if not line.lstrip().startswith("#") else ""
        if len(pending) + len(line) > pack_folder.MAX_LINE_CHARS:
            raise ManifestError(f"{where}:{start}: a line of more than {pack_folder.MAX_LINE_CHARS} characters; "
                                "shorten it")
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        yield start, (pending + line).strip()
        pending = ""
    if pending.strip():
        yield start, pending.strip()


def read(folder, path, found, seen=None):
    """The requirements of `path` (and of what it includes) added to `found`, each with its
    file and line as the pack names them; an option line is a note."""
    seen = set() if seen is None else seen
    where = folder.shown(path)
    real = os.path.realpath(path)
    if real in seen:
        return
    text = folder.read(path, where)
    seen.add(real)
    for number, line in _logical_lines(text, where):
        if not line:
            continue
        include = _INCLUDE.match(line)
        if include:
            target = os.path.join(os.path.dirname(path), include.group(1))
            if folder.inside(target) is None:
                raise ManifestError(f"{where}:{number}: -r {include.group(1)} leads outside the pack's folder; keep "
                                    "what it includes inside the pack")
            if not os.path.isfile(target):
                raise ManifestError(f"{where}:{number}: -r {include.group(1)}: no such file; fix the include")
            read(folder, target, found, seen)
        elif line.startswith("-"):
            found.note(f"{where}:{number}: \"{line[:200]}\" is not honoured: the index and wheelhouse come from the "
                       "config's environments section or --index-url/--find-links", f"{where}:{number}")
        else:
            found.add(line, f"{where}:{number}", folder)
