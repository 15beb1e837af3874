"""comfyctl adopt COMFYUI_DIR [--config FILE] [--dry-run] [--keep-in-host PACK]... [options]

Turns an installed ComfyUI into a supervised one: reads each pack of COMFYUI_DIR/custom_nodes,
decides to isolate it, group it with the packs it shares types with, or keep it in ComfyUI's
own process, and says why for each; builds the environments in parallel (through `comfyctl
pack add`, which checks that each pack imports in its worker); writes the config; and runs
`comfy-supervisor check` on it. A re-run changes only what changed. Exit status: 0 done, 2
refused (bad input: one line on stderr), 1 a pack could not be isolated or the check failed
(the report says which). docs/ADOPTING.md says more."""

import argparse
import os
import shutil
import subprocess
import sys

from ..environments import cli as pack_cli
from ..environments import import_check
from ..environments.errors import Refused
from . import author_says, builds, config_update, inventory, pack_lists, plan, report


def _estimate(candidate):
    """pack check's estimate, or None where the pack's source could not be read for one."""
    from ..pack_check import estimate
    try:
        return estimate(candidate.path)
    except (OSError, ValueError, SyntaxError, RecursionError):
        return None


def _host_python(options, comfyui_dir, data):
    """ComfyUI's interpreter: --host-python, the config's, a venv in the checkout, python3."""
    if options.host_python:
        return options.host_python
    command = data.get("comfyui", {}).get("command") if isinstance(data.get("comfyui"), dict) else None
    if isinstance(command, str):
        return command
    for venv in ("venv", ".venv"):
        python = os.path.join(comfyui_dir, venv, "bin", "python")
        if os.access(python, os.X_OK):
            return python
    return shutil.which("python3") or "python3"


def _envs(options, data):
    section = data.get("environments") if isinstance(data.get("environments"), dict) else {}
    if options.envs:
        return os.path.abspath(options.envs)
    if isinstance(section.get("root"), str):
        return section["root"]
    # Root builds for a service user: a folder of the machine, not root's home (0700).
    return "/var/lib/comfy-supervisor/envs" if os.geteuid() == 0 else pack_cli.default_envs()


def _checkout(value):
    comfyui_dir = os.path.realpath(value)
    if not os.path.isfile(os.path.join(comfyui_dir, "main.py")) or \
            not os.path.isdir(os.path.join(comfyui_dir, "custom_nodes")):
        raise Refused(f"{value} is not a ComfyUI checkout (no main.py and custom_nodes in it); name the folder "
                      "ComfyUI runs from")
    if not config_update.knows_whitelist(comfyui_dir):
        raise Refused(f"the ComfyUI at {value} has no {config_update.WHITELIST}, which adopt uses to keep the "
                      "isolated packs out of its process; update ComfyUI (git pull, or comfy update), then run "
                      "adopt again")
    return comfyui_dir


def _packs(options, custom_nodes, listed):
    packs = []
    for candidate in inventory.candidates(custom_nodes):
        folder_pack = candidate.importable and not candidate.is_file
        says = author_says.read(candidate.path) if folder_pack else None
        packs.append(plan.Pack(candidate, says, _estimate(candidate) if folder_pack else None))
    unknown = sorted(set(options.keep_in_host + options.isolate) - {pack.folder for pack in packs})
    if unknown:
        raise Refused(f"no pack {unknown[0]} in {custom_nodes}; name a folder of it ("
                      f"{', '.join(pack.folder for pack in packs) or 'it has none'})")
    return packs


def _removed(data, custom_nodes, units):
    """Entries adopt made earlier whose packs are gone, kept or grouped otherwise now."""
    now = {tuple(unit.folders) for unit in units}
    return sorted(name for folders, name in config_update.adopted(data, custom_nodes).items() if folders not in now)


def _take_out(names, config_path):
    failed = []
    for name in names:
        done = subprocess.run([sys.executable, "-m", "comfy_supervisor.environments", "remove", name, "--config",
                               config_path], capture_output=True, text=True, errors="replace")
        print(f"  {done.stdout.strip() or done.stderr.strip()}", flush=True)
        if done.returncode != 0:
            failed.append(name)
    return failed


def _check(config_path):
    program = import_check.supervisor_program()
    done = subprocess.run([program, "check", config_path], capture_output=True, text=True, errors="replace",
                          stdin=subprocess.DEVNULL)
    for line in (done.stdout + done.stderr).splitlines():
        if line.strip():
            print(f"  {line}", flush=True)
    return done.returncode == 0


