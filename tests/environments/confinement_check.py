"""What `pack add` lets a pack reach (docs/SECURITY.md, "What pack add runs and reads"), tried
as a hostile pack would, end to end on this machine (world.py): its import check sees none
of the operator's variables and, sandboxed, runs in bwrap; an sdist's build code runs only
when allowed, and then without the operator's variables; no manifest reads outside the
pack, and nothing outside reaches the output; path requirements are the pack's; an
oversized manifest is one line. Every temporary folder goes at the end.

    confinement_check.py PACKAGE_DIR FAKE_COMFYUI COMFY_SUPERVISOR"""

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
SECRET = "topsecret-7f3a9c"  # a token of the operator's shell, and the line of a file outside every pack
# What a pack does at import: write down what it was given and what it could reach.
PEEK = """
import json, os
seen = {{"environ": dict(os.environ), "pid1": open("/proc/1/comm").read().strip()}}
for place, folder in (("home", os.environ.get("HOME")), ("pack", os.path.dirname(__file__))):
    try:
        with open(os.path.join(folder or "/nonexistent", "written-by-pack"), "w") as out:
            out.write("x")
        seen[place] = "written"
    except OSError as error:
        seen[place] = error.strerror
with open({report!r}, "w") as out:
    json.dump(seen, out)
"""


def one_line(done):
    return len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr + done.stdout


def seen_by(report):
    if not os.path.isfile(report):
        return {}
    with open(report, encoding="utf-8") as text:
        return json.load(text)


