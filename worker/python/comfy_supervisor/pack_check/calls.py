"""The calls the reading computes (interpreter.py): the pack's own functions, read through
their bodies; its classes (a str subclass that equals every type is a wildcard, a dict
subclass a section of inputs of any name); the methods of plain values and a few of
Python's builtins. A call of anything outside the pack is an ExternalCall, not computed."""

import ast

from .frames import Broke, Continued, Frame, Raised, Returned
from .values import (AnyInputs, BoundMethod, Builtin, External, ExternalCall, Instance, Items, Mapping,
                     PackClass, PackFunction, Unknown, Wildcard)

_STR_METHODS = frozenset(("format", "join", "upper", "lower", "replace", "strip", "lstrip", "rstrip", "title",
                          "capitalize", "split", "startswith", "endswith", "removeprefix", "removesuffix"))
MAX_DEPTH = 24  # the pack's own calls read one inside another


def call(interpreter, function, args, kwargs, frame):
    if isinstance(function, PackFunction):
        return call_function(interpreter, function, args, kwargs)
    if isinstance(function, PackClass):
        return _construct(interpreter, function, args, kwargs)
    if isinstance(function, BoundMethod):
        return _method(function, args, kwargs, frame)
    if isinstance(function, Builtin):
        return _builtin(interpreter, function.name, args, kwargs)
    if isinstance(function, External):
        return ExternalCall(function, args, kwargs)
    if isinstance(function, Unknown):
        return Unknown(f"a call of {function.reason}")
    return Unknown(f"a call of a {type(function).__name__}")


def call_function(interpreter, function, args, kwargs):
    node = function.node
    if interpreter.depth >= MAX_DEPTH:
        return Unknown(f"{function.name}() calls too deep to read")
    frame = Frame(function.module, outer=function.owner)
    if function.bound is not None:
        args = [function.bound] + list(args)
    parameters = node.args
    positional = parameters.posonlyargs + parameters.args
    defaults = [None] * (len(positional) - len(parameters.defaults)) + list(parameters.defaults)
    for index, (parameter, default) in enumerate(zip(positional, defaults)):
        if index < len(args):
            value = args[index]
        elif parameter.arg in kwargs:
            value = kwargs.pop(parameter.arg)
        elif default is not None:
            value = interpreter.eval(default, function.owner)
        else:
            value = Unknown(f"the argument {parameter.arg} of {function.name}")
        frame.env[parameter.arg] = value
    for parameter, default in zip(parameters.kwonlyargs, parameters.kw_defaults):
        frame.env[parameter.arg] = kwargs.pop(parameter.arg, None) if parameter.arg in kwargs else \
            interpreter.eval(default, function.owner) if default is not None else Unknown(parameter.arg)
    if parameters.vararg:
        frame.env[parameters.vararg.arg] = tuple(args[len(positional):])
    if parameters.kwarg:
        frame.env[parameters.kwarg.arg] = Mapping(kwargs)
    if isinstance(node, ast.Lambda):
        return interpreter.eval(node.body, frame)
    if any(isinstance(inner, (ast.Yield, ast.YieldFrom)) for inner in ast.walk(node)):
        return Unknown(f"what the generator {function.name}() yields")
    interpreter.depth += 1
    try:
        interpreter.block(node.body, frame)
    except Returned as returned:
        return returned.value
    except Raised as raised:
        found = Unknown(f"what {function.name}() gives: it raises at {function.module.where}:{raised.line}")
        found.raised_at = f"{function.module.where}:{raised.line}"
        return found
    except (Broke, Continued):
        pass
    finally:
        interpreter.depth -= 1
    return None


def _inherits(interpreter, cls, name, seen=()):
    """Whether `cls` derives from Python's `name` (str, dict) through the pack's classes."""
    for base in interpreter.bases(cls):
        if isinstance(base, Builtin) and base.name == name:
            return True
        if isinstance(base, PackClass) and base not in seen and _inherits(interpreter, base, name, seen + (cls,)):
            return True
    return False


