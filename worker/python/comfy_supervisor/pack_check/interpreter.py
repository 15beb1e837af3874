"""A reader that computes what a pack's modules bind, from their trees, without running them.

It steps through a module's statements as the import would, with the values it can compute
(constants, containers, the pack's own classes and functions, names from outside the pack
as External) and Unknown, with why, for the rest. A call of the pack's own function is
read through its body (KJNodes builds its NODE_CLASS_MAPPINGS in one; rgthree names its
nodes with one); a call of anything outside the pack is not computed. A branch whose test
it cannot decide is read under that test, as a condition: what the branch sets in a dict
carries it (a node registered only where a config value or an import allows). Work is
bounded (MAX_STEPS, calls.MAX_DEPTH); a pack past the bound says so, never hangs the reading.
"""

import ast
import operator

from .calls import call
from .frames import Broke, Continued, Frame, Raised, Returned, TooLarge, both
from .values import BoundMethod, Builtin, External, ExternalCall, Instance, Items, Mapping, PackClass, PackFunction, Unknown

MAX_STEPS = 3_000_000
MAX_ITEMS = 10_000
_BUILTINS = ("dict", "list", "tuple", "set", "frozenset", "sorted", "str", "len", "int", "float", "bool",
             "classmethod", "staticmethod", "property", "getattr", "hasattr", "reversed", "enumerate", "zip",
             "isinstance", "min", "max", "any", "all", "range")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Mod: operator.mod,
           ast.BitOr: operator.or_, ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b}
_PLAIN = (str, int, float, bool, type(None), tuple, list, dict)


