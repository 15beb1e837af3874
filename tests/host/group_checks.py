"""The pack groups' checks of bridge_checks.py (tests/python/pack_groups_test.cpp):
tests/packs/group_maker and tests/packs/group_taker, two packs that share a type
(SHARED_THING, an object of group_maker's own class), run as one group "group", or as two
packs "maker" and "taker".

    group        group_maker's SHARED_THING goes into group_taker's node as the object it
                 is: its class's method runs there, and it is an instance of group_maker's
                 class; each node's python_module is its own pack's, and each pack's front
                 end is served under its own folder's name
    group-apart  run as two packs, the SHARED_THING stays in maker's worker: taker's node
                 fails in the one line that says to run the two as one group
"""

import os
import sys

from comfy_supervisor.host import proxy_nodes

_checks = sys.modules["__main__"]  # bridge_checks: node(), expect(), raises(), classes


def expect(condition, why):
    _checks.expect(condition, why)


def check_group():
    (thing,) = _checks.node("MakeSharedThing", "group").make(text="shared")
    expect(isinstance(thing, proxy_nodes.PackObject) and thing.type_name == "SharedThing",
           f"group_maker's SHARED_THING is {thing!r} in the host, not a handle")
    read = _checks.node("ReadSharedThing", "group").read(thing=thing)
    expect(read == {"ui": {"text": ["SHARED!"], "own": [True]}, "result": ("SHARED!", True)},
           f"group_taker's node read {read}, not group_maker's own object")
    modules = {name: cls.RELATIVE_PYTHON_MODULE for name, cls in _checks.classes["group"].items()}
    expect(modules == {"MakeSharedThing": "custom_nodes.group_maker", "ReadSharedThing": "custom_nodes.group_taker"},
           f"the group's nodes' python_module: {modules}")
    import nodes
    for folder, script in (("group_maker", "maker.js"), ("group_taker", "taker.js")):
        served = nodes.EXTENSION_WEB_DIRS.get(folder)
        expect(served is not None and os.path.isfile(os.path.join(served, script)),
               f"{folder}'s front end is served from {served}")


def check_group_apart():
    (thing,) = _checks.node("MakeSharedThing", "maker").make(text="apart")
    error = _checks.raises(lambda: _checks.node("ReadSharedThing", "taker").read(thing=thing), TypeError)
    expect(str(error) == "a SharedThing made by pack maker cannot go to pack taker: connect it only to nodes of pack "
                         "maker, or run the two as one group (list both packs' folders in one entry's \"pack\")",
           f"the crossing failed with {error}")


CHECKS = {"group": check_group, "group-apart": check_group_apart}
