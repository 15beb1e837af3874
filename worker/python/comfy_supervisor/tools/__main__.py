"""python3 -m comfy_supervisor.tools COMMAND ARGS...: what comfyctl's pack, env and adopt run
(supervisor/ctl/python_tool.hpp).

    pack   add, remove and check one pack (environments/cli.py)
    env    list the environments and remove those no config names (environments/env_cli.py)
    adopt  isolate an installed ComfyUI's custom nodes (adopt/cli.py)

Each command's module is imported only when it runs, so that one's missing dependency
(tomllib, PyYAML) never stops another. The exit status is the command's."""

import importlib
import signal
import sys

_COMMANDS = {
    "pack": "comfy_supervisor.environments.cli",
    "env": "comfy_supervisor.environments.env_cli",
    "adopt": "comfy_supervisor.adopt.cli",
}


def main(argv):
    if not argv or argv[0] not in _COMMANDS:
        given = f"'{argv[0]}'" if argv else "none"
        print(f"comfyctl: the Python tool runs {', '.join(_COMMANDS)}, given {given}; see comfyctl --help",
              file=sys.stderr)
        return 2
    return importlib.import_module(_COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    # Output piped into `head` that stops reading ends the tool quietly, as any command-line program.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
