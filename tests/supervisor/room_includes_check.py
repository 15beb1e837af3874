"""The rooms of supervisor/ use one another only as their CMake libraries say: a file of a
room may include the headers of its own room and of the rooms its library links (and those
link, since the links are public), and no room includes supervisor.hpp, the class that
wires them. The links are read from each room's CMakeLists.txt, so they are said once.

    room_includes_check.py PROJECT_ROOT"""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
from check_report import CheckReport  # noqa: E402

LIBRARY = re.compile(r"add_library\((\w+)")
LINKS = re.compile(r"target_link_libraries\((\w+)([^)]*)\)", re.S)
INCLUDE = re.compile(r'^#include "supervisor/([\w/]+)/[\w.]+"', re.M)


def rooms(root):
    """Each room's folder (relative to supervisor/), its library, and what that links."""
    base = os.path.join(root, "supervisor")
    found = {}
    for folder, _, files in os.walk(base):
        if "CMakeLists.txt" not in files or folder == base:
            continue
        with open(os.path.join(folder, "CMakeLists.txt"), encoding="utf-8") as cmake:
            text = cmake.read()
        libraries = LIBRARY.findall(text)
        links = {name: set(args.split()) for name, args in LINKS.findall(text)}
        for library in libraries:
            found[library] = (os.path.relpath(folder, base), links.get(library, set()))
    return found


def reachable(library, found):
    seen, todo = set(), [library]
    while todo:
        current = todo.pop()
        if current in seen or current not in found:
            continue
        seen.add(current)
        todo.extend(found[current][1])
    return {found[name][0] for name in seen}


def room_of(path, folders):
    """The deepest room folder holding `path` (ops/log before ops)."""
    best = None
    for folder in folders:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def main():
    root = sys.argv[1]
    found = rooms(root)
    report = CheckReport("room includes")
    report.check(len(found) >= 8, f"every room has its library ({', '.join(sorted(found))})")
    folders = {folder for folder, _ in found.values()}
    allowed = {folder: reachable(library, found) for library, (folder, _) in found.items()}
    for library, (folder, _) in sorted(found.items(), key=lambda item: item[1][0]):
        problems = []
        for directory, _, files in os.walk(os.path.join(root, "supervisor", folder)):
            here = room_of(os.path.relpath(directory, os.path.join(root, "supervisor")), folders)
            if here != folder:
                continue  # a nested room is checked as itself
            for name in sorted(files):
                if not name.endswith((".cpp", ".hpp", ".in")):
                    continue
                with open(os.path.join(directory, name), encoding="utf-8") as source:
                    text = source.read()
                if '#include "supervisor/supervisor.hpp"' in text:
                    problems.append(f"{name} includes supervisor.hpp")
                for included in INCLUDE.findall(text):
                    used = room_of(included, folders)
                    if used is not None and used not in allowed[folder]:
                        problems.append(f"{name} includes supervisor/{included}/, which {library} does not link")
        report.check(not problems, f"supervisor/{folder}/ uses only what {library} links"
                     + ("".join(f"\n    {problem}" for problem in problems)))
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
