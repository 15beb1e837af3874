"""The pack command's environments, end to end on this machine (world.py): test packs that
declare in each manifest format, built, shared, locked, refused; every temporary folder goes
at the end.

    environment_check.py PACKAGE_DIR FAKE_COMFYUI COMFY_SUPERVISOR"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "host"))
from check_report import CheckReport  # noqa: E402

from world import World  # noqa: E402

PACKAGE, COMFYUI, SUPERVISOR = (os.path.abspath(arg) for arg in sys.argv[1:4])
sys.path.insert(0, PACKAGE)
from comfy_supervisor.environments import manifests  # noqa: E402
from comfy_supervisor.environments.requirement import ManifestError  # noqa: E402


def check_manifests(report, world):
    """Each format read in process, and an unknown key stopping the add."""
    folder = world.pack("formats", {"requirements.txt": "# a comment\nclashlib==1.0  # pinned\n-r more.txt\n"
                                                        "--extra-index-url https://example.org/simple\n",
                                    "more.txt": "numpy\\\n<2\n"})
    found = manifests.read_pack(folder, "3.11")
    report.check(found.normalized() == ["clashlib==1.0", "numpy<2"] and found.requirements[1].source ==
                 "formats/more.txt:1",
                 f"requirements.txt: comments, -r and a continued line read: {found.requirements}")
    report.check(any("--extra-index-url" in note for note in found.notes),
                 f"requirements.txt: an index option is reported, not honoured: {found.notes}")
    folder = world.pack("pyproject", {"pyproject.toml": "[project]\nname = 'p'\ndependencies = ['clashlib>=2']\n"
                                                        "[tool.comfy]\nPublisherId = 'x'\n"})
    found = manifests.read_pack(folder, "3.11")
    report.check(found.normalized() == ["clashlib>=2"], f"pyproject.toml: [project].dependencies read: "
                                                        f"{found.requirements}")
    folder = world.pack("comfyenv", {"comfy-env.toml": "python = '3.11'\n[cuda]\npackages = ['nvdiffrast']\n"
                                                       "[pypi-dependencies]\ntrimesh = { version = '>=4', extras = "
                                                       "['easy'] }\nnumpy = '*'\n[target.linux-64.pypi-dependencies]"
                                                       "\nembreex = '*'\n[target.win-64.pypi-dependencies]\npywin = "
                                                       "'*'\n[apt]\npackages = ['libgl1']\n"})
    found = manifests.read_pack(folder, "3.11")
    linux = ["embreex"] if sys.platform == "linux" and os.uname().machine == "x86_64" else []
    report.check(found.normalized() == sorted(["nvdiffrast", "trimesh[easy]>=4", "numpy"] + linux) and
                 any("[apt]" in note for note in found.notes),
                 f"comfy-env.toml: cuda, pypi and this platform's target read, apt noted: {found.normalized()}")
    folder = world.pack("pyiso", {"pyisolate.yaml": "isolated: true\nshare_torch: false\ndependencies:\n"
                                                    "  - clashlib==1.0\n  - numpy==1.26.3\n"})
    found = manifests.read_pack(folder, "3.11")
    report.check(found.normalized() == ["clashlib==1.0", "numpy==1.26.3"] and
                 any("share_torch" in note for note in found.notes),
                 f"pyisolate.yaml: dependencies read, share_torch: false said not honoured: {found.notes}")
    for file, text, key in (("pyisolate.yaml", "isolated: true\nshared_torch: true\n", "shared_torch"),
                            ("pyproject.toml", "[project]\ndependecies = []\n", "project.dependecies"),
                            ("comfy-env.toml", "[cuda]\npackage = []\n", "cuda.package")):
        folder = world.pack(f"unknown-{file.split('.')[0]}", {file: text})
        try:
            manifests.read_pack(folder, "3.11")
            said = "nothing"
        except ManifestError as error:
            said = str(error)
        report.check(file in said and repr(key.split(".")[-1]) in said and "known:" in said,
                     f"{file}: an unknown key is reported with the keys known: {said}")
    done = world.add(folder)
    report.check(done.returncode == 2 and done.stderr.startswith("comfyctl pack: ") and
                 len(done.stderr.strip().splitlines()) == 1 and not world.envs_now(),
                 f"an unknown key stops the add, exit 2, one line, nothing built: {done.returncode} {done.stderr!r}")


def check_builds(report, world):
    clash1 = world.pack("clash1", {"requirements.txt": "clashlib==1.0\nnumpy==1.26.3\n"},
                        "import clashlib\nimport numpy", "clashlib.VERSION")
    done = world.add(clash1)
    entry = world.entry("clash1")
    first = entry["python"]["environment"]
    report.check(done.returncode == 0 and os.path.isdir(first) and entry["python"]["pack"] == clash1,
                 f"a pack is added with its environment: {done.returncode} {done.stderr.strip()} {entry}")
    with open(world.config, encoding="utf-8") as text:
        written = text.read()
    report.check(list(json.loads(written)) == ["comfyui", "environments", "packs"] and '\n  "packs": [' in written,
                 "the config keeps its keys' order, indented by 2")
    report.check("resolved: 2 to install" in done.stdout and "imports in its environment: 1 node" in done.stdout,
                 f"the add shows what it resolved and that the pack imports: {done.stdout[-300:]!r}")
    report.check(world.run_in(first, "import clashlib, numpy; print(clashlib.VERSION, numpy.VERSION)") ==
                 "1.0 1.26.3" and world.run_in(world.host, "import numpy; print(numpy.VERSION)") == "2.0.0",
                 "numpy==1.26.3 against the host's numpy 2: the pack's environment imports 1.26.3, the host 2.0.0")
    with open(os.path.join(first, "comfy-env.lock.json"), encoding="utf-8") as text:
        lock = json.load(text)
    versions = {package["name"]: (package["version"], len(package["sha256"] or "")) for package in lock["packages"]}
    report.check(lock["format"] == 1 and os.path.basename(first) == lock["key"][:16] and
                 versions == {"clashlib": ("1.0", 64), "numpy": ("1.26.3", 64)} and
                 lock["inputs"]["baseline"]["packages"]["numpy"] == "2.0.0" and
                 lock["inputs"]["declarations"] == ["clashlib==1.0", "numpy==1.26.3"],
                 f"the lock has the key, its inputs and each package's version and sha256: {versions}")
    before = os.stat(world.config).st_mtime_ns, written
    done = world.add(clash1)
    with open(world.config, encoding="utf-8") as text:
        after = os.stat(world.config).st_mtime_ns, text.read()
    report.check(done.returncode == 0 and "nothing changed" in done.stdout and
                 len(done.stdout.strip().splitlines()) == 2 and after == before,
                 f"a re-run with nothing changed says so and writes nothing: {done.stdout!r}")
    report.check(world.stale(first, clash1) == "None", "the worker's stale check passes in the environment itself")

    with open(os.path.join(clash1, "requirements.txt"), "w", encoding="utf-8") as text:
        text.write("clashlib==2.0\nnumpy==1.26.3\n")
    reason = world.stale(first, clash1)
    report.check(reason.startswith("requirements.txt changed") and "clashlib==2.0" in reason,
                 f"a changed requirement makes the environment stale, said in the environment's Python: {reason}")
    done = world.add(clash1)
    second = world.entry("clash1")["python"]["environment"]
    report.check(done.returncode == 0 and second != first and os.path.isdir(first) and
                 world.run_in(second, "import clashlib; print(clashlib.VERSION)") == "2.0",
                 f"a changed requirement builds a new environment under a new key: {second}")
    return first, second


def check_sharing(report, world, first, second):
    clash2 = world.pack("clash2", {"pyproject.toml": "[project]\nname = 'clash2'\n"
                                                     "dependencies = ['numpy==1.26.3', 'clashlib==2.0']\n"},
                        "import clashlib", "clashlib.VERSION")
    cenv = world.pack("cenv", {"comfy-env.toml": "[pypi-dependencies]\nclashlib = '==2.0'\nnumpy = '==1.26.3'\n"},
                      "import clashlib", "clashlib.VERSION")
    pyiso = world.pack("pyiso2", {"pyisolate.yaml": "isolated: true\ndependencies: [clashlib==1.0, numpy==1.26.3]\n"},
                       "import clashlib", "clashlib.VERSION")
    results = [world.add(folder) for folder in (clash2, cenv, pyiso)]
    envs = [world.entry(name)["python"]["environment"] for name in ("clash2", "cenv", "pyiso2")]
    report.check(all(done.returncode == 0 for done in results) and envs == [second, second, first] and
                 all("already built" in done.stdout for done in results),
                 f"packs with equal declarations, in any manifest, share one environment: {envs}")
    done = world.tool("remove", "clash2", "--config", world.config)
    report.check(done.returncode == 0 and "kept" in done.stdout and os.path.isdir(second),
                 f"remove keeps an environment another pack uses: {done.stdout.strip()}")
    done = world.tool("remove", "cenv", "--config", world.config)
    report.check(done.returncode == 0 and "kept" in done.stdout and os.path.isdir(second) and
                 world.entry("clash1")["python"]["environment"] == second,
                 f"and still keeps it while clash1 uses it: {done.stdout.strip()}")
    done = world.tool("remove", "clash1", "--config", world.config)
    report.check(done.returncode == 0 and "deleted" in done.stdout and not os.path.exists(second) and
                 os.path.isdir(first), f"remove deletes the environment no other pack names: {done.stdout.strip()}")


def check_refusals(report, world):
    before = world.envs_now()
    torchy = world.pack("torchy", {"requirements.txt": "clashlib==1.0\nneeds_torch\n"})
    done = world.add(torchy)
    report.check(done.returncode == 2 and "torchy" in done.stderr and "needs_torch" in done.stderr and
                 "torch 9.9.9" in done.stderr and len(done.stderr.strip().splitlines()) == 1,
                 f"a pack that would replace torch is refused, naming the pack and its requirement: {done.stderr!r}")
    report.check([name for name in world.envs_now() if not name.endswith(".lock")] ==
                 [name for name in before if not name.endswith(".lock")] and
                 "Successfully installed" not in done.stdout, "and nothing was installed or left behind")
    broken = world.pack("broken", {"requirements.txt": "broken==1.0\n"})
    done = world.add(broken)
    report.check(done.returncode == 1 and "broken==1.0" in done.stderr and "outside" in done.stderr and
                 len(done.stderr.strip().splitlines()) == 1,
                 f"an installer failure names the requirement and the installer's last lines: {done.stderr!r}")
    missing = world.pack("missing", {"requirements.txt": "clashlib==3.0\n"})
    done = world.tool("add", missing, "--comfyui", COMFYUI, "--host-python", world.host_python, "--envs",
                      world.envs, "--no-index", "--find-links", world.wheels)
    report.check(done.returncode == 1 and "clashlib==3.0 (missing/requirements.txt:1)" in done.stderr,
                 f"offline, without a config: what the wheelhouse lacks is named: {done.stderr!r}")


def check_concurrent(report, world):
    """Two adds of one new key into one config at once: one builds, the other waits on the
    key's lock and reuses what the first built; both packs are in the config afterwards."""
    packs = [world.pack(name, {"requirements.txt": "clashlib==1.0\nclashlib>=0.9\n"}) for name in ("twin1", "twin2")]
    before = set(world.envs_now())
    command = [sys.executable, "-m", "comfy_supervisor.environments", "add"]
    flags = ["--config", world.config]
    running = [subprocess.Popen(command + [folder] + flags, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=world.environ(), stdin=subprocess.DEVNULL) for folder in packs]
    outputs = [process.communicate(timeout=120)[0] for process in running]
    built = [name for name in set(world.envs_now()) - before if not name.startswith(".")]
    with open(world.config, encoding="utf-8") as text:
        named = [pack["name"] for pack in json.load(text)["packs"]]
    report.check("twin1" in named and "twin2" in named, f"and both packs are in the config: {named}")
    report.check(all(process.returncode == 0 for process in running) and len(built) == 1 and
                 sum("building the environment" in output for output in outputs) == 1 and
                 sum("reused" in output for output in outputs) == 1,
                 f"two adds of one key at once build it once: {built}, statuses "
                 f"{[process.returncode for process in running]}")