def sandbox_unavailable(world):
    """Why bwrap cannot make a sandbox here, in the supervisor's own words, or None."""
    probe = os.path.join(world.root, "probe.json")
    with open(probe, "w", encoding="utf-8") as text:
        json.dump({"packs": [{"name": "probe", "command": "/bin/true", "sandbox": {}}]}, text)
    done = subprocess.run([SUPERVISOR, "check", probe], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return done.stderr.strip() if "asks for a sandbox" in done.stderr else None


def check_import_environment(report, world, home):
    """Unsandboxed, the import check gets the environment a worker gets: not the operator's
    token, not even HOME, so the operator's home is not where the pack writes."""
    seen_file = os.path.join(world.root, "seen-peek.json")
    folder = world.pack("peek", {}, PEEK.format(report=seen_file))
    done = world.add(folder, SECRET_TOKEN=SECRET, HOME=home)
    seen = seen_by(seen_file)
    report.check(done.returncode == 0 and seen, f"the pack imports in its import check: {done.stderr.strip()!r}")
    report.check(seen and "SECRET_TOKEN" not in seen["environ"] and SECRET not in json.dumps(seen),
                 "the import check does not show the pack the operator's SECRET_TOKEN: "
                 f"{sorted(seen.get('environ', []))}")
    report.check(seen and seen.get("environ", {}).get("HOME") != home and
                 not os.path.exists(os.path.join(home, "written-by-pack")),
                 f"nor the operator's HOME, which stays unwritten: {seen.get('home')!r}")


def check_sandboxed_import(report, world, home):
    """A pack whose entry has "sandbox" is import-checked in bwrap, as its worker starts:
    pid 1 is bwrap, its own folder read-only; and --sandbox gives a new entry one. The pack
    lies in the operator's HOME (a folder of /tmp), which the sandbox shows read-only."""
    why = sandbox_unavailable(world)
    if why:
        print(f"SKIP the sandboxed import check: bwrap cannot make a sandbox here: {why}", flush=True)
        return
    seen_file = os.path.join(world.root, "seen-boxed.json")  # the config's folder: the worker's, writable
    # Outside the config's folder, which the sandbox binds writable as the worker's own.
    folder = world.pack("boxed", {}, PEEK.format(report=seen_file), parent=home)
    world.preset({"name": "boxed", "python": {"pack": folder}, "sandbox": {}})
    done = world.add(folder, SECRET_TOKEN=SECRET, HOME=home)
    seen = seen_by(seen_file)
    report.check(done.returncode == 0 and world.entry("boxed")["sandbox"] == {},
                 f"a pack whose entry has \"sandbox\" imports in its sandbox: {done.stderr.strip()!r}")
    report.check(seen.get("pid1") == "bwrap" and seen.get("pack") == "Read-only file system" and
                 "SECRET_TOKEN" not in seen.get("environ", {}) and
                 not os.path.exists(os.path.join(folder, "written-by-pack")) and
                 not os.path.exists(os.path.join(home, "written-by-pack")),
                 f"its import check runs in bwrap (pid 1 {seen.get('pid1')!r}), its folder read-only "
                 f"({seen.get('pack')!r}), without the operator's variables")
    folder = world.pack("boxed2", {})
    done = world.add(folder, "--sandbox")
    report.check(done.returncode == 0 and "(in its sandbox)" in done.stdout and world.entry("boxed2")["sandbox"] == {},
                 f"--sandbox gives a new entry \"sandbox\": {{}}, and its import check runs there: "
                 f"{done.stderr.strip()!r}")


def check_sdist(report, world):
    """An sdist's build code runs only with --allow-sdist, and then without the operator's
    variables."""
    folder = world.pack("sdisty", {"requirements.txt": "canary\n"})
    done = world.add(folder, SECRET_TOKEN=SECRET)
    report.check(done.returncode == 1 and "--allow-sdist" in done.stderr and one_line(done) and
                 not os.path.exists(world.sdist_log),
                 f"by default only wheels are taken: the sdist's code never runs: {done.stderr.strip()!r}")
    done = world.add(folder, "--allow-sdist", SECRET_TOKEN=SECRET)
    with open(world.sdist_log, encoding="utf-8") as text:
        runs = [json.loads(line) for line in text]
    report.check(done.returncode == 0 and runs and all("SECRET_TOKEN" not in run["environ"] for run in runs),
                 f"with --allow-sdist it is built, without the operator's SECRET_TOKEN: {done.stderr.strip()!r} "
                 f"{[run['hook'] for run in runs]}")
    local = world.pack("localsrc", {"requirements.txt": "./src\n"})
    os.makedirs(os.path.join(local, "src"))
    done = world.add(local)
    report.check(done.returncode == 2 and "built from source" in done.stderr and one_line(done),
                 f"a folder to build is refused without --allow-sdist: {done.stderr.strip()!r}")


def check_outside(report, world):
    """-r out of the pack, and a requirements.txt that is a link out of it: refused, naming
    the pack's reference, and the line outside never shown."""
    secret = os.path.join(world.root, "secret.txt")
    with open(secret, "w", encoding="utf-8") as text:
        text.write(f"{SECRET}\n")
    include = world.pack("include-out", {"requirements.txt": "clashlib==1.0\n-r ../../secret.txt\n"})
    linked = world.pack("link-out", {})
    os.symlink(secret, os.path.join(linked, "requirements.txt"))
    for folder, reference in ((include, "-r ../../secret.txt"), (linked, "link-out/requirements.txt")):
        done = world.add(folder)
        report.check(done.returncode == 2 and reference in done.stderr and "outside the pack" in done.stderr and
                     SECRET not in done.stdout + done.stderr and one_line(done),
                     f"{reference}: refused in one line, nothing of the file outside shown: {done.stderr.strip()!r}")
    out = world.pack("path-out", {"requirements.txt": "../../wheels/clashlib-2.0-py3-none-any.whl\n"})
    done = world.add(out)
    report.check(done.returncode == 2 and "../../wheels/clashlib-2.0" in done.stderr and one_line(done),
                 f"a path requirement leading out of the pack is refused: {done.stderr.strip()!r}")


def check_path_requirement(report, world):
    """./vendored/X.whl is the pack's file, wherever the tool runs from."""
    folder = world.pack("vendoring", {"requirements.txt": "./vendored/clashlib-2.0-py3-none-any.whl\n"},
                        "import clashlib", "clashlib.VERSION")
    os.makedirs(os.path.join(folder, "vendored"))
    shutil.copy(os.path.join(world.wheels, "clashlib-2.0-py3-none-any.whl"), os.path.join(folder, "vendored"))
    elsewhere = tempfile.mkdtemp(prefix="comfy-env-cwd-")
    try:
        done = world.add(folder, cwd=elsewhere)
    finally:
        shutil.rmtree(elsewhere)
    env = world.entry("vendoring")["python"]["environment"] if done.returncode == 0 else None
    report.check(env and world.run_in(env, "import clashlib; print(clashlib.VERSION)") == "2.0",
                 f"a path requirement is relative to the pack's folder, not the tool's: {done.stderr.strip()!r}")


def check_bounds(report, world):
    """A 200,000-line requirements.txt (every line short, so under the size bound): one line,
    exit 2, no traceback, and nothing built."""
    before = world.envs_now()
    folder = world.pack("huge", {"requirements.txt": "".join(f"p{index % 10}\n" for index in range(200_000))})
    done = world.add(folder)
    report.check(done.returncode == 2 and one_line(done) and "more than 2000 requirements" in done.stderr and
                 world.envs_now() == before, f"a 200,000-line requirements.txt is refused in one line: "
                                             f"{done.stderr.strip()[:300]!r}")
    folder = world.pack("heavy", {"requirements.txt": "# padding\n" * 120_000})
    done = world.add(folder)
    report.check(done.returncode == 2 and one_line(done) and "larger than 1 MiB" in done.stderr,
                 f"a requirements.txt over 1 MiB is refused in one line: {done.stderr.strip()!r}")


def main():
    report = CheckReport("environments confinement")
    root = tempfile.mkdtemp(prefix="comfy-env-confine-")
    home = tempfile.mkdtemp(prefix="comfy-env-home-")  # the operator's HOME, as the tool is given it
    try:
        world = World(root, PACKAGE, COMFYUI, SUPERVISOR)
        check_import_environment(report, world, home)
        check_sandboxed_import(report, world, home)
        check_sdist(report, world)
        check_outside(report, world)
        check_path_requirement(report, world)
        check_bounds(report, world)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