def adopt(options):
    comfyui_dir = _checkout(options.comfyui_dir)
    custom_nodes = os.path.join(comfyui_dir, "custom_nodes")
    config_path = os.path.abspath(options.config)
    data = config_update.read(config_path)
    listed = pack_lists.pack_names(options.pack_list) if options.pack_list else None
    packs = _packs(options, custom_nodes, listed)
    in_use = config_update.adopted(data, custom_nodes)
    others = [entry.get("name") for entry in data.get("packs", []) if isinstance(entry, dict) and
              entry.get("name") not in in_use.values()]
    units = plan.plan(packs, options.keep_in_host, options.isolate, listed, in_use, others)
    report.plan(custom_nodes, packs, units)
    gone = _removed(data, custom_nodes, units)
    if options.dry_run:
        report.dry_run(config_path, units, gone)
        return 0
    host_python = _host_python(options, comfyui_dir, data)
    if config_update.ensure_base(config_path, comfyui_dir, host_python, _envs(options, data), options.comfyui_arg):
        print(f"wrote the ComfyUI section of {config_path} ({host_python} {comfyui_dir}/main.py)", flush=True)
    if config_update.link_own_node(custom_nodes):
        print(f"linked the supervisor's custom node into {custom_nodes}", flush=True)
    failed_removals = _take_out(gone, config_path)
    jobs = options.jobs or os.cpu_count() or 1
    print(f"building {len(units)} environment(s), {min(jobs, max(len(units), 1))} at a time", flush=True)
    outcomes = builds.build_all(units, config_path, options, jobs, config_update.host_env(config_path))
    failed = [outcome for outcome in outcomes if not outcome.ok]
    # A unit that could not be isolated runs where it ran before: nothing is lost.
    for outcome in failed:
        for pack in outcome.unit.packs:
            pack.keep(f"its isolation failed: {outcome.said}; fix it, then run adopt again")
    _take_out([outcome.unit.name for outcome in failed if outcome.unit.name in _names(config_path)], config_path)
    kept = [pack.folder for pack in packs if pack.action == plan.KEEP]
    if config_update.import_only(config_path, kept):
        print(f"ComfyUI imports {len(kept)} pack(s) itself, besides the supervisor's node: "
              f"{', '.join(kept) or 'none'}", flush=True)
    report.outcome(packs, outcomes)
    print(f"checking {config_path}:", flush=True)
    checked = _check(config_path)
    return 0 if checked and not failed and not failed_removals else 1


def _names(config_path):
    return {entry.get("name") for entry in config_update.read(config_path).get("packs", []) if isinstance(entry, dict)}


def parser():
    top = argparse.ArgumentParser(prog="comfyctl adopt", description=__doc__.split("\n\n")[1].replace("\n", " "))
    top.add_argument("comfyui_dir", metavar="COMFYUI_DIR", help="the ComfyUI checkout whose custom_nodes to adopt")
    top.add_argument("--config", required=True, help="the supervisor's config to write (made if missing; a config "
                                                     "that exists keeps its other sections)")
    top.add_argument("--dry-run", action="store_true", help="print the plan; build and write nothing")
    top.add_argument("--keep-in-host", action="append", default=[], metavar="PACK",
                     help="keep this folder of custom_nodes in ComfyUI's own process (again for more)")
    top.add_argument("--isolate", action="append", default=[], metavar="PACK",
                     help="isolate this folder although its author or the estimate would keep it in ComfyUI")
    top.add_argument("--from", dest="pack_list", metavar="FILE",
                     help="adopt only the packs a ComfyUI-Manager snapshot or a comfy-cli comfy-lock.yaml lists")
    top.add_argument("--host-python", help="ComfyUI's interpreter (default: the config's, else the checkout's venv, "
                                           "else python3)")
    top.add_argument("--envs", help="where environments are kept (default: the config's environments.root)")
    top.add_argument("--comfyui-arg", action="append", default=[], metavar="ARG",
                     help="one of ComfyUI's flags, for ComfyUI and each pack's worker, as --comfyui-arg=--cpu")
    top.add_argument("--find-links", action="append", default=[], metavar="DIR", help="a wheelhouse folder")
    top.add_argument("--no-index", action="store_true", help="no package index: the wheelhouses only")
    top.add_argument("--index-url", help="the package index (a mirror)")
    top.add_argument("--run-install-py", action="store_true", help="run each isolated pack's install.py in its "
                                                                   "environment")
    top.add_argument("--jobs", type=int, default=0, help="environments built at once (default: the CPUs)")
    return top


def main(argv=None):
    options = parser().parse_args(argv)
    options.find_links = [os.path.abspath(folder) for folder in options.find_links]
    try:
        return adopt(options)
    except Refused as error:
        print(f"comfyctl adopt: {error}", file=sys.stderr, flush=True)
        return 2
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        print(f"comfyctl adopt: {error.strerror or error}{where}; check that path and its permissions",
              file=sys.stderr, flush=True)
        return 2
