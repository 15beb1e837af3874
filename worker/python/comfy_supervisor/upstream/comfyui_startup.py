"""What ComfyUI's main.py has set up by the time it imports a custom node pack, made in a
pack's worker before the pack is imported: a real pack counts on it at import time.

- The checkout's `utils` package is imported first, as main.py imports it: upstream's
  nodes.py later puts `comfy/` first on the module path, after which `utils` would be
  comfy/utils.py and `from utils.install_util import ...` in upstream's own server
  module fails.
- ComfyUI's logging (upstream's app.logger.setup_logger, with --verbose and
  --log-stdout): what the pack logs at INFO reaches the supervisor's log under the pack's
  name, as it reaches ComfyUI's output in one process.
- Model folders as main.py sets them (upstream's utils.extra_config and folder_paths
  calls): the checkout's extra_model_paths.yaml, --extra-model-paths-config, and
  --output-directory, --input-directory, --user-directory from ComfyUI's own flags, so that
  the pack's loaders list what the host's do.
- The pack's own prestartup_script.py (each one of a group's packs'), as main.py runs
  them all before any pack's import; a failure is logged, as upstream logs it, and the
  import goes on.
- `server.PromptServer.instance`, which packs use at import (its `routes`) and while they
  run (`send_sync` to the browser). It is upstream's class without its server: the routes
  a pack adds are kept, for pack_worker/routes.py to answer what ComfyUI's server
  forwards, on the instance's loop; what a node sends the browser is forwarded to the
  host's PromptServer (`forward_to_host`).

Each step that the checkout cannot take (an older ComfyUI, a venv without aiohttp) is
skipped with one warning line, or, for a describe-only run, said in its one line should
the import then fail: the pack's own import says what it misses.
"""

import asyncio
import importlib.util
import itertools
import json
import logging
import os
import sys

log = logging.getLogger("comfy_supervisor")

# Set by node_server: sends (event, data, sid) to the host's PromptServer; until then, and
# for a describe-only run, what a pack sends the browser goes nowhere.
forward_to_host = None
_unsendable_said = set()


def prepare(checkout, pack_folders, quiet=False):
    """ComfyUI's start-up, as far as a pack in a worker needs it (`pack_folders`: the pack's
    folder, or a group's in order). ComfyUI's own flags are parsed already
    (pack_worker.__main__.take_comfyui_args). Returns what was skipped, one phrase a step;
    each is also logged as a warning unless `quiet`."""
    skipped = []

    def step(what, run):
        try:
            run()
            return True
        except Exception as error:  # noqa: BLE001 (an older checkout or a venv without its requirements)
            skipped.append(f"without {what} ({type(error).__name__}: "
                           f"{str(error).splitlines()[0] if str(error) else ''})")
            if not quiet:
                log.warning("comfy-supervisor: ComfyUI's start-up %s: a pack that uses it fails at import",
                            skipped[-1])
            return False

    if not step("its utils package", lambda: importlib.import_module("utils.extra_config")):
        return skipped
    step("its logging", _set_up_logging)
    step("its model folders", lambda: _apply_model_folders(checkout))
    for folder in pack_folders:
        _run_prestartup_script(folder)
    step("its PromptServer", _install_prompt_server)
    return skipped


def _set_up_logging():
    import app.logger
    from comfy.cli_args import args
    app.logger.setup_logger(log_level=args.verbose, use_stdout=getattr(args, "log_stdout", False))


def _apply_model_folders(checkout):
    import folder_paths
    import utils.extra_config
    from comfy.cli_args import args
    checkout_config = os.path.join(checkout, "extra_model_paths.yaml")
    configs = [checkout_config] if os.path.isfile(checkout_config) else []
    configs += itertools.chain(*(args.extra_model_paths_config or ()))
    for path in configs:
        utils.extra_config.load_extra_path_config(path)
    if args.output_directory:
        folder_paths.set_output_directory(os.path.abspath(args.output_directory))
    # Where the saving nodes (CheckpointSave and the like) put models: listed by loaders too.
    for kind in ("checkpoints", "clip", "vae", "diffusion_models", "loras"):
        folder_paths.add_model_folder_path(kind, os.path.join(folder_paths.get_output_directory(), kind))
    if args.input_directory:
        folder_paths.set_input_directory(os.path.abspath(args.input_directory))
    if args.user_directory:
        folder_paths.set_user_directory(os.path.abspath(args.user_directory))


def _run_prestartup_script(pack_folder):
    script = os.path.join(pack_folder, "prestartup_script.py")
    if not os.path.isfile(script):
        return
    try:
        spec = importlib.util.spec_from_file_location(os.path.splitext(script)[0], script)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except Exception as error:  # noqa: BLE001 (the pack's own error, logged as upstream logs it)
        log.error("comfy-supervisor: the pack's prestartup_script.py failed: %s: %s", type(error).__name__, error)


def _install_prompt_server():
    import server
    from aiohttp import web

    instance = server.PromptServer.__new__(server.PromptServer)  # its methods, not its HTTP server
    instance.routes = web.RouteTableDef()
    # Uploads to the pack's routes as large as ComfyUI's server takes (--max-upload-size, in MB).
    max_upload_mb = getattr(importlib.import_module("comfy.cli_args").args, "max_upload_size", 100)
    instance.app = web.Application(client_max_size=round(max_upload_mb * 1024 * 1024))
    instance.loop = asyncio.new_event_loop()
    instance.supports = ["custom_nodes_from_web"]
    instance.sockets, instance.sockets_metadata = {}, {}
    instance.on_prompt_handlers = []
    instance.client_id = instance.last_node_id = instance.last_prompt_id = None
    instance.number = 0
    instance.send_sync = _send_to_host

    async def send(event, data, sid=None):
        _send_to_host(event, data, sid)

    instance.send = send
    server.PromptServer.instance = instance


def _send_to_host(event, data, sid=None):
    """A pack's message to the browser, sent on by the host's PromptServer. Only JSON
    crosses: binary previews are not forwarded (said once per event)."""
    if forward_to_host is None:
        return
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError):
        if event not in _unsendable_said:
            _unsendable_said.add(event)
            log.warning("comfy-supervisor: %s messages to the browser are not JSON and stay in the worker",
                        str(event)[:80])
        return
    forward_to_host(str(event), data, sid if isinstance(sid, str) else None)


def prompt_server():
    """Upstream's PromptServer instance in this process (ComfyUI's, or the worker's made
    here), where there is one."""
    return getattr(getattr(sys.modules.get("server"), "PromptServer", None), "instance", None)


def set_call_context(client_id, node_id):
    """Which browser and node the call runs for, as upstream's PromptServer knows them
    while it executes a prompt; packs address their messages with them."""
    instance = prompt_server()
    if instance is not None:
        instance.client_id = client_id if isinstance(client_id, str) else None
        instance.last_node_id = node_id if isinstance(node_id, str) else None

