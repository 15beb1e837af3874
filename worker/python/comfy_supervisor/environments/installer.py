"""The resolved set installed, exactly: each distribution by its version (or its URL when it
was asked for by one), with --no-deps and the same index options. uv does it where it is on
the PATH (`uv pip install --python ENV/bin/python`), pip otherwise; uv reads none of pip's
variables, so PIP_INDEX_URL, PIP_FIND_LINKS and PIP_NO_INDEX are passed to it as options.
Wheels only unless the user allows sdists (a build runs the sdist's code); the requirements
go in a file, never on the command line, which a long list would overflow; and the
installer runs with only the variables it needs of the user's (environ())."""

import os
import shutil
import sys
import tempfile

from . import processes
from .errors import InstallFailed


class Index:
    """Where distributions come from: the config's environments section, then the flags."""

    def __init__(self, index_url=None, find_links=(), no_index=False, allow_sdist=False):
        self.index_url = index_url
        self.find_links = list(find_links)
        self.no_index = no_index
        self.allow_sdist = allow_sdist

    def args(self):
        return ((["--index-url", self.index_url] if self.index_url else []) +
                [argument for folder in self.find_links for argument in ("--find-links", folder)] +
                (["--no-index"] if self.no_index else []) +
                ([] if self.allow_sdist else ["--only-binary", ":all:"]))

    def for_uv(self, environ):
        """args() with pip's variables where no option says otherwise, as pip would read them."""
        index_url = self.index_url or environ.get("PIP_INDEX_URL")
        find_links = self.find_links or environ.get("PIP_FIND_LINKS", "").split()
        no_index = self.no_index or environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on")
        return Index(index_url, find_links, no_index, self.allow_sdist).args()


# What of the user's environment an installer keeps: where programs are, pip's and uv's own
# settings (PIP_*, UV_*, their config and cache folders), the locale, and what a download
# needs (proxies, certificates). Nothing else: an sdist's build, when allowed, runs in it,
# and a token of the user's shell is not its to read.
_KEPT = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "http_proxy",
         "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
         "REQUESTS_CA_BUNDLE"}


def environ(source=None):
    """The installer's environment: the variables of `source` (ours) that it needs."""
    source = os.environ if source is None else source
    return {name: value for name, value in source.items() if name in _KEPT or name.startswith(("PIP_", "UV_"))}


def requirements_file(folder, texts):
    """A requirements file in `folder` holding `texts`, one a line, for `-r`."""
    path = os.path.join(folder, "requirements.txt")
    with open(path, "w", encoding="utf-8") as text:
        text.writelines(f"{line}\n" for line in texts)
    return path


def pip_command():
    """This interpreter's pip, which runs for the environment's interpreter with --python."""
    return [sys.executable, "-m", "pip"]


def command(env_python, index, uv, environ=os.environ):
    """The installer's command line, before the distributions: uv's when `uv` (its path) is
    given, pip's otherwise."""
    if uv:
        return [uv, "pip", "install", "--python", env_python, "--no-deps", *index.for_uv(environ)]
    return pip_command() + ["--python", env_python, "install", "--no-deps", "--progress-bar", "off",
                            *index.args()]


def install(items, env_python, index):
    """The Items installed into the environment of `env_python`, or InstallFailed naming the
    one the installer failed on and its last lines."""
    if not items:
        return
    uv = shutil.which("uv")
    tool = "uv" if uv else "pip"
    line = command(env_python, index, uv)
    processes.say(f"installing with {tool}: "
                  f"{', '.join(f'{item.name} {item.version}' for item in items)}")
    with tempfile.TemporaryDirectory(prefix="comfy-env-install-") as folder:
        listed = requirements_file(folder, [item.spec for item in items])
        status, last = processes.run(line + ["-r", listed], env=environ())
    if status != 0:
        blamed = processes.blame(last, [item.name for item in items])
        what = next((item.spec for item in items if item.name == blamed), "the resolved set")
        raise InstallFailed(f"installing {what} failed ({tool}, exit {status}): "
                            f"{processes.tail(last)}")
