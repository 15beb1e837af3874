"""Step 36 (--real-packs DIR): `comfyctl adopt` over a ComfyUI whose custom_nodes holds the
real packs, as a user with those packs installed runs it.

The ComfyUI it adopts is made in the check's temporary folder, the user's checkout left as
it is: ComfyUI/ links every entry of the checkout but the folders ComfyUI or adopt write
(custom_nodes, input, output, temp, user), which are its own; its custom_nodes links each
real pack's folder in DIR (links, not copies: nothing needs a copy, adopt names a linked
pack by its real path, and steps 24-31 run DIR's folders too; no bytecode is written there).
ComfyUI runs with --base-directory ComfyUI/, so those folders are the ones it uses.

ComfyUI's interpreter is a venv of the check's (--system-site-packages) whose site-packages
holds a .pth that puts the check's stubs folder first on sys.path (support.py's and
real_pack_steps.py's, what the interpreter lacks) and turns off writing bytecode. Adopt
builds each pack's environment over that interpreter, reading its site dirs and so that
.pth: the packs' workers get the stubs as ComfyUI does, from its environment, since adopt
gives a pack's entry none of the comfyui section's variables. Nothing is fetched: adopt
runs with --no-index, so a pack whose requirements the host does not meet cannot be
isolated and stays in ComfyUI's process, which the step says.

The step: ComfyUI alone (no supervisor) imports every pack, and its GET /object_info keys
are the nodes of one process; `comfyctl adopt` writes the config (the comfyui section the
step wrote first: the check's flags and variables, kept by adopt, which adds only its
whitelist), builds and checks; it must end done, or failed only for packs it names as left
in ComfyUI's process, with a line per pack saying what it decided and why, and `comfy-
supervisor check` OK; the config's whitelist must be what the report keeps. Then ComfyUI
under the supervisor with the adopted config: its node classes must be one process's,
but those the adopt report names."""

import copy
import json
import os
import re
import subprocess
import time

from real_pack_steps import PACKS
from support import free_port, write_json

ADOPT_STEP = 36
TITLE = ("comfyctl adopt isolates a ComfyUI's real packs (offline), comfy-supervisor check passes, and ComfyUI "
         "under the supervisor registers the node classes of one process")
# What ComfyUI (and adopt) write in a checkout: the adopted one has its own.
WRITTEN = ("custom_nodes", "input", "output", "temp", "user")
STUBS_PTH = "comfyui_check_stubs.pth"
ADOPT_TIMEOUT_S = 1800
STARTUP_TIMEOUT_S = 600
PROBE = "KSampler"  # a core node: its info is served once ComfyUI has loaded every custom node
VERBS = ("isolate", "group", "keep", "skip")
ISOLATED, KEPT = "isolated: ", "in ComfyUI's own process: "
BUILT = re.compile(r"^\[\d+/\d+\] (\S+): (ready|FAILED): (.*)$")  # a unit's line of the build's progress
# How `comfyctl pack add` says a pack's requirements could not be resolved from what the host
# has (no index): such a pack stays in ComfyUI's process, which the step says, and passes.
UNRESOLVED = "resolving "
DISABLE_ALL, WHITELIST, OWN_NODE = "--disable-all-custom-nodes", "--whitelist-custom-nodes", "comfy_supervisor"


def step(check):
    if check.real_packs.folder is None:
        return
    folder = check.tmp / "adopt"
    run = beside(check, folder)
    try:
        ok, seen = Adoption(check, run, folder).run()
    finally:
        run.stop_all()
    check.step(ADOPT_STEP, TITLE, ok, seen)


def beside(check, folder):
    """The check's helpers (starting the supervisor, waiting, HTTP, stopping and cleaning up)
    over a second instance: its own folder (config, log), name, segment, port and processes."""
    run = copy.copy(check)
    run.tmp, run.instance, run.port = folder, f"{check.instance}-adopt", free_port()
    run.segment = check.segment.with_name(f"comfy-sv-{os.getuid()}-{run.instance}")
    run.supervisor, run.pids = None, set()
    return run


def missing(check):
    """The real packs not in DIR: adopt needs them all there."""
    return [pack.folder for pack in PACKS if not os.path.isdir(os.path.join(check.real_packs.folder, pack.folder))]


