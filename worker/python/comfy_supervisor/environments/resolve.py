"""The pack's requirements resolved for its environment before anything is installed: pip's
`install --dry-run --report`, run for the environment's interpreter, where the host's
packages count as installed, so what ComfyUI's environment meets installs nothing. What
would replace ComfyUI's torch (torch, torchvision, torchaudio, triton, a CUDA wheel of
NVIDIA's) is refused here, naming the pack's requirement that pulls it in."""

import collections
import json
import os
import re
import tempfile
import urllib.parse
import urllib.request

from . import installer, processes
from .errors import InstallFailed, Refused
from .files import file_sha256
from .requirement import canonical

PROTECTED = {"torch", "torchvision", "torchaudio", "triton"}
_CUDA_WHEEL = re.compile(r"^nvidia-.+-cu\d+$")
_DEPENDENCY_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class Item:
    """One distribution the report would install."""

    def __init__(self, entry):
        metadata = entry["metadata"]
        self.name = canonical(metadata["name"])
        self.version = metadata["version"]
        self.requested = bool(entry.get("requested"))
        info = entry.get("download_info", {})
        self.url = info.get("url", "")
        self.direct = bool(entry.get("is_direct"))
        vcs = info.get("vcs_info")
        self.spec = (f"{metadata['name']} @ {vcs['vcs']}+{self.url}@{vcs['commit_id']}" if vcs else
                     f"{metadata['name']} @ {self.url}") if self.direct else f"{metadata['name']}=={self.version}"
        self.sha256 = _sha256(info)
        # Dependencies but those of extras: a path to a protected package, for its line.
        self.requires = [canonical(match.group(1)) for match in
                         (_DEPENDENCY_NAME.match(line) for line in metadata.get("requires_dist", [])
                          if "extra" not in line.partition(";")[2]) if match]

    def locked(self):
        return {"name": self.name, "version": self.version, "sha256": self.sha256, "source": self.url}


def _sha256(info):
    archive = info.get("archive_info", {})
    if archive.get("hashes", {}).get("sha256"):
        return archive["hashes"]["sha256"]
    if archive.get("hash", "").startswith("sha256="):
        return archive["hash"].split("=", 1)[1]
    url = info.get("url", "")
    if url.startswith("file://") and not info.get("dir_info"):
        return file_sha256(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
    return None


def protected(name):
    return name in PROTECTED or bool(_CUDA_WHEEL.match(name))


def resolve(pip, env_python, requirements, index):
    """The Items pip would install for `requirements` into the environment of `env_python`,
    from `index` (an installer.Index)."""
    with tempfile.TemporaryDirectory(prefix="comfy-env-report-") as folder:
        report = os.path.join(folder, "report.json")
        listed = installer.requirements_file(folder, [requirement.text for requirement in requirements])
        status, last = processes.run(pip + ["--python", env_python, "install", "--dry-run", "--report", report,
                                            "--progress-bar", "off", *index.args(), "-r", listed],
                                     env=installer.environ())
        if status != 0:
            blamed = processes.blame(last, [r.name for r in requirements if r.name])
            named = next((str(r) for r in requirements if r.name == blamed), "the pack's requirements")
            wheels = "" if index.allow_sdist else " (wheels only: a package that has only an sdist needs --allow-sdist)"
            raise InstallFailed(f"resolving {named} failed (pip, exit {status}){wheels}: {processes.tail(last)}")
        with open(report, encoding="utf-8") as text:
            return [Item(entry) for entry in json.load(text).get("install", [])]


def pulled_in_by(items, target, requirements):
    """The pack's requirement whose dependencies pull `target` in, walked from the items it
    asked for (pip's report names no parent), or None."""
    by_name = {item.name: item for item in items}
    for requirement in requirements:
        roots = [item for item in items if item.requested and item.name == requirement.name]
        queue, seen = collections.deque(roots), set()
        while queue:
            item = queue.popleft()
            if item.name == target:
                return requirement
            seen.add(item.name)
            queue.extend(by_name[name] for name in item.requires if name in by_name and name not in seen)
    return None


def refuse_protected(items, requirements, pack, host_versions):
    """Refused, before anything is installed, when `items` would replace ComfyUI's torch."""
    for item in items:
        if not protected(item.name):
            continue
        culprit = pulled_in_by(items, item.name, requirements)
        host = host_versions.get(item.name)
        raise Refused(f"pack \"{pack}\" would replace ComfyUI's {item.name}"
                      f"{f' {host}' if host else ''} with {item.name} {item.version}, pulled in by its requirement "
                      f"{culprit if culprit else 'list'}; drop or relax that requirement (torch stays ComfyUI's)")
