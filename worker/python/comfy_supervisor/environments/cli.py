"""python3 -m comfy_supervisor.environments add PACK_DIR [options] | remove NAME --config FILE | check DIR [--json]

`add` builds the pack's environment from what it declares (or finds it built), checks that
the pack imports there, and adds the pack to the config (or prints the entry to add).
`remove` takes the pack out of the config, and its environment when no config on the
machine names it (owners.py).
`check` estimates, from reading the pack's source, which of its node classes can run isolated
(pack_check/); it exits 0 whenever it could read the pack, whatever the verdicts.
Exit status: 0 done, 2 refused (bad input, a pack that would replace torch, one that does
not import), 1 an installer failed. Progress on stdout; a refusal or failure is one line on
stderr. docs/ENVIRONMENTS.md says more."""

import argparse
import json
import os
import re
import shutil

from . import (access, baseline, build, config_entry, import_check, installer, inventory, key, manifests, owners,
               processes)
from .config_entry import Config
from .errors import InstallFailed, Refused
from .requirement import ManifestError

_NAME_RULE = "1 to 31 characters from [A-Za-z0-9_-], not \"host\""


def default_name(pack_dir):
    return re.sub(r"[^a-z0-9_-]", "-", os.path.basename(os.path.normpath(pack_dir)).lower())[:31]


def default_envs():
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "comfy-supervisor", "envs")


def _pack_dir(value):
    pack_dir = os.path.realpath(value)
    if not os.path.isfile(os.path.join(pack_dir, "__init__.py")):
        raise Refused(f"{value} is not a custom node pack's folder (no __init__.py in it); name the pack's folder")
    return pack_dir


def _pack_dirs(values):
    """One folder, or a group's in order: ComfyUI imports each as the module of its folder's
    name, so two of one name cannot share a worker."""
    pack_dirs = [_pack_dir(value) for value in values]
    names = [os.path.basename(folder) for folder in pack_dirs]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice:
        raise Refused(f"two of the folders given are named {twice}, and one worker imports a pack as the module of "
                      "its folder's name; name each pack once, or add them as separate packs")
    return pack_dirs


def _name(options, pack_dir):
    name = options.name or default_name(pack_dir)
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,31}", name) or name == "host":
        raise Refused(f"the pack name \"{name}\" is not {_NAME_RULE}; choose one with --name")
    return name


def _settings(options, config):
    """The checkout, the host's Python, the envs folder and the index: flags, then the config."""
    comfyui = options.comfyui or (config.comfyui_checkout() if config else None)
    if not comfyui or not os.path.isdir(comfyui):
        raise Refused(f"no ComfyUI checkout{f' at {comfyui}' if comfyui else ''}: name it with --comfyui or the "
                      "config's comfyui.checkout")
    host_python = options.host_python or (config.host_python() if config else None) or shutil.which("python3")
    if not host_python:
        raise Refused("no host Python: name ComfyUI's interpreter with --host-python")
    section = config.environments() if config else {"root": None, "find_links": [], "no_index": False,
                                                     "index_url": None}
    envs = os.path.abspath(options.envs or section["root"] or default_envs())
    index = installer.Index(options.index_url or section["index_url"],
                            [os.path.abspath(folder) for folder in options.find_links] or section["find_links"],
                            options.no_index or section["no_index"], options.allow_sdist)
    return os.path.realpath(comfyui), host_python, envs, index


def _variables(words):
    """--env NAME=VALUE words as the entry's env."""
    variables = {}
    for word in words:
        name, equals, value = word.partition("=")
        if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise Refused(f"--env {word} is not NAME=VALUE with a variable's name; write it as --env HF_HOME=/srv/hf")
        variables[name] = value
    return variables


def _confinable(name, declarations, entry, options, run_install_py):
    """Refused before anything runs when the add would run the pack's code where its worker
    would not: a build from source without --allow-sdist, or, for a sandboxed pack, a build
    or an install.py at all (they run outside any sandbox, as the user)."""
    builds = [requirement for requirement in declarations.requirements if requirement.builds_from_source]
    if builds and not options.allow_sdist:
        raise Refused(f"pack \"{name}\"'s requirement {builds[0]} is built from source (a folder, an sdist or a VCS "
                      "URL), which runs its build code; give a wheel, or add the pack with --allow-sdist")
    if "sandbox" in entry and (options.allow_sdist or run_install_py):
        flag = "--allow-sdist" if options.allow_sdist else "--run-install-py"
        raise Refused(f"pack \"{name}\" runs in a sandbox, and {flag} would run its code outside one (builds and "
                      "install.py run as you); build its wheels elsewhere into a wheelhouse, then add it without "
                      f"{flag}")


