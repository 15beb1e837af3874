"""Each unit's environment built and its import checked by `comfyctl pack add` (the same
code, the same checks, one process per unit), several at once, bounded by the CPUs, each
writing its entry into the config under the config folder's lock. One progress display:
a line rewritten in place on a terminal, a line per finished unit otherwise; each unit's
own output is kept and only its last line is shown when it fails."""

import concurrent.futures
import dataclasses
import subprocess
import sys
import threading


@dataclasses.dataclass
class Outcome:
    unit: object
    ok: bool
    said: str  # its last line: the nodes it registered, or why it failed


def _add_command(unit, config_path, options, host_env):
    command = [sys.executable, "-m", "comfy_supervisor.environments", "add", *unit.folders, "--name", unit.name,
               "--config", config_path]
    command += [f"--env={name}={value}" for name, value in host_env.items()]
    command += [f"--comfyui-arg={arg}" for arg in options.comfyui_arg]
    command += [f"--find-links={folder}" for folder in options.find_links]
    command += (["--no-index"] if options.no_index else []) + \
        ([f"--index-url={options.index_url}"] if options.index_url else [])
    command += ["--run-install-py"] if options.run_install_py else []
    return command


def _build(unit, config_path, options, host_env):
    done = subprocess.run(_add_command(unit, config_path, options, host_env), capture_output=True, text=True,
                          errors="replace", stdin=subprocess.DEVNULL)
    if done.returncode == 0:
        lines = [line for line in done.stdout.splitlines() if "imports in its environment" in line]
        return Outcome(unit, True, lines[-1].split(": ", 1)[-1] if lines else "nothing changed")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    said = lines[-1] if lines else f"comfyctl pack add ended with status {done.returncode}"
    return Outcome(unit, False, said.removeprefix("comfyctl pack: "))


class _Display:
    def __init__(self, total):
        self.total, self.finished, self.running = total, 0, set()
        self.live = sys.stdout.isatty()
        self.lock = threading.Lock()

    def _status(self):
        names = ", ".join(sorted(self.running)) or "-"
        return f"[{self.finished}/{self.total}] building: {names}"

    def started(self, unit):
        with self.lock:
            self.running.add(unit.name)
            if self.live:
                print(f"\r\033[K{self._status()}", end="", flush=True)

    def finished_one(self, outcome):
        with self.lock:
            self.running.discard(outcome.unit.name)
            self.finished += 1
            verdict = "ready" if outcome.ok else "FAILED"
            line = f"[{self.finished}/{self.total}] {outcome.unit.name}: {verdict}: {outcome.said}"
            print(f"\r\033[K{line}" if self.live else line, flush=True)
            if self.live and self.running:
                print(self._status(), end="", flush=True)


def build_all(units, config_path, options, jobs, host_env):
    """The outcome of each unit, in the units' order. Each pack's worker gets ComfyUI's own
    variables (`host_env`, the config's comfyui.env): what ComfyUI's imports needed there
    (a PYTHONPATH, HF_HOME, CUDA_VISIBLE_DEVICES) the same packs need in their workers."""
    if not units:
        return []
    display = _Display(len(units))

    def one(unit):
        display.started(unit)
        outcome = _build(unit, config_path, options, host_env)
        display.finished_one(outcome)
        return outcome

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(units)))) as pool:
        return list(pool.map(one, units))
