"""Findings about the whole pack, from its source: what makes it stay in ComfyUI's own
process, and what is only worth a note.

Keep in ComfyUI's process (docs/PACKS.md, "A pack's HTTP routes"): a route that opens a
websocket (isolated, it is refused with 501), or answers chunked (it fails, a 500).

Notes: a streamed answer (sent whole, at its end); a change to ComfyUI's modules (an
assignment to an attribute of comfy.*, nodes, execution, server, folder_paths...), which
isolated holds in the pack's worker alone. That does not keep a pack out of a worker: what
of ComfyUI runs there sees it, a sampling of a MODEL the pack patched included (AutomaticCFG
replaces comfy.samplers.sampling_function when its node runs, and runs isolated bit-equal
to one process: scripts/comfyui-check step 28); ComfyUI's own process does not, so a patch
meant to change the host's own nodes changes nothing there.
"""

import ast
import sys

from .source import COMFYUI_MODULES
from .values import External

_KEEP_CALLS = {
    "WebSocketResponse": "opens a websocket (web.WebSocketResponse): isolated, its route is refused with 501",
    "enable_chunked_encoding": "answers chunked (enable_chunked_encoding): isolated, its route fails (a 500)",
}
_NOTE_CALLS = {"StreamResponse": "answers a streamed response (web.StreamResponse): isolated, it is sent whole, "
                                 "at its end"}
MAX_PATCH_NOTES = 8


def _called_name(node):
    function = node.func
    return function.attr if isinstance(function, ast.Attribute) else function.id \
        if isinstance(function, ast.Name) else None


def _path_of(node, env):
    """The dotted path of ComfyUI's module attribute `node` names (`comfy.samplers.x`), or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    root = env.get(node.id)
    if not isinstance(root, External) or root.path.split(".")[0] not in COMFYUI_MODULES:
        return None
    return ".".join([root.path] + parts[::-1])


class _Walker(ast.NodeVisitor):
    def __init__(self, module, env):
        self.module, self.env = module, env
        self.function = None
        self.keep, self.notes, self.patches = [], [], []

    def visit_FunctionDef(self, node):
        outer, self.function = self.function, self.function or node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def _patch(self, path, node):
        when = f"when {self.function}() runs" if self.function else "at import"
        self.patches.append(f"{self.module.where}:{node.lineno}: sets {path} {when}")

    def visit_Assign(self, node):
        for target in node.targets:
            if isinstance(target, ast.Attribute):
                path = _path_of(target, self.env)
                if path is not None:
                    self._patch(path, node)
        self.generic_visit(node)

    def visit_Call(self, node):
        name = _called_name(node)
        where = f"{self.module.where}:{node.lineno}"
        if name in _KEEP_CALLS:
            self.keep.append(f"{where}: {_KEEP_CALLS[name]}")
        elif name in _NOTE_CALLS:
            self.notes.append(f"{where}: {_NOTE_CALLS[name]}")
        elif name == "setattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            path = _path_of(node.args[0], self.env) if isinstance(node.args[0], (ast.Name, ast.Attribute)) else None
            if path is not None:
                self._patch(f"{path}.{node.args[1].value}", node)
        self.generic_visit(node)


def _outside(source, module, tree):
    """The top-level modules `tree` imports that are neither the pack's, ComfyUI's nor Python's."""
    found = set()
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
        for name in names:
            head = name.split(".")[0]
            if head not in sys.stdlib_module_names and head not in COMFYUI_MODULES and head != "__future__" \
                    and source.resolve(module, head, 0) is None and head != source.name:
                found.add(head)
    return found


def pack_findings(interpreter, source):
    """(keep_in_host, notes): one line each."""
    keep, notes, patches, outside = [], [], [], set()
    for module in source.modules.values():
        tree = source.tree(module)
        if tree is None:
            continue
        outside |= _outside(source, module, tree)
        walker = _Walker(module, interpreter.module_frame(module).env)
        walker.visit(tree)
        keep += walker.keep
        notes += walker.notes
        patches += walker.patches
    if outside:
        notes.append(f"imports modules of neither the pack, ComfyUI nor Python: {', '.join(sorted(outside))}; the "
                     "pack's environment (built over ComfyUI's) must have them")
    if patches:
        shown = patches[:MAX_PATCH_NOTES]
        more = f" (and {len(patches) - len(shown)} more)" if len(patches) > len(shown) else ""
        notes.append(f"changes ComfyUI's modules: {'; '.join(shown)}{more}. Isolated, each change holds in the "
                     "pack's worker alone: what of ComfyUI runs there sees it (a sampling of a MODEL the pack "
                     "patched), ComfyUI's own process does not")
    return keep, notes