def add(options):
    config = Config(options.config) if options.config else None
    pack_dirs = _pack_dirs(options.pack_dir)
    name = _name(options, pack_dirs[0])
    comfyui, host_python, envs, index = _settings(options, config)
    host = baseline.probe(host_python)
    declarations = manifests.read_packs(pack_dirs, ".".join(host["version"].split(".")[:2]))
    processes.say(f"pack \"{name}\": {len(declarations.normalized())} requirement(s) from "
                  f"{', '.join(os.path.basename(file) for file in declarations.files) or 'no manifest'}")
    for note in declarations.notes:
        processes.say(f"  note: {note}")
    scripts = [os.path.join(folder, "install.py") for folder in pack_dirs
               if os.path.isfile(os.path.join(folder, "install.py"))]
    has_script = bool(scripts)
    for script in scripts if not options.run_install_py else []:
        processes.say(f"  note: {script} was not run; to run it in the pack's environment, add the pack again with "
                      "--run-install-py")
    install_py = key.install_py_hashes(pack_dirs) if options.run_install_py and has_script else None
    inputs = key.inputs(declarations, install_py, host, baseline.of_host(host["site_dirs"], comfyui))
    env_key = key.key_of(inputs)
    env_dir = build.env_dir_of(envs, env_key)
    entry = config_entry.entry(name, pack_dirs[0] if len(pack_dirs) == 1 else pack_dirs, env_dir,
                               options.comfyui_arg, options.sandbox, _variables(options.env))
    run_install_py = options.run_install_py and has_script
    job = build.Job(envs, env_key, inputs, host, declarations, name, pack_dirs, index, run_install_py)
    # Shared with other adds until the config names the environment: a remove or a gc
    # deciding meanwhile would find it named by no config, and take it.
    with owners.adding(envs, config.path if config else None):
        return _put(options, config, entry, job, comfyui, host_python, has_script)


def _usable(env_dir, was_built):
    """Refused when this user cannot read the environment; a finished one that is its
    builder's alone (built before environments were made readable by every user) opened.
    Whether it was opened."""
    found = access.problem(env_dir)
    if found is not None and found.kind == "denied":
        raise Refused(f"the environment {env_dir} {found.words}; run this add as {found.owner or 'its owner'}, which "
                      "makes it readable to every user")
    if not was_built:
        return False
    try:
        return access.open_to_all(env_dir) > 0
    except PermissionError as error:
        raise Refused(f"the environment {env_dir} is not readable by every user ({error.filename}), and only its "
                      f"owner can change that; run this add as {access.user_name(os.stat(env_dir).st_uid)}") from None


def _put(options, config, entry, job, comfyui, host_python, has_script):
    """The environment found or built, the pack's import checked in it, the config written."""
    name, env_dir = entry["name"], entry["python"]["environment"]
    was_built = build.complete(env_dir, job.key)
    opened = _usable(env_dir, was_built)
    changed = config.put(entry) if config else True
    written = config.entry(name) if config else entry
    _confinable(name, job.declarations, written, options, job.run_install_py)
    if opened:
        processes.say(f"environment {env_dir} made readable to every user (it was its builder's alone), so the "
                      "user a config runs as can use it")
    if was_built and not changed:
        if not opened:
            processes.say(f"pack \"{name}\": nothing changed (environment {env_dir} is up to date, the config "
                          "names it); nothing written")
        return 0
    env_dir, built = build.ensure(job, host_python)
    if not built:
        processes.say(f"environment {env_dir} already built for these inputs: reused")
    try:
        nodes = import_check.run(name, written, comfyui, config, env_dir, job.envs)
    except Refused as error:
        if has_script and not job.run_install_py and "sandbox" not in written:
            raise Refused(f"{error}; its install.py was not run, and may install what the pack needs: add the pack "
                          "again with --run-install-py") from None
        raise
    processes.say(f"pack \"{name}\" imports in its environment{' (in its sandbox)' if 'sandbox' in written else ''}: "
                  f"{nodes} node classes")
    if config:
        config.write()
        processes.say(f"pack \"{name}\" written to {config.path} with its environment {env_dir}")
    else:
        processes.say("add this entry to the config's packs:")
        processes.say(json.dumps(entry, indent=2))
    return 0


