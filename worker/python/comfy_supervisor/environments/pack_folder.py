"""What the tool reads of a pack, and only that: files inside the pack's folder by real path.
A manifest that is a link out of the folder, an `-r` include or a path requirement that leads
out is refused in one line naming the reference as the pack wrote it, and nothing outside is
read, so nothing outside can reach a failure line (a CI log). Each file is bounded in size,
and a pack's requirements in number and length, so a hostile manifest costs one line, not
the tool's memory or the installer's command line. A path requirement is made absolute
from the pack's folder, never from wherever the tool was started."""

import os
import re
import urllib.parse
import urllib.request

from .requirement import ManifestError

MAX_FILE_BYTES = 1 << 20  # a manifest, or a file it includes
MAX_FILES = 64            # manifests and includes of one pack
MAX_LINE_CHARS = 8192     # one requirement, or one logical line of requirements.txt
MAX_ENTRIES = 2000        # requirements and option lines of one pack, every manifest together

# `file:` URLs, bare or after PEP 508's "name @": the URL, then what follows it (markers).
_FILE_URL = re.compile(r"^(?P<head>(?:[^@]*@\s*)?)(?P<url>file:[^\s;]+)(?P<rest>.*)$", re.IGNORECASE)
# "name @ ./sub" (no scheme): pip reads it as a path too.
_AT_PATH = re.compile(r"^(?P<head>[^@]*@\s*)(?P<path>[^\s;:]+)(?P<rest>.*)$")
# A bare path: what pip takes for one (a separator in it, or a leading dot), extras and
# markers after it.
_BARE_PATH = re.compile(r"^(?P<path>[^\s\[;]*(?:/|^\.)[^\s\[;]*)(?P<rest>.*)$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class PackFolder:
    """The pack's folder: where its files are read from, and what they are shown as."""

    def __init__(self, pack_dir):
        self.path = os.path.abspath(pack_dir)
        self.real = os.path.realpath(pack_dir)
        self.name = os.path.basename(os.path.normpath(self.path))
        self.files = 0

    def shown(self, path):
        """`path` as the pack names it: PACK/requirements.txt, PACK/sub/more.txt."""
        return os.path.normpath(os.path.join(self.name, os.path.relpath(path, self.path)))

    def inside(self, path):
        """The real path of `path` when it lies in the pack's folder, else None."""
        real = os.path.realpath(path)
        return real if real == self.real or real.startswith(self.real + os.sep) else None

    def read(self, path, shown, binary=False):
        """The file at `path` (shown as `shown`), whole, or ManifestError in one line."""
        self.files += 1
        if self.files > MAX_FILES:
            raise ManifestError(f"{shown}: more than {MAX_FILES} manifests and includes in the pack; include fewer "
                                "files")
        real = self.inside(path)
        if real is None:
            raise ManifestError(f"{shown} leads outside the pack's folder (a link, or ..); keep the pack's manifests "
                                "and what they include inside its folder")
        if not os.path.isfile(real):
            raise ManifestError(f"{shown} is not a file; make it one, or take it out of the pack")
        try:
            with open(real, "rb") as data:
                content = data.read(MAX_FILE_BYTES + 1)
        except OSError as error:
            raise ManifestError(f"{shown} cannot be read ({error.strerror}); make it readable") from None
        if len(content) > MAX_FILE_BYTES:
            raise ManifestError(f"{shown} is larger than {MAX_FILE_BYTES >> 20} MiB, more than any manifest needs; "
                                "shorten it")
        if binary:
            return content
        try:
            return content.decode("utf-8")
        except UnicodeDecodeError:
            raise ManifestError(f"{shown} is not UTF-8 text; fix the file") from None

    def _confined(self, path, reference, source):
        """The real path of the pack-relative `path`, or ManifestError naming `reference`."""
        if path.startswith("~"):
            path = os.sep + "~"  # the user's home: outside, whatever it holds
        real = self.inside(os.path.join(self.real, path))
        if real is None:
            raise ManifestError(f"{source}: {reference} leads outside the pack's folder; keep what the pack "
                                "installs from a path inside its folder")
        return real

    def localized(self, text, source):
        """A requirement's text with its path (./sub, sub/x.whl, file:..., name @ ./sub) made
        absolute from the pack's folder and confined to it; other requirements as they are."""
        match = _FILE_URL.match(text)
        if match:
            url = urllib.parse.urlparse(match["url"])
            if url.netloc not in ("", "localhost"):
                raise ManifestError(f"{source}: {match['url']} names another machine's file; name a file of the "
                                    "pack, or a package")
            real = self._confined(urllib.request.url2pathname(url.path), match["url"], source)
            return f"{match['head']}{urllib.parse.urljoin('file:', urllib.request.pathname2url(real))}{match['rest']}"
        match = _AT_PATH.match(text)
        if match and not _SCHEME.match(match["path"]) and ("/" in match["path"] or match["path"].startswith(".")):
            real = self._confined(match["path"], match["path"], source)
            return f"{match['head']}{urllib.parse.urljoin('file:', urllib.request.pathname2url(real))}{match['rest']}"
        match = _BARE_PATH.match(text)
        if match and "@" not in text and "://" not in text:
            return f"{self._confined(match['path'], match['path'], source)}{match['rest']}"
        return text
