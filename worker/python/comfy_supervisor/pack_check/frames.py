"""Where the reading (interpreter.py) binds names, and how its statements end a block."""


class TooLarge(Exception):
    """The reading went past its bound."""


class Returned(Exception):
    def __init__(self, value):
        self.value = value


class Raised(Exception):
    """A `raise` the reading reached: it ends the block it is in."""

    def __init__(self, line=None):
        super().__init__(line)
        self.line = line


class Broke(Exception):
    pass


class Continued(Exception):
    pass


def both(first, second):
    """Two conditions as one (either may be None)."""
    return " and ".join(c for c in (first, second) if c) or None


class Frame:
    """Where names are bound: a module's, a class body's or a function call's."""

    def __init__(self, module, outer=None, condition=None, is_class=False):
        self.module, self.outer, self.condition, self.is_class = module, outer, condition, is_class
        self.env = {}
        self.bound_under = {}  # name -> the condition it was bound under
        self.globals = set()

    @property
    def module_frame(self):
        frame = self
        while frame.outer is not None:
            frame = frame.outer
        return frame
