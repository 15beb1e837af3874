"""Environments as artefacts with owners, end to end on this machine (world.py): two configs
share one environment and one removes its pack, the other's still checks; an environment
root built is run by `nobody`; `comfyctl env list` and `gc` show and remove only what no
config names; the diagnosis names the real cause; a refusal names the flag that fixes it.
The checks as another user need root (setpriv); without it they are said to be skipped.

    ownership_check.py PACKAGE_DIR FAKE_COMFYUI COMFY_SUPERVISOR"""

import fcntl
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
from comfy_supervisor.environments import owners  # noqa: E402

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
CAN_SWITCH = os.geteuid() == 0 and shutil.which("setpriv") is not None


def second_config(world, name):
    """Another config beside the world's, over the same checkout, host and environments
    folder (one config per GPU), with no pack yet."""
    folder = os.path.join(world.root, name)
    os.makedirs(folder)
    path = os.path.join(folder, "sv.json")
    with open(path, "w", encoding="utf-8") as text:
        json.dump({"comfyui": {"checkout": world.comfyui, "command": world.host_python},
                   "environments": {"root": world.envs, "find_links": [world.wheels], "no_index": True},
                   "packs": []}, text, indent=2)
    return path


def environment_of(config, name):
    with open(config, encoding="utf-8") as text:
        return next(pack for pack in json.load(text)["packs"] if pack["name"] == name)["python"]["environment"]


def supervisor_check(world, config, as_nobody=False):
    done = subprocess.run((AS_NOBODY if as_nobody else []) + [SUPERVISOR, "check", config], capture_output=True,
                          text=True, env=world.environ(), stdin=subprocess.DEVNULL, cwd="/")
    return done.returncode, (done.stdout + done.stderr).strip()


def env_tool(world, *args):
    """`comfyctl env ARGS` as comfyctl runs it: the package's tool dispatcher."""
    return subprocess.run([sys.executable, "-m", "comfy_supervisor.tools", "env", *args], capture_output=True,
                          text=True, env=world.environ(), stdin=subprocess.DEVNULL)


def stale_by_host(world, env, pack, as_nobody=True):
    """stale_reason asked by the host's interpreter (an environment that cannot be read, or
    is missing, has no interpreter to ask it), as nobody unless told."""
    code = (f"from comfy_supervisor.environments.stamp import stale_reason; "
            f"print(stale_reason({env!r}, [{pack!r}], {world.comfyui!r}))")
    done = subprocess.run((AS_NOBODY if as_nobody else []) + [world.host_python, "-c", code], capture_output=True,
                          text=True, env=world.environ(), cwd="/")
    return (done.stdout + done.stderr).strip()


def check_shared(report, world):
    """O1: gpu0 (the world's config) and gpu1 share one environment; gpu0's remove keeps it."""
    pack = world.pack("shared", {"requirements.txt": "clashlib==1.0\n"}, "import clashlib", "clashlib.VERSION")
    gpu1 = second_config(world, "gpu1")
    first, second = world.add(pack), world.tool("add", pack, "--config", gpu1)
    env = world.entry("shared")["python"]["environment"]
    report.check(first.returncode == 0 and second.returncode == 0 and "reused" in second.stdout,
                 f"two configs add one pack, and share its environment: {second.stdout[-200:]!r} {second.stderr!r}")
    status, said = supervisor_check(world, gpu1)
    report.check(status == 0, f"gpu1's config checks with it: {said[-300:]}")
    done = world.tool("remove", "shared", "--config", world.config)
    report.check(done.returncode == 0 and os.path.isdir(env) and f"the config {os.path.realpath(gpu1)} uses it "
                 "(pack shared)" in done.stdout,
                 f"gpu0's remove keeps the environment gpu1 names, and says which config keeps it: {done.stdout!r}")
    status, said = supervisor_check(world, gpu1)
    report.check(status == 0 and "1 node class" in said,
                 f"and gpu1's config still checks, its pack imported in its worker: {said[-300:]}")

    lonely = world.pack("lonely", {"requirements.txt": "numpy==1.26.3\n"})
    gone, broken, gpu2 = (second_config(world, name) for name in ("gone", "broken", "gpu2"))
    for config in (gone, broken, gpu2):
        world.tool("add", lonely, "--config", config)
    lonely_env = environment_of(gpu2, "lonely")
    os.unlink(gone)
    with open(broken, "w", encoding="utf-8") as text:
        text.write("{\"packs\": [")
    done = world.tool("remove", "lonely", "--config", gpu2)
    report.check(done.returncode == 0 and os.path.isdir(lonely_env) and f"kept: the config {os.path.realpath(broken)} "
                 "is not JSON" in done.stdout, f"a config that cannot be read keeps what it may name: {done.stdout!r}")
    done = env_tool(world, "gc", "--envs", world.envs)
    report.check(done.returncode == 2 and os.path.isdir(lonely_env) and done.stderr.startswith("comfyctl env: ") and
                 "nothing removed" in done.stderr and len(done.stderr.strip().splitlines()) == 1,
                 f"and gc removes nothing while it cannot be read, in one line: {done.stderr!r}")
    records = os.path.join(world.envs, owners.RECORDS)
    recorded = set()
    for name in os.listdir(records) if os.path.isdir(records) else []:
        with open(os.path.join(records, name), encoding="utf-8") as text:
            recorded.add(text.read().strip())
    report.check(os.path.realpath(gone) not in recorded and os.path.realpath(broken) in recorded,
                 f"the record of a config that is gone is dropped: {sorted(recorded)}")
    os.unlink(broken)
    system = os.path.join(world.root, "etc")
    os.makedirs(system)
    with open(os.path.join(system, "gpu7.json"), "w", encoding="utf-8") as text:
        json.dump({"packs": [{"name": "seven", "python": {"pack": pack, "environment": env}}]}, text)
    found = owners.keepers(env, owners.users(world.envs, system_folder=system))
    report.check((os.path.join(system, "gpu7.json"), ["seven"]) in found,
                 f"a config of the unit's folder names its environments unrecorded: {found}")
    return pack, gpu1, env