def _construct(interpreter, cls, args, kwargs):
    if _inherits(interpreter, cls, "str"):
        text = args[0] if args else kwargs.get("object", "")
        if not isinstance(text, str):
            return Unknown(f"a {cls.name} of {getattr(text, 'reason', 'an unknown value')}")
        never_differs = interpreter.class_attribute(cls, "__ne__", cls)
        return Wildcard(text) if isinstance(never_differs, PackFunction) else text
    if _inherits(interpreter, cls, "dict"):
        known, default = {}, None
        for value in list(args) + list(kwargs.values()):
            if isinstance(value, dict):
                known.update(value)
            elif default is None:
                default = value
        return AnyInputs(known, default)
    for sequence in ("tuple", "list"):  # a tuple of the pack's (rgthree's ByPassTypeTuple): its items
        if _inherits(interpreter, cls, sequence):
            items = interpreter.iterable(args[0]) if args else []
            return Unknown(f"the items of a {cls.name}") if items is None else \
                (tuple(items) if sequence == "tuple" else Items(items))
    made = Instance(cls)
    init = interpreter.class_attribute(cls, "__init__", made)
    if isinstance(init, PackFunction):
        call_function(interpreter, init, args, dict(kwargs))
    return made


def _method(method, args, kwargs, frame):
    value, name = method.value, method.name
    if isinstance(value, dict):
        if name == "items":
            return [(k, v) for k, v in value.items()]
        if name in ("keys", "values"):
            return list(getattr(value, name)())
        if name == "get" and args:
            return value.get(args[0], args[1] if len(args) > 1 else None)
        if name == "copy":
            copied = Mapping()
            copied.merge(value, None)
            return copied
        if name == "update":
            for update in list(args) + [kwargs]:
                if not isinstance(update, dict):
                    return Unknown("an update with values the reading does not compute")
                if isinstance(value, Mapping):
                    value.merge(update, frame.condition)
                else:
                    value.update(update)
            return None
        if name == "setdefault" and args:
            return value.setdefault(args[0], args[1] if len(args) > 1 else None)
    if isinstance(value, list) and name in ("append", "extend"):
        if frame.condition and isinstance(value, Items):
            value.uncertain = True
        if name == "append" and args:
            value.append(args[0])
        elif args and isinstance(args[0], (list, tuple)):
            value.extend(args[0])
        return None
    if isinstance(value, str) and name in _STR_METHODS:
        plain = [a for a in args if isinstance(a, (str, int, float, list, tuple))]
        if len(plain) == len(args) and all(isinstance(v, (str, int, float)) for v in kwargs.values()):
            try:
                return getattr(value, name)(*args, **kwargs)
            except (TypeError, ValueError, IndexError, KeyError):
                return Unknown(f"{value!r}.{name}(...) raises")
    return Unknown(f"the method {name} of a {type(value).__name__}")


def _builtin(interpreter, name, args, kwargs):
    if name in ("classmethod", "staticmethod", "property") and args:
        if isinstance(args[0], PackFunction):
            args[0].kind = name
        return args[0]
    if name in ("dict",):
        made = Mapping()
        for value in list(args) + [kwargs]:
            if isinstance(value, dict):
                made.merge(value, None)
            elif isinstance(value, (list, tuple)) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
                made.merge(dict(value), None)
            else:
                return Unknown("dict() of values the reading does not compute")
        return made
    items = interpreter.iterable(args[0]) if args else []
    if name in ("list", "sorted") and items is None:
        made = Items()  # a list, whatever its items: a combo's choices, where a socket's type
        made.uncertain = True
        return made
    if name in ("list", "tuple", "sorted", "set", "frozenset", "reversed", "enumerate"):
        if items is None:
            return Unknown(f"{name}() of {getattr(args[0], 'reason', 'values the reading does not compute')}")
        if name == "sorted":
            try:
                return sorted(items, reverse=bool(kwargs.get("reverse")))
            except TypeError:
                return Unknown("sorted() of values the reading does not compare")
        if name == "enumerate":
            return list(enumerate(items))
        return tuple(items) if name == "tuple" else list(reversed(items)) if name == "reversed" else list(items)
    if name == "str" and args and isinstance(args[0], (str, int, float)):
        return str(args[0])
    if name == "len" and args and isinstance(args[0], (str, list, tuple, dict)):
        return len(args[0])
    if name == "getattr" and len(args) >= 2 and isinstance(args[1], str):
        found = interpreter.attribute(args[0], args[1])
        return args[2] if isinstance(found, Unknown) and len(args) > 2 else found
    return Unknown(f"{name}(...)")