def text_of(node, limit=80):
    """A node's source, shortened for a line."""
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Interpreter:
    def __init__(self, source):
        self.source = source
        self.steps = 0
        self.depth = 0
        self.raised = []  # FILE:LINE of each raise a module's import reaches, whatever the reading assumed

    def _step(self):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TooLarge(f"the reading stopped after {MAX_STEPS} steps")

    # ---- modules ----

    def module_frame(self, module):
        """The module's namespace, read once (a cycle of imports sees what was bound so far)."""
        if module.frame is None:
            module.frame = Frame(module)
            qualified = self.source.name + (f".{module.name}" if module.name else "")
            module.frame.env.update(__name__=qualified, __file__=module.where)
            tree = self.source.tree(module)
            if tree is not None:
                try:
                    self.block(tree.body, module.frame)
                except Raised as raised:  # its import raises there: what was bound before stays
                    self.raised.append(f"{module.where}:{raised.line}")
        return module.frame

    def _imported(self, module, name, level, alias):
        """What `from ... import alias` binds."""
        target = self.source.resolve(module, name, level)
        if target is None:
            if level:
                return Unknown(f"{'.' * level}{name or ''} is not a module of the pack")
            return External(f"{name}.{alias}")
        env = self.module_frame(target).env
        if alias in env:
            return env[alias]
        sub = self.source.modules.get(f"{target.name}.{alias}" if target.name else alias)
        return sub if sub is not None else Unknown(f"{alias} is not bound in {target.where}")

    def _import(self, node, frame):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = self.source.resolve(frame.module, alias.name, 0)
                if alias.asname:
                    self.bind(alias.asname, target or External(alias.name), frame)
                else:
                    head = alias.name.split(".")[0]
                    self.bind(head, self.source.resolve(frame.module, head, 0) or External(head), frame)
            return
        for alias in node.names:
            if alias.name == "*":
                target = self.source.resolve(frame.module, node.module, node.level)
                if target is None:
                    continue
                env = self.module_frame(target).env
                names = env.get("__all__")
                names = names if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names) \
                    else [n for n in env if not n.startswith("_")]
                for name in names:
                    self.bind(name, env.get(name, Unknown(f"{name} of {target.where}'s __all__ is not bound")), frame)
            else:
                self.bind(alias.asname or alias.name,
                          self._imported(frame.module, node.module, node.level, alias.name), frame)

    # ---- statements ----

    def block(self, statements, frame):
        for statement in statements:
            self.statement(statement, frame)

    def branch(self, statements, frame, condition):
        """`statements` read under `condition` (a test the reading cannot decide): a raise
        there ends that branch alone."""
        saved = frame.condition
        frame.condition = both(saved, condition)
        try:
            self.block(statements, frame)
        except (Raised, Broke, Continued):
            pass
        finally:
            frame.condition = saved

    def statement(self, node, frame):
        self._step()
        if isinstance(node, ast.Expr):
            self.eval(node.value, frame)
        elif isinstance(node, ast.Assign):
            value = self.eval(node.value, frame)
            for target in node.targets:
                self.assign(target, value, frame)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.eval(node.value, frame), frame)
        elif isinstance(node, ast.AugAssign):
            self._aug_assign(node, frame)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node, frame)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.bind(node.name, self._function(node, frame), frame)
        elif isinstance(node, ast.ClassDef):
            self.bind(node.name, PackClass(frame.module, node, frame), frame)
        elif isinstance(node, ast.If):
            self._if(node, frame)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._for(node, frame)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self._try(node, frame)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, Unknown(f"what {text_of(item.context_expr)} gives"), frame)
            self.block(node.body, frame)
        elif isinstance(node, ast.Return):
            raise Returned(self.eval(node.value, frame) if node.value is not None else None)
        elif isinstance(node, ast.Raise):
            raise Raised(node.lineno)
        elif isinstance(node, ast.Break):
            raise Broke()
        elif isinstance(node, ast.Continue):
            raise Continued()
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            frame.globals.update(node.names)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                self._delete(target, frame)
        # while loops, match, assert, pass: nothing the reading needs

    def _function(self, node, frame):
        kinds = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
        kind = next((k for k in ("classmethod", "staticmethod", "property") if k in kinds), None)
        # A method's body sees the module's names, not its class body's.
        defined_in = frame.outer if frame.is_class else frame
        function = PackFunction(frame.module, node, owner=defined_in)
        function.kind = kind
        return function

    def _if(self, node, frame):
        test = self.truth(self.eval(node.test, frame))
        if test is True:
            self.block(node.body, frame)
        elif test is False:
            self.block(node.orelse, frame)
        else:
            self.branch(node.body, frame, f"if {text_of(node.test)}")
            if node.orelse:
                self.branch(node.orelse, frame, f"unless {text_of(node.test)}")

    def _for(self, node, frame):
        items = self.iterable(self.eval(node.iter, frame))
        if items is None:
            self.assign(node.target, Unknown(f"an item of {text_of(node.iter)}"), frame)
            self.branch(node.body, frame, f"for an item of {text_of(node.iter)}")
            return
        for item in items:
            self.assign(node.target, item, frame)
            try:
                self.block(node.body, frame)
            except Broke:
                return
            except Continued:
                continue
        self.block(node.orelse, frame)

    def _try(self, node, frame):
        try:
            self.block(node.body, frame)
        except Raised:
            for handler in node.handlers:
                self.branch(handler.body, frame, None)
        else:
            tried = text_of(node.body[0], 60) if node.body else "its body"
            for handler in node.handlers:
                if handler.name:
                    self.bind(handler.name, Unknown("an exception"), frame)
                self.branch(handler.body, frame, f"if `{tried}` raises")
            self.block(node.orelse, frame)
        self.block(node.finalbody, frame)

    def _aug_assign(self, node, frame):
        current = self.eval(node.target, frame)
        value = self.eval(node.value, frame)
        if isinstance(node.op, ast.BitOr) and isinstance(current, Mapping) and isinstance(value, dict):
            current.merge(value, frame.condition)
        elif isinstance(node.op, ast.Add) and isinstance(current, list) and isinstance(value, (list, tuple)):
            current.extend(value)
        else:
            self.assign(node.target, self.binary(node.op, current, value), frame)

    def _delete(self, target, frame):
        if isinstance(target, ast.Name):
            frame.env.pop(target.id, None)
        elif isinstance(target, ast.Subscript):
            container, key = self.eval(target.value, frame), self.eval(target.slice, frame)
            if isinstance(container, dict) and _hashable(key):
                container.pop(key, None)

    def bind(self, name, value, frame):
        if name in frame.globals:
            frame = frame.module_frame
        if frame.condition and name in frame.env and frame.bound_under.get(name) != frame.condition \
                and frame.env[name] is not value:
            value = Unknown(f"{name} depends on whether {frame.condition.removeprefix('if ')}")
        frame.env[name] = value
        frame.bound_under[name] = frame.condition

    def assign(self, target, value, frame):
        if isinstance(target, ast.Name):
            self.bind(target.id, value, frame)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = list(value) if isinstance(value, (tuple, list)) and len(value) == len(target.elts) else None
            for index, element in enumerate(target.elts):
                self.assign(element, items[index] if items is not None else
                            Unknown(f"a part of {getattr(value, 'reason', 'a value')}"), frame)
        elif isinstance(target, ast.Subscript):
            container, key = self.eval(target.value, frame), self.eval(target.slice, frame)
            if isinstance(container, Mapping) and _hashable(key):
                container.put(key, value, frame.condition)
            elif isinstance(container, dict) and _hashable(key):
                container[key] = value
        elif isinstance(target, ast.Attribute):
            owner = self.eval(target.value, frame)
            if isinstance(owner, Instance):
                owner.attributes[target.attr] = value
            elif isinstance(owner, PackClass):
                self.class_namespace(owner)[target.attr] = value

    # ---- expressions ----

    def eval(self, node, frame):
        self._step()
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            return Unknown(f"{text_of(node)} is not computed by the reading")
        return method(node, frame)

    def _Constant(self, node, frame):
        return node.value

    def _JoinedStr(self, node, frame):
        parts = []
        for value in node.values:
            part = self.eval(value.value, frame) if isinstance(value, ast.FormattedValue) else value.value
            if isinstance(value, ast.FormattedValue) and isinstance(part, (str, int, float)):
                spec = self.eval(value.format_spec, frame) if value.format_spec is not None else ""
                part = format(part, spec) if isinstance(spec, str) else spec
            if not isinstance(part, str):
                return Unknown(f"the string {text_of(node)}")
            parts.append(part)
        return "".join(parts)

    def _elements(self, nodes, frame):
        items = []
        for element in nodes:
            if isinstance(element, ast.Starred):
                inner = self.iterable(self.eval(element.value, frame))
                if inner is None:
                    return Unknown(f"the items of {text_of(element.value)}")
                items.extend(inner)
            else:
                items.append(self.eval(element, frame))
        return items

    def _Tuple(self, node, frame):
        items = self._elements(node.elts, frame)
        return tuple(items) if isinstance(items, list) else items

    def _List(self, node, frame):
        items = self._elements(node.elts, frame)
        return Items(items) if isinstance(items, list) else items

    def _Set(self, node, frame):
        return self._Tuple(node, frame)

    def _Dict(self, node, frame):
        result = Mapping()
        for key, value in zip(node.keys, node.values):
            if key is None:
                merged = self.eval(value, frame)
                if not isinstance(merged, dict):
                    return Unknown(f"the items of {text_of(value)} (**)")
                result.merge(merged, None)
                continue
            key_value = self.eval(key, frame)
            if not _hashable(key_value):
                return Unknown(f"the key {text_of(key)}")
            result[key_value] = self.eval(value, frame)
        return result

    def _Name(self, node, frame):
        return self.lookup(node.id, frame)

    def lookup(self, name, frame):
        scope = frame
        while scope is not None:
            if name in scope.env:
                return scope.env[name]
            scope = scope.outer
        if name in _BUILTINS:
            return Builtin(name)
        return Unknown(f"{name} is bound where the reading cannot see")

    def _Attribute(self, node, frame):
        return self.attribute(self.eval(node.value, frame), node.attr)

    def attribute(self, value, name):
        if isinstance(value, ExternalCall):  # comfy_api's io.Custom("X").Input: the call kept
            found = External(f"{value.path}().{name}")
            found.of_call = value
            return found
        if isinstance(value, Unknown):
            return value
        if isinstance(value, External):
            return External(f"{value.path}.{name}")
        if isinstance(value, PackClass):
            return self.class_attribute(value, name, bound=value)
        if isinstance(value, Instance):
            if name in value.attributes:
                return value.attributes[name]
            return self.class_attribute(value.cls, name, bound=value)
        if hasattr(value, "is_package"):  # a module of the pack
            env = self.module_frame(value).env
            if name in env:
                return env[name]
            sub = self.source.modules.get(f"{value.name}.{name}" if value.name else name)
            return sub if sub is not None else Unknown(f"{name} is not bound in {value.where}")
        if isinstance(value, PackFunction) and name == "__name__":
            return value.name
        if isinstance(value, (str, dict, list, tuple)) and hasattr(value, name) and not name.startswith("_"):
            return BoundMethod(value, name)
        return Unknown(f"the attribute {name} of {type(value).__name__}")

    def class_namespace(self, cls):
        if cls.namespace is None:
            frame = Frame(cls.module, outer=cls.frame, is_class=True)
            cls.namespace = frame.env
            frame.env["__name__"] = cls.name
            try:
                self.block(cls.node.body, frame)
            except (Raised, Returned, Broke, Continued):
                pass
        return cls.namespace

    def bases(self, cls):
        if cls.bases is None:
            cls.bases = [self.eval(base, cls.frame) for base in cls.node.bases]
        return cls.bases

    def class_attribute(self, cls, name, bound, seen=()):
        if name in ("__name__", "__qualname__"):
            return cls.name
        namespace = self.class_namespace(cls)
        if name in namespace:
            found = namespace[name]
            if isinstance(found, PackFunction):
                kind = getattr(found, "kind", None)
                if kind == "classmethod":
                    receiver = bound.cls if isinstance(bound, Instance) else bound
                elif kind is None and isinstance(bound, Instance):
                    receiver = bound
                else:
                    receiver = None  # a static method, or a plain function read off its class
                method = PackFunction(found.module, found.node, bound=receiver, owner=found.owner)
                method.kind = kind
                method.cls = cls
                return method
            return found
        for base in self.bases(cls):
            if isinstance(base, PackClass) and base not in seen:
                found = self.class_attribute(base, name, bound, seen + (cls,))
                if not (isinstance(found, Unknown) and found.reason.startswith("not set")):
                    return found
            elif isinstance(base, (External, Unknown)):
                return Unknown(f"{cls.name}.{name} may come from its base {base}")
        return Unknown(f"not set: {cls.name} has no {name}")

    def _Subscript(self, node, frame):
        value, key = self.eval(node.value, frame), self.eval(node.slice, frame)
        if isinstance(value, Unknown):
            return value
        if isinstance(value, (dict, list, tuple, str)) and (_hashable(key) or isinstance(key, slice)):
            try:
                return value[key]
            except (KeyError, IndexError, TypeError):
                return Unknown(f"{text_of(node)} is not there")
        return Unknown(f"{text_of(node)}")

    def _Slice(self, node, frame):
        parts = [self.eval(p, frame) if p is not None else None for p in (node.lower, node.upper, node.step)]
        return slice(*parts) if all(p is None or isinstance(p, int) for p in parts) else Unknown("a slice")

    def _Await(self, node, frame):
        return self.eval(node.value, frame)

    def _Lambda(self, node, frame):
        return PackFunction(frame.module, node, owner=frame.outer if frame.is_class else frame)

    def _IfExp(self, node, frame):
        test = self.truth(self.eval(node.test, frame))
        if test is None:
            return Unknown(f"{text_of(node)}")
        return self.eval(node.body if test else node.orelse, frame)

    def _BoolOp(self, node, frame):
        result = None
        for operand in node.values:
            result = self.eval(operand, frame)
            truth = self.truth(result)
            if truth is None:
                return Unknown(f"{text_of(node)}")
            if truth is isinstance(node.op, ast.Or):
                return result
        return result

    def _UnaryOp(self, node, frame):
        value = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            truth = self.truth(value)
            return Unknown(f"{text_of(node)}") if truth is None else not truth
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
        return Unknown(f"{text_of(node)}")

    def _BinOp(self, node, frame):
        return self.binary(node.op, self.eval(node.left, frame), self.eval(node.right, frame))

    def binary(self, op, left, right):
        if isinstance(op, ast.Add) and (isinstance(left, list) or isinstance(right, list)) \
                and not (isinstance(left, list) and isinstance(right, list)):
            # A list, whatever the other side's items (a combo's choices, where a socket's type):
            # the known side's items kept where they come first.
            made = Items(left if isinstance(left, list) else [])
            made.uncertain = True
            return made
        function = _BINARY.get(type(op))
        if function is None or not isinstance(left, _PLAIN) or not isinstance(right, _PLAIN):
            return Unknown("an operation on values the reading does not compute")
        try:
            result = function(left, right)
        except Exception:  # noqa: BLE001 (what the import would raise there)
            return Unknown("an operation that raises")
        if isinstance(result, (str, list, tuple)) and len(result) > MAX_ITEMS * 10:
            return Unknown("a value too large to read")
        if isinstance(result, dict) and not isinstance(result, Mapping):
            result = Mapping(result)
        return result

    def _Compare(self, node, frame):
        left = self.eval(node.left, frame)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, frame)
            if isinstance(op, (ast.Is, ast.IsNot)) and (left is None or right is None):
                other = right if left is None else left
                if isinstance(other, Unknown):
                    return other
                same = other is None
                result = same if isinstance(op, ast.Is) else not same
            elif type(op) in _COMPARE and isinstance(left, _PLAIN) and isinstance(right, _PLAIN):
                try:
                    result = _COMPARE[type(op)](left, right)
                except TypeError:
                    return Unknown(f"{text_of(node)}")
            else:
                return Unknown(f"{text_of(node)}")
            if not result:
                return False
            left = right
        return True

    def truth(self, value):
        """True, False, or None where the reading cannot tell."""
        if isinstance(value, Unknown) or (isinstance(value, Items) and value.uncertain):
            return None
        if isinstance(value, Mapping) and value and all(key in value.conditions for key in value):
            return None
        if isinstance(value, _PLAIN):
            return bool(value)
        return True  # a class, a function, a module, an external name

    def iterable(self, value):
        """The items of `value` as a list, or None where they are not known."""
        if isinstance(value, dict):
            value = list(value)
        if isinstance(value, (list, tuple, str)) and len(value) <= MAX_ITEMS:
            return list(value)
        return None

    def _comprehension(self, node, frame, make):
        inner = Frame(frame.module, outer=frame)
        results = []

        def walk(generators):
            if not generators:
                results.append(make(inner))
                return True
            first = generators[0]
            items = self.iterable(self.eval(first.iter, inner))
            if items is None:
                return False
            for item in items:
                self.assign(first.target, item, inner)
                tests = [self.truth(self.eval(test, inner)) for test in first.ifs]
                if any(test is None for test in tests):
                    return False
                if all(tests) and not walk(generators[1:]):
                    return False
            return True

        if not walk(node.generators):
            return None
        return results

    def _ListComp(self, node, frame):
        items = self._comprehension(node, frame, lambda inner: self.eval(node.elt, inner))
        if items is None:
            items = Items()  # a list, whatever its items: a combo's choices, where a socket's type
            items.uncertain = True
        return items

    def _GeneratorExp(self, node, frame):
        items = self._comprehension(node, frame, lambda inner: self.eval(node.elt, inner))
        return items if items is not None else Unknown(f"{text_of(node)}")

    _SetComp = _GeneratorExp

    def _DictComp(self, node, frame):
        pairs = self._comprehension(node, frame, lambda inner: (self.eval(node.key, inner),
                                                               self.eval(node.value, inner)))
        if pairs is None or not all(_hashable(key) for key, _ in pairs):
            return Unknown(f"{text_of(node)}")
        return Mapping(pairs)

    def _Call(self, node, frame):
        function = self.eval(node.func, frame)
        args = self._elements(node.args, frame)
        if isinstance(args, Unknown):
            return args
        kwargs = {}
        for keyword in node.keywords:
            value = self.eval(keyword.value, frame)
            if keyword.arg is None:
                if not isinstance(value, dict):
                    return Unknown(f"the arguments of {text_of(node)}")
                kwargs.update(value)
            else:
                kwargs[keyword.arg] = value
        return call(self, function, args, kwargs, frame)


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return not isinstance(value, Unknown)