def check_install_py(report, world):
    wheel = os.path.join(world.wheels, "clashlib-2.0-py3-none-any.whl")
    script = world.pack("script", {"install.py": "import sysconfig, zipfile\n"
                                                 f"zipfile.ZipFile({wheel!r}).extractall("
                                                 "sysconfig.get_paths()['purelib'])\n"})
    done = world.add(script)
    env = world.entry("script")["python"]["environment"]
    report.check(done.returncode == 0 and "install.py was not run" in done.stdout and
                 world.run_in(env, "import importlib.util; print(importlib.util.find_spec('clashlib'))") == "None",
                 f"install.py is not run without the flag, and the add says so: {done.stdout[:200]!r}")
    done = world.add(script, "--run-install-py")
    env = world.entry("script")["python"]["environment"]
    with open(os.path.join(env, "comfy-env.lock.json"), encoding="utf-8") as text:
        sources = {package["name"]: package["source"] for package in json.load(text)["packages"]}
    report.check(done.returncode == 0 and "install.py changed: added clashlib 2.0" in done.stdout and
                 world.run_in(env, "import clashlib; print(clashlib.VERSION)") == "2.0" and
                 sources == {"clashlib": "install.py"},
                 f"with --run-install-py it runs in the pack's environment and says what it changed: {sources}")


def main():
    report = CheckReport("environments")
    root = tempfile.mkdtemp(prefix="comfy-env-check-")
    try:
        world = World(root, PACKAGE, COMFYUI, SUPERVISOR)
        check_manifests(report, world)
        first, second = check_builds(report, world)
        check_sharing(report, world, first, second)
        check_refusals(report, world)
        check_install_py(report, world)
        check_concurrent(report, world)
        report.check(not [name for name in world.envs_now() if name.startswith(".building-")],
                     "no half-built environment is left under the envs folder")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
