"""The resolved set installed, exactly: each distribution by its version (or its URL when it
was asked for by one), with --no-deps and the same index options. uv does it where it is on
the PATH (`uv pip install --python ENV/bin/python`), pip otherwise; uv reads none of pip's
variables, so PIP_INDEX_URL, PIP_FIND_LINKS and PIP_NO_INDEX are passed to it as options."""

import os
import shutil
import sys

from . import processes
from .errors import InstallFailed


class Index:
    """Where distributions come from: the config's environments section, then the flags."""

    def __init__(self, index_url=None, find_links=(), no_index=False):
        self.index_url = index_url
        self.find_links = list(find_links)
        self.no_index = no_index

    def args(self):
        return ((["--index-url", self.index_url] if self.index_url else []) +
                [argument for folder in self.find_links for argument in ("--find-links", folder)] +
                (["--no-index"] if self.no_index else []))

    def for_uv(self, environ):
        """args() with pip's variables where no option says otherwise, as pip would read them."""
        index_url = self.index_url or environ.get("PIP_INDEX_URL")
        find_links = self.find_links or environ.get("PIP_FIND_LINKS", "").split()
        no_index = self.no_index or environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on")
        return Index(index_url, find_links, no_index).args()


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
    status, last = processes.run(line + ["--", *[item.spec for item in items]])
    if status != 0:
        blamed = processes.blame(last, [item.name for item in items])
        what = next((item.spec for item in items if item.name == blamed), "the resolved set")
        raise InstallFailed(f"installing {what} failed ({tool}, exit {status}): "
                            f"{processes.tail(last)}")
