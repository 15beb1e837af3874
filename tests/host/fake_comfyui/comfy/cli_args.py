"""Our model of upstream's comfy/cli_args.py, for the flags a pack's worker reads at
start-up: logging, the model paths configs and the output, input and user directories; and
which custom nodes ComfyUI imports (--disable-all-custom-nodes, --whitelist-custom-nodes,
which comfyctl adopt writes). As upstream's, it parses the command line only once
comfy.options allows it."""

import argparse

import comfy.options

parser = argparse.ArgumentParser()
parser.add_argument("--cpu", action="store_true")
parser.add_argument("--verbose", default="INFO", const="DEBUG", nargs="?")
parser.add_argument("--log-stdout", action="store_true")
parser.add_argument("--extra-model-paths-config", type=str, default=None, action="append", nargs="+")
parser.add_argument("--output-directory", type=str, default=None)
parser.add_argument("--input-directory", type=str, default=None)
parser.add_argument("--user-directory", type=str, default=None)
parser.add_argument("--disable-all-custom-nodes", action="store_true")
parser.add_argument("--whitelist-custom-nodes", type=str, nargs="+", default=[])
args, _ = parser.parse_known_args(None if comfy.options.args_parsing else [])