def remove(options):
    config = Config(options.config)
    entry = config.take(options.name)
    config.write()
    processes.say(f"pack \"{options.name}\" taken out of {config.path}")
    python = entry.get("python") if isinstance(entry.get("python"), dict) else {}
    env_dir = python.get("environment")
    if not isinstance(env_dir, str):
        return 0
    env_dir = os.path.realpath(config.path_of(env_dir))
    if not inventory.built_by_tool(env_dir):
        processes.say(f"environment {env_dir} left alone: it is not an environment this command built")
        return 0
    envs = os.path.dirname(env_dir)
    # Exclusive: no add under the folder is between building an environment and naming it.
    with owners.deciding(envs):
        users = owners.users(envs, [config.path])
        keepers = owners.keepers(env_dir, users)
        doubts = owners.doubts(users)
        if keepers:
            kept_by, packs = keepers[0]
            whose = "this config" if kept_by == os.path.realpath(config.path) else f"the config {kept_by}"
            processes.say(f"environment {env_dir} kept: {whose} uses it (pack{'s' if len(packs) > 1 else ''} "
                          f"{', '.join(packs)})")
        elif doubts:
            processes.say(f"environment {env_dir} kept: {doubts[0].doubt}, and that config may name it; comfyctl env "
                          "gc removes it once the config can be read and none names it")
        else:
            shutil.rmtree(env_dir)
            processes.say(f"environment {env_dir} deleted: no config names it")
    return 0


def check(options):
    """The estimate of which of the pack's node classes can run isolated, as text or JSON."""
    # Here, not at the top: an add or a remove has no use for the reader of pack sources.
    from .. import pack_check
    from ..pack_check import report
    try:
        found = pack_check.estimate(options.pack_dir)
    except pack_check.NotAPack as error:
        raise Refused(str(error)) from None
    print(report.as_json(found) if options.json else report.text(found), flush=True)
    return 0


def parser():
    top = argparse.ArgumentParser(prog="comfyctl pack", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True)
    adding = commands.add_parser("add", help="build a pack's environment and add the pack to the config")
    adding.add_argument("pack_dir", metavar="PACK_DIR", nargs="+",
                        help="the pack's folder; several make a pack group, imported in order into one worker")
    adding.add_argument("--name", help="the pack's name in the config (default: its folder's, lower-cased)")
    adding.add_argument("--config", help="the supervisor's config: read for defaults, and the pack written to it")
    adding.add_argument("--comfyui", help="the ComfyUI checkout (default: the config's comfyui.checkout)")
    adding.add_argument("--host-python", help="ComfyUI's interpreter (default: the config's comfyui.command)")
    adding.add_argument("--envs", help="where environments are kept (default: environments.root, or "
                                       "$XDG_DATA_HOME/comfy-supervisor/envs)")
    adding.add_argument("--find-links", action="append", default=[], metavar="DIR", help="a wheelhouse folder")
    adding.add_argument("--no-index", action="store_true", help="no package index: the wheelhouses only")
    adding.add_argument("--index-url", help="the package index (a mirror)")
    adding.add_argument("--run-install-py", action="store_true", help="run the pack's install.py in its environment")
    adding.add_argument("--allow-sdist", action="store_true",
                        help="build what has no wheel (an sdist, a folder, a VCS URL), running its build code")
    adding.add_argument("--sandbox", action="store_true",
                        help="a new entry runs in the sandbox (\"sandbox\": {}), the import check too")
    adding.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable of the pack's worker, written into its entry's env (again for more); the "
                             "import check runs with it")
    adding.add_argument("--comfyui-arg", action="append", default=[], metavar="ARG",
                        help="one of ComfyUI's flags for the pack's worker, as --comfyui-arg=--cpu")
    removing = commands.add_parser("remove", help="take a pack out of the config, and its environment if unused")
    removing.add_argument("name", metavar="NAME")
    removing.add_argument("--config", required=True)
    checking = commands.add_parser("check", help="estimate, from the pack's source, which of its node classes can run "
                                                 "isolated")
    checking.add_argument("pack_dir", metavar="DIR", help="the pack's folder (read, never imported)")
    checking.add_argument("--json", action="store_true", help="the estimate as JSON (with a version field)")
    return top


def main(argv=None):
    options = parser().parse_args(argv)
    try:
        commands = {"add": add, "remove": remove, "check": check}
        return commands[options.command](options)
    except (Refused, ManifestError, baseline.HostError) as error:
        processes.refuse_line(str(error))
        return 2
    except OSError as error:
        # A file or folder of the user's that cannot be read or written: their input, one line.
        where = f" ({error.filename})" if error.filename else ""
        processes.refuse_line(f"{error.strerror or error}{where}; check that path and its permissions")
        return 2
    except InstallFailed as error:
        processes.refuse_line(str(error))
        return 1
