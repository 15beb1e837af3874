"""Upstream's errors that cross between the host and a pack as themselves (bridge/
conversation.py): ComfyUI's interrupt, raised as upstream's own check raises it, and its
out-of-memory exception, so that ComfyUI's executor handles them as its own. Each is read
from comfy.model_management where this process imported it, and is nothing where it did not.
"""

import sys


def _model_management():
    return sys.modules.get("comfy.model_management")


def interrupt(set_flag):
    """Upstream's InterruptProcessingException as its own check raises it here (`set_flag`:
    the flag set first, so that every wait on a pack hears it; then spent by the raise), or
    None in a process without ComfyUI."""
    mm = _model_management()
    if mm is None:
        return None
    if set_flag:
        mm.interrupt_current_processing(True)
    mm.throw_exception_if_processing_interrupted()
    return mm.InterruptProcessingException()


def is_interrupt(error):
    """Whether `error` is upstream's InterruptProcessingException."""
    mm = _model_management()
    return mm is not None and isinstance(error, getattr(mm, "InterruptProcessingException", ()))


def oom_type():
    """Upstream's out-of-memory exception class (OOM_EXCEPTION), or None."""
    found = getattr(_model_management(), "OOM_EXCEPTION", None)
    return found if isinstance(found, type) else None
