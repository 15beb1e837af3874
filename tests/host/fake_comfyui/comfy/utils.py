"""Our model of upstream's comfy/utils.py progress reporting: one global hook, which
main.py sets to send the UI each update, and the ProgressBar nodes drive it with; its
get_attr and set_attr, which walk a dotted name with getattr as upstream's do (a
ModelPatcher's get_model_object and object patches); and tiled_scale (one tile here), in
inference mode as upstream's, which a VAE's tiled forms call."""

PROGRESS_BAR_HOOK = None


def set_progress_bar_global_hook(function):
    global PROGRESS_BAR_HOOK
    PROGRESS_BAR_HOOK = function


def get_attr(obj, attr):
    for name in attr.split("."):
        obj = getattr(obj, name)
    return obj


def set_attr(obj, attr, value):
    """Sets the last name of `attr` on what the names before it reach; returns what it held."""
    *path, last = attr.split(".")
    owner = get_attr(obj, ".".join(path)) if path else obj
    previous = getattr(owner, last)
    setattr(owner, last, value)
    return previous


class ProgressBar:
    def __init__(self, total, node_id=None):
        self.total = total
        self.current = 0
        self.hook = PROGRESS_BAR_HOOK
        self.node_id = node_id

    def update_absolute(self, value, total=None, preview=None):
        if total is not None:
            self.total = total
        if value > self.total:
            value = self.total
        self.current = value
        if self.hook is not None:
            self.hook(self.current, self.total, preview, node_id=self.node_id)

    def update(self, value):
        self.update_absolute(self.current + value)


def tiled_scale(samples, function, tile_x=64, tile_y=64, overlap=8, upscale_amount=4, out_channels=3,
                output_device="cpu", pbar=None):
    import torch  # only where a VAE is: `utils` is this module to whatever imports it first
    with torch.inference_mode():  # upstream's is decorated with it
        return function(samples).to(output_device)
