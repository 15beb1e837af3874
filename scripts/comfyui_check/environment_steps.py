"""Step 21: the bridge pack isolated by `comfyctl pack add`, as a user isolates a pack. Before
the supervisor starts, the command builds the pack's environment over ComfyUI's own
interpreter (offline: the bridge pack declares nothing, ComfyUI's environment meets the
rest), checks that the pack imports there against the real checkout, and writes the
environment into the config's "bridge" entry in place of its interpreter. The step passes
when that succeeded, the bridge pack's worker runs the environment's interpreter, and a
prompt ran its node there (step 4)."""

import pathlib
import subprocess

ENVIRONMENT_STEP = 21
TITLE = ("comfyctl pack add isolates the bridge pack in an environment over ComfyUI's interpreter, "
         "and its node runs there")


def isolate(check, pack):
    """Runs the command on the written config; (exit status, its last line)."""
    command = [str(check.build / "bin" / "comfyctl"), "pack", "add", str(pack), "--name", "bridge",
               "--config", str(check.tmp / "config.json"), "--envs", str(check.tmp / "envs"),
               "--comfyui-arg=--cpu", "--no-index"]
    done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, lines[-1] if lines else "no output"


def step(check, added, node_ran):
    status, last = added
    if status != 0:
        check.step(ENVIRONMENT_STEP, TITLE, False, f"comfyctl pack add exited {status}: {last}")
        return
    worker = [w for w in check.workers() if w.get("name") == "bridge"]
    interpreter = ""
    if worker:
        try:
            interpreter = pathlib.Path(f"/proc/{worker[0]['pid']}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            pass
    envs = str(check.tmp / "envs") + "/"
    ok = interpreter.startswith(envs) and node_ran
    check.step(ENVIRONMENT_STEP, TITLE, ok, f"{last}; the bridge worker runs {interpreter or 'nothing seen'}"
               f"{'' if interpreter.startswith(envs) else ' (not the environment built in ' + envs + ')'}; "
               f"its node {'ran' if node_ran else 'did not run'} in step 4")
