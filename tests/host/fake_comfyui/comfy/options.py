"""Our model of upstream's comfy/options.py: whether comfy.cli_args parses the process's
command line (main.py turns it on) or parses none."""

args_parsing = False


def enable_args_parsing(enable=True):
    global args_parsing
    args_parsing = enable
