"""The world both environment checks build, on this machine: a fake host venv with numpy
2.0.0, a wheelhouse made here (wheelhouse.py), a config naming both and the fake ComfyUI, and
test packs written into it. Every add runs the real tool: pip for the environment's
interpreter, and the import check through the supervisor's own `comfy-supervisor check`."""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import wheelhouse
import yaml

NODE = """
class Version:
    CATEGORY = "environment check"
    RETURN_TYPES = ("STRING",)
    FUNCTION = "version"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def version(self):
        return (VERSION,)


NODE_CLASS_MAPPINGS = {"Version_%s": Version}
"""


def environ(package, supervisor, **extra):
    """This machine's pip settings left out (its own wheelhouse among them), so only the
    check's wheelhouse is read; the package and the supervisor under test named; `extra` on top."""
    keep = {name: value for name, value in os.environ.items() if not name.startswith(("PIP_", "UV_"))}
    return dict(keep, PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1",
                PYTHONPATH=package, COMFY_SV_SUPERVISOR=supervisor, **extra)


class World:
    def __init__(self, root, package, comfyui, supervisor):
        self.root, self.package, self.comfyui, self.supervisor = root, package, comfyui, supervisor
        self.wheels = os.path.join(root, "wheels")
        self.sdist_log = os.path.join(root, "sdist.log")
        wheelhouse.make(self.wheels, self.sdist_log)
        self.host = os.path.join(root, "host")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", self.host], check=True)
        self.host_python = os.path.join(self.host, "bin", "python")
        site = subprocess.run([self.host_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        # A wheel unpacked into site-packages is installed, as far as any reader can tell.
        with zipfile.ZipFile(os.path.join(self.wheels, "numpy-2.0.0-py3-none-any.whl")) as archive:
            archive.extractall(site)
        # ComfyUI requires PyYAML, and a worker's stale check reads pyisolate.yaml with it:
        # this interpreter's, pure Python (without its C part, as yaml imports either).
        shutil.copytree(os.path.dirname(yaml.__file__), os.path.join(site, "yaml"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        self.envs = os.path.join(root, "envs")
        self.config = os.path.join(root, "sv.json")
        with open(self.config, "w", encoding="utf-8") as text:
            json.dump({"comfyui": {"checkout": comfyui, "command": self.host_python},
                       "environments": {"root": "envs", "find_links": ["wheels"], "no_index": True},
                       "packs": [{"name": "other", "command": "/bin/true"}]}, text, indent=2)

    def pack(self, name, files, imports="", version="'none'", parent=None):
        """The pack `name` written into `parent` (by default the world's packs folder)."""
        folder = os.path.join(parent or os.path.join(self.root, "packs"), name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "__init__.py"), "w", encoding="utf-8") as text:
            text.write(f"{imports}\nVERSION = {version}\n{NODE % name}")
        for file, content in files.items():
            with open(os.path.join(folder, file), "w", encoding="utf-8") as text:
                text.write(content)
        return folder

    def environ(self, **extra):
        return environ(self.package, self.supervisor, **extra)

    def tool(self, *args, cwd=None, **extra):
        return subprocess.run([sys.executable, "-m", "comfy_supervisor.environments", *args], capture_output=True,
                              text=True, env=self.environ(**extra), stdin=subprocess.DEVNULL, cwd=cwd)

    def add(self, folder, *args, **extra):
        return self.tool("add", folder, "--config", self.config, *args, **extra)

    def preset(self, entry):
        """`entry` written into the config, as an operator would before the add."""
        with open(self.config, encoding="utf-8") as text:
            config = json.load(text)
        config["packs"].append(entry)
        with open(self.config, "w", encoding="utf-8") as text:
            json.dump(config, text, indent=2)

    def entry(self, name):
        with open(self.config, encoding="utf-8") as text:
            return next(pack for pack in json.load(text)["packs"] if pack["name"] == name)

    def envs_now(self):
        return sorted(os.listdir(self.envs)) if os.path.isdir(self.envs) else []

    def run_in(self, env, code):
        done = subprocess.run([os.path.join(env, "bin", "python"), "-c", code], capture_output=True, text=True,
                              env=self.environ())
        return done.stdout.strip() or done.stderr.strip()

    def stale(self, env, pack):
        return self.run_in(env, "from comfy_supervisor.environments.stamp import stale_reason; "
                                f"print(stale_reason({env!r}, [{pack!r}], {self.comfyui!r}))")
