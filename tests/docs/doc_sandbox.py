"""A machine as the docs assume it, made with bubblewrap, for running a page's commands as
written: /srv/ComfyUI, /srv/comfy-supervisor, /etc/comfy-supervisor, /var/lib/comfy-supervisor
(where root's adopt keeps environments) and /usr/local are there and writable, and nothing written to them, or to the checkout, reaches the real machine.

Inside, the test is the sandbox's root, so `sudo` runs its command as it is (a real sudo
cannot raise a user namespace's root). The network is the sandbox's own loopback, so a page's
fixed port (8189) meets no other test, and every process ends with the sandbox.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

# What `cmake --install` writes under a prefix, made empty and writable inside; the rest of
# the real /usr/local (a CUDA toolkit the programs link) stays seen.
INSTALLED_FOLDERS = ("bin", "etc", "include", "lib", "sbin", "share")
# A Debian shell's PATH, as the pages assume, whatever this test's own (a pyenv's python3
# first, say) would find.
DEBIAN_PATH = "/srv/doc-test/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _shadow(folder: str, writable: tuple[str, ...]) -> list[str]:
    """bwrap arguments that put a tmpfs over `folder` and show each real entry again, except
    `writable`, which become empty folders of the tmpfs."""
    arguments = ["--tmpfs", folder]
    real = Path(folder)
    entries = sorted(os.listdir(real)) if real.is_dir() else []
    for name in entries:
        path = real / name
        if name in writable:
            continue
        if path.is_symlink():
            arguments += ["--symlink", os.readlink(path), str(path)]
        else:
            arguments += ["--dev-bind", str(path), str(path)]
    for name in writable:
        arguments += ["--dir", f"{folder}/{name}"]
    return arguments


# What a page takes as done by another page before it: OPERATIONS.md's config names the
# venv PACKS.md's steps make, and PACKS.md's `comfy-supervisor check` is the installed one.
GIVEN_BY_OTHER_PAGES = {
    "docs/OPERATIONS.md": "python3 -m venv --system-site-packages --without-pip /srv/venvs/impact\n",
    "docs/PACKS.md": "cmake --install build --prefix /usr/local >/dev/null  # INSTALL.md\n",
    "docs/ADOPTING.md": "cmake --install build --prefix /usr/local >/dev/null  # INSTALL.md\n",
}


def fixture_script(source: Path, page: str) -> str:
    """The shell lines that lay out, inside the sandbox, what the docs take as given: a
    ComfyUI checkout at /srv/ComfyUI (the project's stand-in for upstream, with a pack named
    as the docs' example in its custom_nodes), venvs for ComfyUI, the example pack's folder
    under /srv/isolated, and a C program in a CMake project around the lines the participant
    library's example shows (consumer.cmake)."""
    fake = shlex.quote(str(source / "tests/host/fake_comfyui"))
    pack = shlex.quote(str(source / "tests/packs/example_pack"))
    return f"""
mkdir -p /srv/ComfyUI/custom_nodes /srv/isolated /srv/venvs /srv/work /srv/home
cp -r {fake}/. /srv/ComfyUI/
printf 'torch\\nnumpy\\n' > /srv/ComfyUI/requirements.txt
cp -r {pack} /srv/ComfyUI/custom_nodes/ComfyUI-Impact-Pack
printf 'numpy\\n' > /srv/ComfyUI/custom_nodes/ComfyUI-Impact-Pack/requirements.txt
cp -r /srv/ComfyUI/custom_nodes/ComfyUI-Impact-Pack /srv/isolated/ComfyUI-Impact-Pack
python3 -m venv --system-site-packages --without-pip /srv/ComfyUI/venv
python3 -m venv --system-site-packages --without-pip /srv/venvs/comfyui
cat > /srv/work/my_host.c <<'FIXTURE_END'
#include <comfy_supervisor/participant_c_api.h>
#include <stdio.h>
int main(void) {{
    if (comfy_participant_open(0) == NULL) printf("%s\\n", comfy_participant_last_error());
    return 0;
}}
FIXTURE_END
cat > /srv/work/CMakeLists.txt <<'FIXTURE_END'
cmake_minimum_required(VERSION 3.20)
project(my_host C)
add_executable(my_host my_host.c)
include(consumer.cmake)
FIXTURE_END
""" + GIVEN_BY_OTHER_PAGES.get(page, "")


def sudo_shim() -> str:
    return 'while [ "${1:-}" != "${1#-}" ]; do case "$1" in -u|-g) shift 2 ;; *) shift ;; esac; done\nexec "$@"\n'


def copy_checkout(source: Path, into: Path) -> None:
    """The checkout as the page sees it: a copy, its files' times kept (so the build folder
    finds nothing to rebuild), without build folders, .git and what Python leaves; a page's
    writes into its checkout (a pip build's build/ and egg-info) land in the copy."""
    def left_out(folder, names):
        return [name for name in names if name in (".git", "__pycache__") or name.endswith(".egg-info")
                or (name.startswith("build") and os.path.isdir(os.path.join(folder, name)))]
    shutil.copytree(source, into, symlinks=True, ignore=left_out)


def bwrap_command(source: Path, checkout: Path, build: Path, scratch: Path, script: Path,
                  scratch_build: Path | None) -> list[str]:
    """The sandbox's command line: `script` runs in it, `checkout` (copy_checkout's) seen at
    the source's own path and at /srv/comfy-supervisor; `build` is the checkout's build folder
    there, or `scratch_build` when the page's own build commands run (so that the test's build
    is never reconfigured)."""
    command = ["bwrap", "--dev-bind", "/", "/", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
    command += _shadow("/usr/local", INSTALLED_FOLDERS)
    command += _shadow("/etc", ("comfy-supervisor",))
    command += _shadow("/var/lib", ("comfy-supervisor",))
    command += _shadow("/opt", ())
    command += ["--bind", str(scratch), "/srv", "--bind", str(checkout), str(source),
                "--bind", str(checkout), "/srv/comfy-supervisor"]
    command += ["--bind", str(scratch_build or build), str(source / "build")]
    command += ["--ro-bind", str(script), "/srv/doc-test/page.sh"]
    command += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent"]
    if os.getuid() != 0:
        command += ["--unshare-user", "--uid", "0", "--gid", "0"]
    command += ["--setenv", "HOME", "/srv/home", "--setenv", "PATH", DEBIAN_PATH,
                "--chdir", str(source), "bash", "/srv/doc-test/page.sh"]
    return command


def unavailable(source: Path, build: Path, scratch: Path) -> str | None:
    """Why bwrap cannot make this sandbox here (no bwrap, namespaces refused), or None."""
    script = scratch / "probe.sh"
    script.write_text("exit 0\n")
    (scratch / "srv").mkdir(exist_ok=True)
    try:
        done = subprocess.run(bwrap_command(source, source, build, scratch / "srv", script, None),
                              capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return "bwrap is not installed (Debian: bubblewrap)"
    lines = done.stderr.strip().splitlines()
    return None if done.returncode == 0 else f"bwrap: {lines[-1] if lines else f'exit status {done.returncode}'}"


def run(command: list[str], log: Path, timeout_s: int) -> int:
    with open(log, "w") as output:
        try:
            return subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            output.write(f"\ndoc-test: the page's commands ran past {timeout_s} s\n")
            return 124