class Adoption:
    def __init__(self, check, run, folder):
        self.check, self.run_, self.folder = check, run, folder
        self.comfyui = folder / "ComfyUI"
        self.config = folder / "config.json"
        self.python = folder / "python" / "bin" / "python"

    def run(self):
        absent = missing(self.check)
        if absent:
            return False, f"not run: {', '.join(absent)} missing in {self.check.real_packs.folder} (see steps 24-31)"
        self.make_checkout()
        made = self.make_interpreter()
        if made:
            return False, made
        alone, why = self.one_process()
        if alone is None:
            return False, f"ComfyUI alone with the real packs: {why}"
        self.write_config()
        adopted, seconds, report = self.adopt()
        problems = report.problems(adopted)
        said = f"adopt ({seconds:.0f} s, exit status {adopted.returncode}): {report.summary()}"
        if adopted.returncode not in (0, 1):
            return False, f"{said}; {'; '.join(problems)}"
        problems += self.whitelist_problems(report)
        supervised, why = self.supervised()
        if supervised is None:
            problems.append(f"ComfyUI under the supervisor: {why}")
            supervised = set()
        differ = sorted(name for name in alone ^ supervised if not report.names(name))
        if supervised and differ:
            problems.append(f"node classes not in both and not named by adopt's report: {', '.join(differ[:8])}"
                            + (f" and {len(differ) - 8} more" if len(differ) > 8 else ""))
        seen = (f"{said}; {len(alone)} node classes in one process, {len(supervised)} supervised"
                + (", the same" if alone == supervised else f", {len(alone ^ supervised)} named by the report"
                   if not differ else ""))
        return not problems, seen + ("; " + "; ".join(problems) if problems else "")

    # ---- the checkout and its interpreter ----

    def make_checkout(self):
        (self.comfyui / "custom_nodes").mkdir(parents=True)
        for entry in sorted(self.check.comfyui.iterdir()):
            if entry.name not in WRITTEN:
                (self.comfyui / entry.name).symlink_to(entry)
        for name in WRITTEN[1:]:
            (self.comfyui / name).mkdir()
        for pack in PACKS:
            (self.comfyui / "custom_nodes" / pack.folder).symlink_to(os.path.join(self.check.real_packs.folder,
                                                                                  pack.folder))

    def make_interpreter(self):
        """The venv; None, or why it could not be made."""
        venv = self.folder / "python"
        done = subprocess.run([self.check.python, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return f"not run: {self.check.python} -m venv failed ({(done.stderr.strip() or 'no output').splitlines()[-1]})"
        site = subprocess.run([str(self.python), "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True)
        if site.returncode != 0:
            return f"not run: the venv's {self.python} does not run ({(site.stderr.strip() or 'no output').splitlines()[-1]})"
        # A .pth line that starts with "import" is run; the stubs come first, as on the check's PYTHONPATH.
        with open(os.path.join(site.stdout.strip(), STUBS_PTH), "w") as pth:
            pth.write(f"import sys; sys.path.insert(0, {str(self.check.tmp / 'stubs')!r}); "
                      "sys.dont_write_bytecode = True\n")
        return None

    def the_checks_config(self):
        """The config the check wrote, its comfyui section made this ComfyUI's: the same
        flags and variables (the stubs on PYTHONPATH among them), this interpreter, checkout,
        base directory and port."""
        data = json.loads((self.check.tmp / "config.json").read_text())
        section = data["comfyui"]
        args = section["args"]
        args[args.index("--port") + 1] = str(self.run_.port)
        args[args.index("--base-directory") + 1] = str(self.comfyui)
        section["env"].pop("COMFYUI_CHECK_ONE_PROCESS_PACKS", None)  # for the check's one_process/ copies
        section.update(command=str(self.python), checkout=str(self.comfyui), working_directory=str(self.comfyui))
        return data

    def write_config(self):
        """The config before adopt: the check's device, limits and comfyui section, no pack."""
        data = self.the_checks_config()
        write_json(self.config, {"device": data["device"], "limits": data["limits"], "comfyui": data["comfyui"],
                                 "packs": []})

    # ---- the runs ----

    def one_process(self):
        """ComfyUI alone, every pack in its process, started as the supervisor starts it (the
        section's command, arguments, folder and variables): its node classes, or None and why."""
        section = self.the_checks_config()["comfyui"]
        env = {name: os.environ[name] for name in section["env_allowlist"] if name in os.environ}
        env.update(section["env"])
        with open(self.folder / "one_process.log", "wb") as log:
            # Held where the helpers look for the supervisor, so that wait_for and stop see it.
            self.run_.supervisor = subprocess.Popen(
                [section["command"], *section["args"]], cwd=section["working_directory"], env=env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        try:
            return self.node_classes(self.serves, "one_process.log")
        finally:
            self.run_.stop()
            self.run_.supervisor = None

    def supervised(self):
        """ComfyUI under the supervisor with the adopted config: its node classes, or None and why."""
        self.run_.start(workload=False)
        return self.node_classes(lambda: self.run_.host_up(PROBE), "supervisor.log")

    def serves(self):
        try:
            return self.run_.http("GET", f"/object_info/{PROBE}", timeout=5)[0] == 200
        except OSError:
            return None

    def node_classes(self, up, log):
        """GET /object_info's keys once `up()` is True; else None and why."""
        ready = self.run_.wait_for(up, STARTUP_TIMEOUT_S, 0.5)
        if ready is not True:
            why = ("the supervisor gave up on it" if ready == "failed" else "it ended"
                   if not self.run_.supervisor_alive() else f"not within {STARTUP_TIMEOUT_S} s")
            lines = [line for line in self.log_lines(log) if line.strip()]
            return None, f"ComfyUI did not serve ({why}); {log}'s last line: {lines[-1] if lines else 'none'}"
        status, raw = self.run_.http("GET", "/object_info", timeout=300)
        if status != 200:
            return None, f"GET /object_info answered {status}"
        return set(json.loads(raw)), None

    def log_lines(self, name):
        try:
            return (self.folder / name).read_text(errors="replace").splitlines()
        except OSError:
            return []

    def adopt(self):
        """comfyctl adopt run: (its process, seconds it took, its report)."""
        command = [str(self.check.build / "bin" / "comfyctl"), "adopt", str(self.comfyui), "--config", str(self.config),
                   "--host-python", str(self.python), "--envs", str(self.folder / "envs"), "--no-index",
                   "--comfyui-arg=--cpu", "--comfyui-arg=--base-directory", f"--comfyui-arg={self.comfyui}"]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL,
                              timeout=ADOPT_TIMEOUT_S)
        seconds = time.monotonic() - started
        (self.folder / "adopt.out").write_text(done.stdout + done.stderr)
        return done, seconds, Report(done.stdout + done.stderr)

    def whitelist_problems(self, report):
        try:
            data = json.loads(self.config.read_text())
        except (OSError, ValueError) as error:
            return [f"the adopted config cannot be read ({error})"]
        args = data.get("comfyui", {}).get("args", [])
        if DISABLE_ALL not in args or WHITELIST not in args:
            return [f"the adopted config's comfyui args have no {DISABLE_ALL} {WHITELIST}: {args}"]
        listed = set(args[args.index(WHITELIST) + 1:])
        problems = []
        if listed != {OWN_NODE, *report.kept}:
            problems.append(f"the whitelist is {sorted(listed)}, the report keeps {sorted(report.kept)}")
        names = {entry.get("name") for entry in data.get("packs", [])}
        if names != set(report.isolated):
            problems.append(f"the config's packs are {sorted(names)}, the report isolated {sorted(report.isolated)}")
        return problems


class Report:
    """What adopt printed: a line per pack (its decision and why), what it isolated and kept,
    what it could not isolate, and comfy-supervisor check's verdict."""

    def __init__(self, text):
        self.text = text
        lines = text.splitlines()
        self.decided = {}
        for line in lines:
            words = line.split()
            if len(words) >= 2 and words[0] in VERBS and line.startswith("  ") and \
                    any(words[1] == pack.folder for pack in PACKS):
                self.decided[words[1]] = (words[0], " ".join(line.split(words[1], 1)[1].split()))
        self.isolated = self.listed(lines, ISOLATED)
        self.kept = self.listed(lines, KEPT)
        built = [BUILT.match(line) for line in lines]
        self.failed = {match[1]: match[3] for match in built if match and match[2] == "FAILED"}
        after = lines[next((i for i, line in enumerate(lines) if line.startswith("checking ")), len(lines)):]
        self.checked = [line.strip() for line in after[1:] if line.strip()]

    @staticmethod
    def listed(lines, lead):
        found = next((line[len(lead):] for line in lines if line.startswith(lead)), "none")
        return [] if found == "none" else found.split(", ")

    def names(self, node):
        """Whether the report names this node class (a reason given for it)."""
        return re.search(rf"(?<![A-Za-z0-9_]){re.escape(node)}(?![A-Za-z0-9_])", self.text) is not None

    def check_ok(self):
        # "comfy-supervisor: CONFIG: OK: the ComfyUI host and N packs; ..."
        return any(re.search(r"(^|: )OK: ", line) for line in self.checked)

    def problems(self, done):
        problems = []
        undecided = [pack.folder for pack in PACKS if pack.folder not in self.decided]
        if undecided:
            problems.append(f"no line of the plan for {', '.join(undecided)}")
        for name, why in self.failed.items():
            if not why.startswith(UNRESOLVED):
                problems.append(f"{name} could not be isolated: {why}")
        if done.returncode not in (0, 1) or (done.returncode == 1 and not self.failed):
            last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
            problems.append(f"adopt ended with status {done.returncode}: {last}")
        if not self.check_ok():
            problems.append(f"comfy-supervisor check: {' | '.join(self.checked[-3:]) or 'not run'}")
        return problems

    def summary(self):
        grouped = sorted(folder for folder, (verb, _) in self.decided.items() if verb == "group")
        planned = [f"{folder} ({why})" for folder, (verb, why) in self.decided.items() if verb == "keep"]
        # pip's own lines after its exit status say again what the first part says.
        failed = [f"{name} ({shortened(why.split(' (pip,', 1)[0])})" for name, why in self.failed.items()]
        return (f"isolated {len(self.isolated)} ({', '.join(self.isolated) or 'none'}), grouped "
                f"{len(grouped)} ({', '.join(grouped) or 'none'}), in ComfyUI's process {len(self.kept)} "
                f"({', '.join(self.kept) or 'none'}): kept by the plan: {'; '.join(planned) or 'none'}, "
                f"left there as their isolation failed: {'; '.join(failed) or 'none'}"
                + ("; comfy-supervisor check OK" if self.check_ok() else ""))


def shortened(line, limit=200):
    return line if len(line) <= limit else line[:limit - 3] + "..."
