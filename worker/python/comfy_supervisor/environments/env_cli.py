"""comfyctl env list | gc [--dry-run]: the environments under an environments folder.

`list` shows each environment (its key folder, size, whether it is finished) and the
configs and packs that name it. `gc` removes those no config names, and the folders of
builds that did not end; with --dry-run it removes nothing. The folder is --envs, else the
config's environments.root, else the default, as for `comfyctl pack add`.
Exit status: 0 done, 2 refused (one line on stderr), 1 a removal failed."""

import argparse
import json
import os
import shutil
import sys

from . import inventory, owners
from .cli import default_envs
from .config_entry import Config
from .errors import Refused
from .inventory import shown_size
from .processes import say

JSON_VERSION = 1
_STATES = {"denied": "unreadable"}
_NOT_USED = {"building": "- (gc removes it unless its build is running)", "other": "- (not the tool's: never removed)"}


def _envs(options):
    config = Config(options.config) if options.config else None
    root = options.envs or (config.environments()["root"] if config else None) or default_envs()
    envs = os.path.abspath(root)
    if not os.path.isdir(envs):
        raise Refused(f"no environments folder at {envs}; name it with --envs DIR, or the config whose "
                      "environments.root it is with --config FILE")
    return envs, [config.path] if config else []


def _used_by(entry):
    if entry.kind != "environment":
        return _NOT_USED[entry.kind]
    return "; ".join(f"{config}: {', '.join(packs)}" for config, packs in entry.users) or "no config"


def list_command(options):
    envs, given = _envs(options)
    users = owners.users(envs, given)
    entries = inventory.entries(envs, users)
    if options.json:
        print(json.dumps({"version": JSON_VERSION, "envs": envs, "configs": [user.path for user in users],
                          "doubts": [{"config": user.path, "reason": user.doubt} for user in owners.doubts(users)],
                          "entries": [entry.as_json() for entry in entries]}, indent=2))
        return 0
    say(f"environments in {envs} ({len(users)} config(s) looked at)")
    width = max([len(entry.name) for entry in entries] + [16])
    say(f"{'NAME':<{width}}  {'SIZE':>10}  {'STATE':<12}  USED BY")
    for entry in entries:
        say(f"{entry.name:<{width}}  {shown_size(entry.bytes):>10}  {_STATES.get(entry.state, entry.state):<12}  "
            f"{_used_by(entry)}")
    for user in owners.doubts(users):
        say(f"{user.doubt}: it may name any of these, and gc removes nothing until it can be read")
    return 0


def _why(entry):
    if entry.kind == "building":
        return "a build that did not end"
    return f"{_STATES.get(entry.state, entry.state)}, no config names it"


def gc_command(options):
    envs, given = _envs(options)
    removed, freed, kept = 0, 0, 0
    with owners.deciding(envs):
        for path in given:
            owners.register(envs, path)
        users = owners.users(envs, given)
        doubts = owners.doubts(users)
        if doubts:
            raise Refused(f"{doubts[0].doubt}, and it may name any environment under {envs}: nothing removed; "
                          "make it readable (or delete it), then run gc again")
        for entry in inventory.entries(envs, users):
            if entry.kind == "other" or entry.users:
                kept += entry.kind == "environment"
                continue
            with inventory.unless_building(envs, entry.key) as free:
                if not free:
                    say(f"kept {entry.path}: a build of it is running")
                    kept += 1
                    continue
                if not options.dry_run:
                    shutil.rmtree(entry.path)
                say(f"{'would remove' if options.dry_run else 'removed'} {entry.path} ({shown_size(entry.bytes)}, "
                    f"{_why(entry)})")
                removed, freed = removed + 1, freed + entry.bytes
    # The configs it went by: one that no record names (made before records were kept) is not among them.
    looked = f"configs looked at: {', '.join(user.path for user in users) or 'none'}"
    if options.dry_run:
        say(f"gc --dry-run of {envs}: {removed} would be removed, {shown_size(freed)}; {kept} kept; {looked}; "
            "nothing removed")
    else:
        say(f"gc of {envs}: {removed} removed, {shown_size(freed)} freed; {kept} kept; {looked}")
    return 0


def parser():
    top = argparse.ArgumentParser(prog="comfyctl env", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="each environment, its size and state, and the configs naming it")
    collecting = commands.add_parser("gc", help="remove the environments no config names")
    collecting.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    for command in (listing, collecting):
        command.add_argument("--envs", help="the environments folder (default: the config's environments.root, "
                                            "or $XDG_DATA_HOME/comfy-supervisor/envs)")
        command.add_argument("--config", help="a config: its environments.root, and it is looked at as a user "
                                              "(gc records it)")
    listing.add_argument("--json", action="store_true", help="the listing as JSON, for scripts")
    return top


def main(argv=None):
    options = parser().parse_args(argv)
    try:
        return list_command(options) if options.command == "list" else gc_command(options)
    except Refused as error:
        print(f"comfyctl env: {error}", file=sys.stderr, flush=True)
        return 2
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        print(f"comfyctl env: {error.strerror or error}{where}; check that path and its permissions", file=sys.stderr,
              flush=True)
        return 1
