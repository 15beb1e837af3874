"""The package comfy_supervisor read with ast, for layering_check.py: which module imports
which (lazy imports inside functions included), what it imports from outside the package,
and what its code writes into upstream ComfyUI. Nothing read is imported or run.

What counts as a write into upstream: binding, deleting or setattr-ing an attribute of
something reached from an upstream module by attribute access (`mm.free_memory = f`,
`execution.PromptExecutor.execute = f`), storing an item into it
(`nodes.EXTENSION_WEB_DIRS[k] = v`), or changing it through a list's, dict's or set's own
methods (`mm.current_loaded_models.remove(x)`). Upstream is reached through the names an
import of one of its modules binds, a local name given one of those
(`current = self.mm.current_loaded_models`), `sys.modules.get("nodes")`, and the names
the package gives upstream's modules (`mm` for comfy.model_management) as parameters and
as attributes of our own objects (`self.mm`), as the package passes them around. What a
call returns or a loop yields is not followed: reading names, not running code.
"""

import ast
import os
import sys
from dataclasses import dataclass

NAME = "comfy_supervisor"
# The top-level modules of a ComfyUI checkout, as the package may import them.
UPSTREAM = {"comfy", "comfy_extras", "comfy_execution", "comfy_api", "comfy_api_nodes", "comfy_config", "app",
            "api_server", "utils", "execution", "server", "nodes", "folder_paths", "latent_preview", "node_helpers",
            "main", "cuda_malloc", "protocol", "middleware", "comfyui_version", "new_updater", "hook_breaker_ac10a0"}
# ComfyUI's own dependencies, which the package uses only where ComfyUI runs.
UPSTREAM_DEPENDENCIES = {"torch", "numpy", "aiohttp"}
MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "sort",
            "reverse", "add", "discard", "__setitem__", "__delitem__"}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = _FUNCTIONS + (ast.ClassDef,)


@dataclass(frozen=True)
class Import:
    source: str   # the importing module
    path: str     # its file, relative to the package's folder
    line: int
    target: str   # the module of the package it imports

    def __str__(self):
        return f"{self.path}:{self.line} imports {self.target}"


def module_name(path):
    parts = path[:-len(".py")].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([NAME] + parts)


class Package:
    def __init__(self, sources):
        self.sources = sources  # path relative to the package's folder -> source text
        self.trees = {path: ast.parse(text, path) for path, text in sources.items()}
        self.paths = {module_name(path): path for path in sources}
        self.imports = [edge for path in sorted(sources) for edge in self._imports_of(path)]

    @classmethod
    def read(cls, folder):
        sources = {}
        for directory, subfolders, files in os.walk(folder):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            for file in sorted(f for f in files if f.endswith(".py")):
                with open(os.path.join(directory, file), encoding="utf-8") as text:
                    sources[os.path.relpath(os.path.join(directory, file), folder)] = text.read()
        return cls(sources)

    def with_source(self, path, text):
        return Package({**self.sources, path: text})

    def has(self, path):
        return path in self.sources

    def source(self, path):
        return self.sources[path]

    @staticmethod
    def room(module):
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else ""

    def rooms(self):
        return {path.split("/")[0] for path in self.sources if path.count("/") == 1 and path.endswith("/__init__.py")}

    def outside_rooms(self, rooms):
        return sorted(path for module, path in self.paths.items() if module != NAME and self.room(module) not in rooms)

    def docstring(self, module):
        return ast.get_docstring(self.trees[self.paths[module]]) or ""

    def closure(self, room):
        """The modules of `room`, everything they import of the package, and the packages
        on the way (importing a.b.c runs a/__init__ and a/b/__init__)."""
        todo = [module for module in self.paths if self.room(module) == room]
        seen = set()
        while todo:
            module = todo.pop()
            if module in seen or module not in self.paths:
                continue
            seen.add(module)
            parts = module.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))]
            todo += [edge.target for edge in self.imports if edge.source == module]
        return seen

    # ---- imports ----

    def _resolve(self, parts):
        """The longest prefix of `parts` that is a module of the package."""
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in self.paths:
                return ".".join(parts[:end])
        return NAME

    def _imports_of(self, path):
        source = module_name(path)
        package = source.split(".") if path.endswith("__init__.py") else source.split(".")[:-1]
        for node in ast.walk(self.trees[path]):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name.split(".") for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                base = base + (node.module.split(".") if node.module else [])
                targets = [base + [alias.name] for alias in node.names]
            elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module", "__import__") \
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                targets = [node.args[0].value.split(".")]
            for parts in targets:
                if parts and parts[0] == NAME:
                    yield Import(source, path, node.lineno, self._resolve(parts))

    def external_imports(self, tools=None):
        """(where, name, why wrong) of each import from outside the package that breaks the
        rule: the standard library only at module level; inside functions, besides it,
        upstream ComfyUI and its dependencies only, or in a room of `tools` (room: names),
        which runs as a tool beside ComfyUI, only the names it lists."""
        stdlib = set(sys.stdlib_module_names)
        tools = tools or {}
        wrong = []
        for path, tree in sorted(self.trees.items()):
            tool = tools.get(path.split("/")[0]) if "/" in path else None
            allowed = UPSTREAM | UPSTREAM_DEPENDENCIES if tool is None else tool
            in_function = {id(inner) for node in ast.walk(tree) if isinstance(node, _FUNCTIONS)
                           for inner in ast.walk(node) if inner is not node}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name.split(".")[0] for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module.split(".")[0]]
                else:
                    continue
                for name in names:
                    if name == NAME or name in stdlib:
                        continue
                    if id(node) not in in_function:
                        wrong.append((f"{path}:{node.lineno}", f"{name} at module level"))
                    elif name not in allowed:
                        wrong.append((f"{path}:{node.lineno}", f"{name}, neither the standard library nor " +
                                      ("ComfyUI's" if tool is None else f"one of {sorted(tool)}")))
        return wrong

    @staticmethod
    def pyproject_packages(path):
        import tomllib
        with open(path, "rb") as text:
            return set(tomllib.load(text)["tool"]["setuptools"]["packages"])