def check_permissions(report, world, pack, gpu1, env):
    """O2: what root built, nobody runs; an environment nobody cannot read is said so."""
    if not CAN_SWITCH:
        report.check(True, "SKIPPED the checks as nobody: they need root and setpriv")
        return
    status, said = supervisor_check(world, gpu1, as_nobody=True)
    report.check(status == 0 and "1 node class" in said,
                 f"an environment root built is run by nobody (comfy-supervisor check as nobody): {said[-300:]}")
    report.check(stale_by_host(world, env, pack) == "None", "and its stale check passes as nobody")
    # As root left one before environments were made readable by every user.
    os.chmod(env, 0o700)
    os.chmod(os.path.join(env, "comfy-env.lock.json"), 0o600)
    said = stale_by_host(world, env, pack)
    report.check(said.startswith(f"it cannot be read by user nobody (permission denied on {env}, root's, mode 0700)")
                 and "unfinished" not in said and "an add run again as root" in said,
                 f"an environment nobody cannot read is said to be so, with the path, whose and the fix: {said}")
    status, said = supervisor_check(world, gpu1, as_nobody=True)
    report.check(status != 0, f"(the supervisor refuses it as nobody: {said[-200:]})")
    done = world.tool("add", pack, "--config", gpu1)
    report.check(done.returncode == 0 and "made readable to every user" in done.stdout and
                 "nothing changed" not in done.stdout,
                 f"an add over it opens it, and does not say nothing changed: {done.stdout[-300:]!r}")
    status, said = supervisor_check(world, gpu1, as_nobody=True)
    report.check(status == 0, f"then nobody runs it: {said[-300:]}")
    done = subprocess.run(AS_NOBODY + [sys.executable, "-m", "comfy_supervisor.environments", "add", pack, "--config",
                                       gpu1], capture_output=True, text=True, env=world.environ(), cwd="/",
                          stdin=subprocess.DEVNULL)
    report.check(done.returncode == 0 and "nothing changed" in done.stdout,
                 f"nobody's add over root's environments folder finds nothing to change: {done.stdout!r} "
                 f"{done.stderr!r}")
    # A folder opened by hand, its lock still root's alone: the worker starts, and says why
    # it cannot check its environment, not that it is stale.
    os.chmod(os.path.join(env, "comfy-env.lock.json"), 0o600)
    status, said = supervisor_check(world, gpu1, as_nobody=True)
    report.check(status != 0 and "cannot be read by user nobody" in said and "stale" not in said and
                 "unfinished" not in said, f"a lock nobody cannot read is said so at the worker's start: {said[-400:]}")
    os.chmod(os.path.join(env, "comfy-env.lock.json"), 0o644)


