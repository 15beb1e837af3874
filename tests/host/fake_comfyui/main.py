"""Runs comfy_supervisor.comfyui installed as in ComfyUI: one prompt that loads a model
of --load GiB through load_models_gpu, then the supervisor's commands until Shutdown."""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import comfy.model_management as mm  # noqa: E402
import execution  # noqa: E402
from comfy_supervisor import comfyui  # noqa: E402


def main():
    size = int(sys.argv[sys.argv.index("--load") + 1]) << 30
    host = comfyui.install()
    mm.participant = host.link
    model = mm.ModelPatcher(size)
    execution.PromptExecutor().execute(lambda: mm.load_models_gpu([model], memory_required=1 << 30), "prompt-1")
    print(f"fake_comfyui: prompt done, EXTRA_RESERVED_VRAM={mm.EXTRA_RESERVED_VRAM}, "
          f"{len(mm.current_loaded_models)} model(s) loaded", file=sys.stderr, flush=True)
    threading.Event().wait()  # the supervisor's Shutdown ends the process


if __name__ == "__main__":
    main()
