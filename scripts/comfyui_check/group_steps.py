"""comfyui-check's step over a pack group (docs/PACKS.md, "Pack groups"): tests/packs/group_maker
and tests/packs/group_taker, two packs that share a type, run isolated as one group, pack
"group", one config entry whose "pack" lists both folders:

18. A prompt MakeSharedThing -> ReadSharedThing runs: group_maker's node makes a
   SHARED_THING, an object of a class of its own, and group_taker's node, an output node,
   shows what its method says and whether it is an instance of group_maker's class: the
   object must reach it as it is ("SHARED!", True), which only one worker for both can do.
   And /object_info gives each node its own pack's python_module, and /extensions lists
   each pack's front-end file under its own folder's name.
"""

import json
import pathlib

PACKS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "packs"
GROUP = [PACKS / "group_maker", PACKS / "group_taker"]
GROUP_STEP = 18


class GroupSteps:
    def __init__(self, check):
        self.check = check

    def run(self):
        title = "a pack group: an object one pack's node makes is another pack's node's input, as in one process"
        status, raw = self.check.http("GET", "/object_info", timeout=60)
        info = json.loads(raw) if status == 200 else {}
        modules = {name: info.get(name, {}).get("python_module") for name in ("MakeSharedThing", "ReadSharedThing")}
        if None in modules.values():
            self.check.step(GROUP_STEP, title, False, f"GET /object_info answered {status} without the group's "
                                                      f"nodes: {modules}")
            return
        prompt = {"make": {"class_type": "MakeSharedThing", "inputs": {"text": "shared"}},
                  "read": {"class_type": "ReadSharedThing", "inputs": {"thing": ["make", 0]}}}
        _, entry, failure = self.check.run_prompt(prompt)
        if entry is None:
            self.check.step(GROUP_STEP, title, False, failure)
            return
        shown = entry.get("outputs", {}).get("read", {})
        status, raw = self.check.http("GET", "/extensions")
        listed = json.loads(raw) if status == 200 else []
        scripts = ["/extensions/group_maker/maker.js", "/extensions/group_taker/taker.js"]
        workers = [w for w in self.check.workers() if w.get("name") == "group"]
        ok = (shown == {"text": ["SHARED!"], "own": [True]} and len(workers) == 1 and
              modules == {"MakeSharedThing": "custom_nodes.group_maker",
                          "ReadSharedThing": "custom_nodes.group_taker"} and
              all(script in listed for script in scripts))
        where = f"pack group's worker pid {workers[0]['pid']}" if workers else "no group worker listed"
        self.check.step(GROUP_STEP, title, ok,
                        f"MakeSharedThing -> ReadSharedThing ({where}) showed {shown}; python_module {modules}; "
                        f"/extensions lists {[script for script in scripts if script in listed]}")
