"""A pack's source as the reading sees it: its Python files parsed (never imported), each
as the module ComfyUI's import makes of it, and where an import of the pack leads.

ComfyUI imports a pack folder as the package of the folder's name, so `from .nodes import
X` in its __init__.py is the pack's nodes.py. An absolute import resolves to the pack's own
module only where the pack has one of that top-level name and ComfyUI has none (a pack that
puts its folder on sys.path imports its modules so); ComfyUI's own modules are imported
already when a pack is, so `import nodes` is ComfyUI's even beside a pack's nodes.py.
"""

import ast
import os

# The ComfyUI checkout's top-level modules a pack imports: an absolute import of one of
# these names is ComfyUI's, whatever the pack's folder holds.
COMFYUI_MODULES = frozenset(("comfy", "comfy_extras", "comfy_api", "comfy_api_nodes", "comfy_execution",
                             "comfy_config", "nodes", "node_helpers", "execution", "server", "folder_paths",
                             "latent_preview", "main", "utils", "app", "protocol", "cuda_malloc"))
# Folders a pack carries that are not its code.
_SKIPPED_FOLDERS = frozenset(("node_modules", "__pycache__", "web", "js", "docs", "tests", "test", "examples",
                              "example_workflows", "workflows", ".git"))
MAX_FILES = 2000
MAX_FILE_BYTES = 4 << 20


class NotAPack(Exception):
    """The folder is not a custom node pack's; the message is one line."""


class Module:
    """One file of the pack: its module name within the pack ("" for the package itself),
    its path, its tree (None where it did not parse), and its namespace once executed."""

    def __init__(self, name, path, is_package):
        self.name, self.path, self.is_package = name, path, is_package
        self.where = path  # the path shown in findings (the pack's folder name first)
        self.tree = None
        self.frame = None  # the interpreter's frame, once its body was read

    @property
    def package(self):
        """The package a relative import of this module starts from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


class PackSource:
    def __init__(self, folder):
        self.folder = os.path.realpath(folder)
        if not os.path.isfile(os.path.join(self.folder, "__init__.py")):
            raise NotAPack(f"{folder} is not a custom node pack's folder (no __init__.py in it); name the pack's folder")
        self.name = os.path.basename(self.folder)
        self.errors = []
        self.modules = {}
        self._find()

    def _find(self):
        count = 0
        for top, folders, files in os.walk(self.folder):
            folders[:] = sorted(f for f in folders if f not in _SKIPPED_FOLDERS and not f.startswith("."))
            relative = os.path.relpath(top, self.folder)
            parts = [] if relative == "." else relative.split(os.sep)
            for file in sorted(files):
                if not file.endswith(".py"):
                    continue
                count += 1
                if count > MAX_FILES:
                    self.errors.append(f"more than {MAX_FILES} Python files: the rest were not read")
                    return
                stem = file[:-3]
                is_package = stem == "__init__"
                name = ".".join(parts if is_package else parts + [stem])
                module = Module(name, os.path.join(top, file), is_package)
                module.where = self.relative(module.path)
                self.modules[name] = module

    def relative(self, path):
        return os.path.relpath(path, os.path.dirname(self.folder))

    def tree(self, module):
        """The module's parsed tree, or None with an error recorded once."""
        if module.tree is None and module.path is not None:
            path, module.path = module.path, None
            try:
                if os.path.getsize(path) > MAX_FILE_BYTES:
                    raise ValueError(f"larger than {MAX_FILE_BYTES >> 20} MiB")
                with open(path, "rb") as source:
                    module.tree = ast.parse(source.read(), filename=path)
            except SyntaxError as error:
                self.errors.append(f"{self.relative(path)}:{error.lineno}: does not parse: {error.msg}")
            except (OSError, ValueError) as error:
                self.errors.append(f"{self.relative(path)}: cannot be read: {getattr(error, 'strerror', None) or error}")
        return module.tree

    def resolve(self, importer, name, level):
        """The pack's module that `from {'.' * level}{name} import ...` in `importer` names,
        or None where it is not the pack's (ComfyUI's, a library's, or not there)."""
        if level:
            base = importer.package.split(".") if importer.package else []
            if level - 1 > len(base):
                return None
            base = base[:len(base) - (level - 1)]
            target = ".".join(base + ([name] if name else []))
            return self.modules.get(target)
        if not name:
            return None
        head = name.split(".")[0]
        if head == self.name:
            return self.modules.get(name.partition(".")[2])
        if head in COMFYUI_MODULES:
            return None
        return self.modules.get(name)