# ---- writes into upstream ----

def host_writes(package, room):
    """(path, function, what is written) -> line, for every write into upstream by the
    modules that `room` runs (Package.closure)."""
    paths = sorted(package.paths[module] for module in package.closure(room))
    aliases = {alias.asname for path in paths for node in ast.walk(package.trees[path])
               if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names
               if alias.asname and _upstream_name(node, alias)}
    attributes = set()  # our objects' attributes that hold upstream's modules (self.mm)
    while True:
        found, held = {}, set()
        for path in paths:
            _Writes(path, aliases, attributes, found, held).scope(package.trees[path], [], set())
        if held <= attributes:
            return found
        attributes |= held


class _Writes:
    def __init__(self, path, aliases, attributes, found, held):
        self.path, self.aliases, self.attributes = path, aliases, attributes
        self.found = found  # (path, function, what is written) -> line
        self.held = held    # attributes of `self` given something of upstream's here

    def scope(self, node, qualname, inherited):
        own = list(_own_nodes(node))
        bound = {name for item in own for name in _bound_names(item)}
        parameters = set()
        if isinstance(node, _FUNCTIONS):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs + \
                [argument for argument in (node.args.vararg, node.args.kwarg) if argument is not None]
            parameters = {argument.arg for argument in arguments}
        tainted = {name for name in inherited if name not in bound | parameters}
        tainted |= parameters & self.aliases
        tainted |= {name for item in own for name in _upstream_bindings(item)}
        grew = True
        while grew:
            before = len(tainted)
            for item in own:
                if isinstance(item, ast.Assign):
                    for target in item.targets:
                        tainted |= set(self._tainted_names(target, item.value, tainted))
            grew = len(tainted) != before
        where = ".".join(qualname) or "<module>"
        for item in own:
            for text, line in self._writes(item, tainted):
                self.found.setdefault((self.path, where, text), line)
        for item in own:
            if isinstance(item, _SCOPES):
                name = getattr(item, "name", "<lambda>")
                self.scope(item, qualname + [name], inherited if isinstance(node, ast.ClassDef) else tainted)

    def _tainted_names(self, target, value, tainted):
        if isinstance(target, ast.Name) and self.tainted(value, tainted):
            yield target.id
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) and \
                len(target.elts) == len(value.elts):
            for inner_target, inner_value in zip(target.elts, value.elts):
                yield from self._tainted_names(inner_target, inner_value, tainted)

    def tainted(self, node, tainted):
        """Whether `node` is something of upstream's, reached by name or attribute."""
        if isinstance(node, ast.Name):
            return node.id in tainted
        if isinstance(node, ast.Attribute):
            return node.attr in self.attributes or self.tainted(node.value, tainted)
        if isinstance(node, ast.Subscript):
            return self.tainted(node.value, tainted) or \
                (ast.unparse(node.value) == "sys.modules" and _names_upstream(node.slice))
        if isinstance(node, ast.Call) and node.args:
            function = ast.unparse(node.func)
            if function == "getattr":
                return self.tainted(node.args[0], tainted)
            if function in ("sys.modules.get", "importlib.import_module"):
                return _names_upstream(node.args[0])
        return False

    def _writes(self, item, tainted):
        targets = []
        if isinstance(item, ast.Assign):
            targets = item.targets
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                        target.value.id == "self" and self.tainted(item.value, tainted):
                    self.held.add(target.attr)
        elif isinstance(item, (ast.AugAssign, ast.AnnAssign)) and getattr(item, "value", None) is not None:
            targets = [item.target]
        elif isinstance(item, ast.Delete):
            targets = item.targets
        for target in _flatten(targets):
            if isinstance(target, ast.Attribute) and self.tainted(target.value, tainted):
                yield ast.unparse(target), item.lineno
            elif isinstance(target, ast.Subscript) and self.tainted(target.value, tainted):
                index = "[:]" if isinstance(target.slice, ast.Slice) else "[...]"
                yield ast.unparse(target.value) + index, item.lineno
        if isinstance(item, ast.Call):
            function = item.func
            if isinstance(function, ast.Name) and function.id in ("setattr", "delattr") and item.args and \
                    self.tainted(item.args[0], tainted):
                yield f"{function.id}({ast.unparse(item.args[0])}, ...)", item.lineno
            elif isinstance(function, ast.Attribute) and function.attr in MUTATORS and \
                    self.tainted(function.value, tainted):
                yield ast.unparse(function), item.lineno


def _own_nodes(scope):
    """The nodes of `scope` outside the scopes nested in it (those themselves included)."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def _flatten(targets):
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            yield from _flatten(target.elts)
        elif isinstance(target, ast.Starred):
            yield from _flatten([target.value])
        else:
            yield target


def _bound_names(node):
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        yield node.id
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield alias.asname or alias.name.split(".")[0]
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name


def _upstream_name(node, alias):
    """Whether `alias` of the import `node` is upstream's."""
    if isinstance(node, ast.Import):
        return alias.name.split(".")[0] in UPSTREAM
    return not node.level and node.module.split(".")[0] in UPSTREAM


def _upstream_bindings(node):
    """The names an import of an upstream module binds."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            if _upstream_name(node, alias):
                plain = alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.name
                yield alias.asname or plain


def _names_upstream(node):
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(".")[0] in UPSTREAM
