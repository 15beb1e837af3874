"""A custom node pack for the node-call bridge's tests and benchmark (docs/PACKS.md): torch
tensors in and out, ComfyUI's LATENT dict, plain values, an object that stays in the
worker as a handle, progress and interrupts, errors, out-of-memory, a death mid-node, and
messages to the browser through upstream's PromptServer, which it uses at import as real
packs do (an HTTP route), and wildcard sockets as packs declare them."""

import os
import signal
import time

import comfy.model_management
import comfy.utils
import torch
from server import PromptServer

CATEGORY = "comfy-supervisor tests"


@PromptServer.instance.routes.get("/bridge_pack/hello")
async def hello(request):
    """A route, as packs add them at import (routes_pack has the routes' checks)."""
    from aiohttp import web
    return web.Response(text="hello")


class Node:
    CATEGORY = CATEGORY
    FUNCTION = "run"


class InvertImage(Node):
    RETURN_TYPES = ("IMAGE",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    def run(self, image):
        return (1.0 - image,)


class EmptyLatent(Node):
    RETURN_TYPES = ("LATENT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"width": ("INT", {"default": 64, "min": 8}), "height": ("INT", {"default": 64, "min": 8}),
                             "batch_size": ("INT", {"default": 1, "min": 1})}}

    def run(self, width, height, batch_size):
        return ({"samples": torch.zeros([batch_size, 4, height // 8, width // 8]),
                 "batch_index": list(range(batch_size))},)


class Echo(Node):
    """Returns whatever it is given: every kind of value, both ways."""
    RETURN_TYPES = ("*",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("*",)}}

    def run(self, value):
        return (value,)


class DropFirst(Node):
    """Returns its input without the first row: a part of what it was given, as it came."""
    RETURN_TYPES = ("*",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("*",)}}

    def run(self, value):
        return (value[1:],)


class Remember(Node):
    """Keeps its input in the worker; Recall returns it in a later call."""
    RETURN_TYPES = ()
    OUTPUT_NODE = True
    kept = None

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("*",)}}

    def run(self, value):
        Remember.kept = value
        return ()


class Recall(Node):
    RETURN_TYPES = ("*",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        kept, Remember.kept = Remember.kept, None
        return (kept,)


class MappingOf(Node):
    """The name of the mapping its input tensor lies in, as /proc/self/maps says: where
    the worker reads what the host sent it."""
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("*",)}}

    def run(self, value):
        address = value.data_ptr()
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                start, end = (int(bound, 16) for bound in fields[0].split("-"))
                if start <= address < end:
                    return (fields[5].strip() if len(fields) > 5 else "",)
        return ("",)


class CloneImage(Node):
    """Returns a new IMAGE with its input's values: a node that makes its output."""
    RETURN_TYPES = ("IMAGE",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    def run(self, image):
        return (image.clone(),)


class AddOneInPlace(Node):
    """Adds one to its input where it lies, and returns it: a node that writes into what it got."""
    RETURN_TYPES = ("*",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("*",)}}

    def run(self, value):
        value += 1
        return (value,)


class PlainValues(Node):
    RETURN_TYPES = ("INT", "FLOAT", "STRING", "BOOLEAN")
    RETURN_NAMES = ("count", "scale", "text", "flag")
    OUTPUT_TOOLTIPS = ("the count plus one", "the scale doubled", "the text reversed", "the flag negated")
    DESCRIPTION = "Plain values in, changed, and out."
    NOT_IDEMPOTENT = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"count": ("INT", {"default": 1}), "scale": ("FLOAT", {"default": 1.0}),
                             "text": ("STRING", {"default": ""}), "flag": ("BOOLEAN", {"default": False})}}

    @classmethod
    def VALIDATE_INPUTS(cls, count, text):
        return True if count >= 0 else f"count must not be negative, not {count}"

    @classmethod
    def IS_CHANGED(cls, count, scale, text, flag):
        return f"{count}/{scale}/{text}/{flag}"

    def run(self, count, scale, text, flag):
        return (count + 1, scale * 2, text[::-1], not flag)


