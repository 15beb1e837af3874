"""docs/ARCHITECTURE.md draws the map a newcomer reads first: every folder of supervisor/
and every subpackage of the Python package must have its line there, named as
`supervisor/PATH/` or `comfy_supervisor.NAME`. A room added without its line fails here.

    architecture_map_check.py PROJECT_ROOT"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "host"))
from check_report import CheckReport  # noqa: E402


def supervisor_folders(root):
    base = os.path.join(root, "supervisor")
    for folder, subfolders, _ in os.walk(base):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith((".", "__")))
        if folder != base:
            yield "supervisor/" + os.path.relpath(folder, base) + "/"


def python_subpackages(root):
    base = os.path.join(root, "worker", "python", "comfy_supervisor")
    for folder, subfolders, files in os.walk(base):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith((".", "__")))
        if folder != base and "__init__.py" in files:
            yield "comfy_supervisor." + os.path.relpath(folder, base).replace(os.sep, ".")


def main():
    root = sys.argv[1]
    with open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8") as page:
        text = page.read()
    report = CheckReport("architecture map")
    names = list(supervisor_folders(root)) + list(python_subpackages(root))
    report.check(len(names) > 0, f"the tree has folders to look for ({len(names)})")
    for name in names:
        report.check(f"`{name}`" in text, f"docs/ARCHITECTURE.md names `{name}`")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