def check_diagnosis(report, world, pack):
    missing = os.path.join(world.envs, "0" * 16)
    unfinished = os.path.join(world.envs, "1" * 16)
    os.makedirs(unfinished)
    with open(os.path.join(unfinished, "pyvenv.cfg"), "w", encoding="utf-8") as text:
        text.write("home = /usr/bin\n")
    said_missing = stale_by_host(world, missing, pack, as_nobody=False)
    said_unfinished = stale_by_host(world, unfinished, pack, as_nobody=False)
    report.check(said_missing == "it is missing" and
                 said_unfinished.startswith("it is unfinished (no comfy-env.lock.json"),
                 f"a missing and an unfinished environment are each said so: {said_missing}; {said_unfinished}")
    shutil.rmtree(unfinished)


def check_gc(report, world, pack, gpu1, env):
    """O7: list shows every environment and who names it; gc removes only what none names."""
    with open(os.path.join(pack, "requirements.txt"), "w", encoding="utf-8") as text:
        text.write("clashlib==2.0\n")
    done = world.tool("add", pack, "--config", gpu1)
    newer = environment_of(gpu1, "shared")
    report.check(done.returncode == 0 and newer != env and os.path.isdir(env),
                 f"a changed requirement builds a new environment; the old one stays: {done.stderr!r}")
    leftover = os.path.join(world.envs, ".building-" + "a" * 16 + "-x1")
    building = os.path.join(world.envs, ".building-" + "b" * 16 + "-x2")
    other = os.path.join(world.envs, "notes")
    for folder in (leftover, building, other):
        os.makedirs(folder)
        with open(os.path.join(folder, "data.txt"), "w", encoding="utf-8") as text:
            text.write("x" * 5000)
    listed = env_tool(world, "list", "--config", gpu1)
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[2:]}
    key, old = os.path.basename(newer), os.path.basename(env)
    report.check(listed.returncode == 0 and "finished" in rows.get(key, "") and
                 f"{os.path.realpath(gpu1)}: shared" in rows.get(key, "") and "no config" in rows.get(old, "") and
                 "KiB" in rows.get(old, "") and "never removed" in rows.get("notes", ""),
                 f"env list shows each environment, its size, state and the configs naming it: {listed.stdout!r}")
    lock = os.open(os.path.join(world.envs, ".{}.lock".format("b" * 16)), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        before = set(os.listdir(world.envs))
        done = env_tool(world, "gc", "--dry-run", "--config", gpu1)
        report.check(done.returncode == 0 and set(os.listdir(world.envs)) == before and
                     f"would remove {env}" in done.stdout and f"would remove {leftover}" in done.stdout and
                     "3 would be removed" in done.stdout, f"gc --dry-run says what it would remove, removes nothing: "
                                                          f"{done.stdout!r}")
        done = env_tool(world, "gc", "--config", gpu1)
        report.check(done.returncode == 0 and not os.path.exists(env) and not os.path.exists(leftover) and
                     "3 removed" in done.stdout and "freed" in done.stdout,
                     f"gc removes the environment no config names and a build's leftover: {done.stdout!r}")
        report.check(os.path.isdir(newer) and os.path.isdir(building) and os.path.isdir(other) and
                     f"kept {building}: a build of it is running" in done.stdout,
                     "and keeps the one a config names, the one being built, and what the tool did not build")
    finally:
        os.close(lock)
    status, said = supervisor_check(world, gpu1)
    report.check(status == 0, f"gpu1's config still checks after the gc: {said[-300:]}")


def check_refusals(report, world):
    wheel = os.path.join(world.wheels, "clashlib-2.0-py3-none-any.whl")
    script = world.pack("script", {"install.py": "import sysconfig, zipfile\n"
                                                 f"zipfile.ZipFile({wheel!r}).extractall("
                                                 "sysconfig.get_paths()['purelib'])\n"}, "import clashlib")
    done = world.add(script)
    report.check(done.returncode == 2 and "--run-install-py" in done.stderr and
                 len(done.stderr.strip().splitlines()) == 1,
                 f"a pack with an install.py that does not import is refused naming --run-install-py: {done.stderr!r}")


def main():
    report = CheckReport("environment ownership")
    root = tempfile.mkdtemp(prefix="comfy-env-owners-")
    os.chmod(root, 0o755)  # nobody reaches the world's packs, checkout and environments through it
    try:
        world = World(root, PACKAGE, COMFYUI, SUPERVISOR)
        pack, gpu1, env = check_shared(report, world)
        check_permissions(report, world, pack, gpu1, env)
        check_diagnosis(report, world, pack)
        check_gc(report, world, pack, gpu1, env)
        check_refusals(report, world)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
