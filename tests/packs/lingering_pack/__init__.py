"""A custom node pack whose import leaves a process of its own running, in a session of its
own (out of its worker's process group), as a pack that starts a helper server does; the
helper's pid goes to the file its environment names (LINGERING_PACK_PID). `comfy-supervisor
check` imports it and must leave nothing of it running."""

import os
import subprocess

_helper = subprocess.Popen(["sleep", "3600"], start_new_session=True)
with open(os.environ["LINGERING_PACK_PID"], "w", encoding="utf-8") as pid_file:
    pid_file.write(str(_helper.pid))


class Linger:
    CATEGORY = "comfy-supervisor tests"
    FUNCTION = "run"
    RETURN_TYPES = ("INT",)
    INPUT_TYPES = classmethod(lambda cls: {"required": {}})

    def run(self):
        return (_helper.pid,)


NODE_CLASS_MAPPINGS = {"Linger": Linger}
