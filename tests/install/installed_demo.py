"""The demo from an installed tree: `cmake --install BUILD --prefix TMP/installed`, the
tree moved to TMP/moved (an install must not depend on where it was put), then the
installed comfy-supervisor runs the installed examples/demo.json and workload.json as
scripts/demo does. Passes when the run exits 0 with all 16 prompts done, the Python pack
and the ComfyUI stand-in used the installed Python package and library (read from their
environments while they run), and no process or /dev/shm segment is left.

    installed_demo.py CMAKE BUILD_DIR
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 240
SUMMARY = re.compile(r"prompts run\s+16 of 16 \(0 failed\)")


def fail(message):
    print(f"installed_demo: {message}", file=sys.stderr)
    sys.exit(1)


def environment_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            entries = environ.read().split(b"\0")
    except OSError:
        return None
    return dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)


def participants(comfyctl, instance):
    result = subprocess.run([comfyctl, "--instance", instance, "workers", "--json"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        return []
    return [w for w in json.loads(result.stdout)["workers"] if w.get("state") in ("ready", "busy")]


def check_companions(prefix, comfyctl, instance, supervisor):
    """The environments of the host and of the Python pack, once both are up: the
    installed package first on the pack's PYTHONPATH, the installed library for both."""
    package = os.path.join(prefix, "share", "comfy-supervisor", "python")
    seen = {}
    while supervisor.poll() is None and len(seen) < 2:
        for worker in participants(comfyctl, instance):
            if worker["name"] in ("host", "bridge") and worker["name"] not in seen:
                env = environment_of(worker["pid"])
                if env is not None:
                    seen[worker["name"]] = env
        time.sleep(0.05)
    if len(seen) < 2:
        fail(f"the supervisor ended before the host and the bridge pack were both up (saw {sorted(seen)})")
    for name, env in seen.items():
        library = env.get("COMFY_SV_LIBRARY", "")
        if not library.startswith(prefix + "/") or not os.path.isfile(library):
            fail(f"{name} was given COMFY_SV_LIBRARY={library!r}, not the installed library under {prefix}")
    python_path = seen["bridge"].get("PYTHONPATH", "")
    if python_path.split(":")[0] != package:
        fail(f"the bridge pack's PYTHONPATH is {python_path!r}; it should start with the installed {package}")


def run_demo(prefix, instance, log):
    examples = os.path.join(prefix, "share", "comfy-supervisor", "examples")
    comfyctl = os.path.join(prefix, "bin", "comfyctl")
    supervisor = subprocess.Popen(
        [os.path.join(prefix, "bin", "comfy-supervisor"), "run", "--config", os.path.join(examples, "demo.json"),
         "--workload", os.path.join(examples, "workload.json"), "--instance", instance],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        check_companions(prefix, comfyctl, instance, supervisor)
        status = supervisor.wait(timeout=DEADLINE_S)
    except BaseException:
        os.killpg(supervisor.pid, signal.SIGKILL)
        supervisor.wait()
        raise
    return status


def main():
    cmake, build = sys.argv[1:3]
    instance = f"install-{os.getpid()}"
    scratch = tempfile.mkdtemp(prefix="comfy-install-demo-")
    try:
        installed = os.path.join(scratch, "installed")
        subprocess.run([cmake, "--install", build, "--prefix", installed], check=True, stdout=subprocess.DEVNULL)
        prefix = os.path.join(scratch, "moved")
        os.rename(installed, prefix)
        log_path = os.path.join(scratch, "supervisor.log")
        with open(log_path, "w") as log:
            status = run_demo(prefix, instance, log)
        with open(log_path) as log:
            output = log.read()
        if status != 0 or not SUMMARY.search(output):
            print(output, file=sys.stderr)
            fail(f"the installed demo exited with status {status}; expected 0 and 'prompts run 16 of 16 (0 failed)'")
        left = [n for n in os.listdir("/dev/shm") if n.startswith(f"comfy-sv-{os.geteuid()}-{instance}")]
        if left:
            fail(f"/dev/shm entries left behind: {left}")
        print("installed_demo: the demo ran from the installed tree: 16 of 16 prompts, nothing left behind")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
