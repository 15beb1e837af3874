"""A custom node pack with interfaces upstream could not use, beside one it can: an
INPUT_TYPES() that returns a list, and a RETURN_TYPES that is a number. Its bad nodes must
be left out alone, in one line, and every other node of every pack registered."""

CATEGORY = "comfy-supervisor tests"


class ListInputs:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return [("value", "INT")]

    def run(self, value):
        return (value,)


class NumberReturns:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = 7

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        return (7,)


class Fine:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"default": 1})}}

    def run(self, value):
        return (value * 2,)


NODE_CLASS_MAPPINGS = {"ListInputs": ListInputs, "NumberReturns": NumberReturns, "Fine": Fine}