class LoadTinyModel(Node):
    """A model that stays in this worker: the host gets a handle."""
    RETURN_TYPES = ("TINY_MODEL",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seed": ("INT", {"default": 0})}}

    def run(self, seed):
        torch.manual_seed(seed)
        return (torch.nn.Linear(4, 2),)


class ApplyTinyModel(Node):
    RETURN_TYPES = ("LATENT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("TINY_MODEL",), "samples": ("LATENT",)}}

    def run(self, model, samples):
        with torch.no_grad():
            return ({"samples": model(samples["samples"])},)


class SlowProgress(Node):
    """Runs for `seconds`, a step every 10 ms, reporting progress and checking interrupts."""
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seconds": ("FLOAT", {"default": 2.0})}}

    def run(self, seconds):
        steps = max(1, int(seconds / 0.01))
        bar = comfy.utils.ProgressBar(steps)
        for step in range(steps):
            comfy.model_management.throw_exception_if_processing_interrupted()
            time.sleep(0.01)
            bar.update_absolute(step + 1, steps)
        return (steps,)


class Raise(Node):
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"message": ("STRING", {"default": "a node's own error"})}}

    def run(self, message):
        raise ValueError(message)


class RaiseOutOfMemory(Node):
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")


class ExitMidNode(Node):
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        os.kill(os.getpid(), signal.SIGKILL)


class NotifyBrowser(Node):
    """Sends the browser a message through upstream's PromptServer, addressed as packs
    address them, and a binary one, which stays in the worker."""
    RETURN_TYPES = ("STRING",)
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"default": "hello"})}}

    def run(self, text):
        server = PromptServer.instance
        server.send_sync("bridge.notify", {"text": text, "node": server.last_node_id}, server.client_id)
        server.send_sync("bridge.binary", b"\x89PNG not JSON", server.client_id)
        return (text,)


class Nothing(Node):
    """No inputs and no outputs: a node call's own cost (scripts/bench bridge)."""
    RETURN_TYPES = ()

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        return ()


class AnyType(str):
    """A type equal to every other, as packs declare their "any type" sockets (upstream
    compares types with !=)."""

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


class ImageOrMask(str):
    """A type of customised equality: an IMAGE or a MASK."""

    def __ne__(self, other):
        return other not in ("IMAGE", "MASK", "IMAGE_OR_MASK")

    __hash__ = str.__hash__


class AnyInputs(dict):
    """Optional inputs of any name, as rgthree's FlexibleOptionalInputType: a name it does
    not hold is an input of `kind`."""

    def __init__(self, kind, inputs=None):
        super().__init__(inputs or {})
        self.kind = kind

    def __getitem__(self, name):
        return dict.__getitem__(self, name) if dict.__contains__(self, name) else (self.kind,)

    def __contains__(self, name):
        return True


ANY = AnyType("*")


class PassAnything(Node):
    """A wildcard in and out, optional inputs of any name (counted), and an input of a type
    of customised equality."""
    RETURN_TYPES = (ANY, "INT")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": (ANY,)},
                "optional": AnyInputs(ANY, {"pixels": (ImageOrMask("IMAGE_OR_MASK"),)})}

    def run(self, value, **more):
        return (value, len(more))


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (InvertImage, EmptyLatent, Echo, DropFirst, Remember, Recall,
                                                      MappingOf, CloneImage, AddOneInPlace, PlainValues, LoadTinyModel,
                                                      ApplyTinyModel, SlowProgress, Raise, RaiseOutOfMemory,
                                                      ExitMidNode, NotifyBrowser, Nothing, PassAnything)}
NODE_DISPLAY_NAME_MAPPINGS = {"InvertImage": "Invert image (isolated)"}
WEB_DIRECTORY = "./web"
