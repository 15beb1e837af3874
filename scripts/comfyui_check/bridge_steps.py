"""comfyui-check's steps over the bridge test pack (tests/packs/bridge_pack, run isolated as
pack "bridge"; also imported into ComfyUI's own process under its own folder name by the
custom node one_process/, its nodes named BRIDGE_ONE_PROCESS + name):

4. A prompt EmptyImage -> InvertImage -> PreviewImage runs, InvertImage being the bridge
   pack's node registered by the custom node as a proxy and run in the pack's worker: the
   preview's pixels must be the inverse of the empty image's colour.
5. The bridge pack's front end and its messages reach the browser through ComfyUI: GET
   /extensions lists the pack's web/bridge.js, which ComfyUI serves from the pack's folder
   though it imported the pack only as its one-process copy, which has no front end (it
   exports no WEB_DIRECTORY); and a prompt with the pack's NotifyBrowser node, queued by a
   client listening on ComfyUI's websocket, brings that client the message the node sent
   through upstream's PromptServer in the worker, naming the node.
14. An isolated node is described and saved as in one process: GET /object_info's entry of
   each bridge pack node proxied by the custom node must equal, key by key, its
   one-process copy's (bridge_pack/, "OneProcessBridge" + name) but for its name: inputs,
   outputs, their names, lists and tooltips, description, category, output_node, and
   python_module, custom_nodes.bridge_pack for both, the pack's, not comfy_supervisor's
   (ExitMidNode, model_pack's too, is left out: the isolated one is the last pack's). And a
   prompt PlainValues -> EmptyImage -> InvertImage -> SaveImage, isolated and in one
   process: upstream's execution saves IS_CHANGED's answer in the prompt as "is_changed",
   and SaveImage the prompt in each PNG; read back from the PNGs, InvertImage (no
   IS_CHANGED in the pack) must have none, as in one process, and PlainValues (its own
   IS_CHANGED) the pack's answer, the same as in one process.
15. Wildcard sockets: the bridge pack's PassAnything, isolated and in one process, takes an
   IMAGE into its "any type" input (a str subclass whose != is always False), an extra
   optional input of a name it does not declare (its optional inputs are rgthree's
   FlexibleOptionalInputType, a dict holding every name) and an IMAGE into its pixels (a
   type equal to IMAGE and MASK only); its any-type output goes into upstream's
   ImageInvert, which takes IMAGE. Upstream's validation (validate_node_input) must
   accept the prompt (no HTTP 400: it saw the wildcard, not a plain "*"), both outputs
   must be bit-equal to one process's, and its INT output, the number of extra inputs
   that came, 2 (shown as an EmptyImage's width).
"""

import io
import json
import pathlib
import urllib.parse

import remote_steps
from support import PROMPT_TIMEOUT_S

BRIDGE_PACK = pathlib.Path(__file__).resolve().parents[2] / "tests" / "packs" / "bridge_pack"
BRIDGE_ONE_PROCESS = "OneProcessBridge"  # the prefix of bridge_pack's nodes in one process
NODE_INFO_STEP = 14
WILDCARD_STEP = 15


class BridgeSteps:
    def __init__(self, check):
        self.check = check

    def run_node_and_front_end(self):
        """Steps 4 and 5."""
        self.step_invert()
        self.step_front_end()

    def run_node_info_and_wildcards(self):
        """Steps 14 and 15."""
        self.step_node_info()
        self.step_wildcard()

    def step_invert(self):
        title = "a prompt runs a node of a pack in its own worker, the image crossing both ways"
        proxy = self.check.http("GET", "/object_info/InvertImage", timeout=10)
        if proxy[0] != 200 or "InvertImage" not in json.loads(proxy[1] or b"{}"):
            self.check.step(4, title, False, f"ComfyUI has no InvertImage node (GET /object_info/InvertImage answered "
                                       f"{proxy[0]}); the bridge pack's proxies were not registered")
            return
        color = 0x204060
        prompt = {"1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 32, "batch_size": 1, "color": color}},
                  "2": {"class_type": "InvertImage", "inputs": {"image": ["1", 0]}},
                  "3": {"class_type": "PreviewImage", "inputs": {"images": ["2", 0]}}}
        _, entry, failure = self.check.run_prompt(prompt)
        if entry is None:
            self.check.step(4, title, False, failure)
            return
        images = entry.get("outputs", {}).get("3", {}).get("images", [])
        if not images:
            self.check.step(4, title, False, "the prompt ran, but PreviewImage saved no image")
            return
        image = images[0]
        status, raw = self.check.http("GET", "/view?" + urllib.parse.urlencode(
            {"filename": image["filename"], "subfolder": image.get("subfolder", ""), "type": image.get("type", "temp")}))
        from PIL import Image
        pixels = set(Image.open(io.BytesIO(raw)).convert("RGB").getdata()) if status == 200 else set()
        inverted = (255 - (color >> 16 & 0xFF), 255 - (color >> 8 & 0xFF), 255 - (color & 0xFF))
        worker = [w for w in self.check.workers() if w.get("name") == "bridge"]
        where = f"pack bridge's worker pid {worker[0]['pid']}" if worker else "no bridge worker listed"
        ok = pixels == {inverted}
        self.check.step(4, title, ok, f"EmptyImage #{color:06x} -> InvertImage ({where}) -> PreviewImage: the image's pixels "
                                f"are {sorted(pixels)[:3]} (expected {inverted})")

    def step_front_end(self):
        title = "a pack's front end and its messages reach the browser through ComfyUI"
        status, raw = self.check.http("GET", "/extensions")
        listed = json.loads(raw) if status == 200 else []
        script = "/extensions/bridge_pack/bridge.js"
        served = self.check.http("GET", script) if script in listed else (None, b"")
        if served[0] != 200 or b"bridge_pack" not in served[1]:
            self.check.step(5, title, False, f"GET /extensions answered {status} with {listed[:5]}; {script} "
                                       f"{'answered ' + str(served[0]) if served[0] else 'is not listed'}")
            return
        prompt = {"1": {"class_type": "NotifyBrowser", "inputs": {"text": "from the worker"}}}
        messages, failure = self.prompt_seen_by_browser(prompt, "comfyui-check-browser")
        notes = [m["data"] for m in messages if m.get("type") == "bridge.notify"]
        ok = failure is None and notes == [{"text": "from the worker", "node": "1"}]
        self.check.step(5, title, ok, f"{script} served ({len(served[1])} bytes); the browser got "
                                f"{notes if notes else 'no bridge.notify message'}"
                                f"{'; ' + failure if failure else ''}")

    def prompt_seen_by_browser(self, prompt, client_id):
        """Queues `prompt` as a browser would, listening on ComfyUI's websocket: the JSON
        messages it got until the prompt ended, and None, or why it did not end."""
        import asyncio
        import aiohttp

        async def listen():
            messages = []
            async with aiohttp.ClientSession() as http:
                async with http.ws_connect(f"http://127.0.0.1:{self.check.port}/ws?clientId={client_id}") as ws:
                    async with http.post(f"http://127.0.0.1:{self.check.port}/prompt",
                                         json={"prompt": prompt, "client_id": client_id}) as response:
                        if response.status != 200:
                            return messages, f"POST /prompt answered {response.status}"
                        prompt_id = (await response.json())["prompt_id"]
                    async for frame in ws:
                        if frame.type != aiohttp.WSMsgType.TEXT:
                            continue
                        message = json.loads(frame.data)
                        messages.append(message)
                        data = message.get("data") or {}
                        if data.get("prompt_id") == prompt_id and message.get("type") in (
                                "execution_success", "execution_error", "execution_interrupted"):
                            return messages, None if message["type"] == "execution_success" else message["type"]
            return messages, "the websocket closed"

        try:
            return asyncio.run(asyncio.wait_for(listen(), PROMPT_TIMEOUT_S))
        except (asyncio.TimeoutError, aiohttp.ClientError, OSError) as error:
            return [], f"{type(error).__name__}: {error}"

    def step_node_info(self):
        title = ("an isolated node's /object_info entry and the prompt saved with its image equal one process's "
                 "(python_module, tooltips, no is_changed)")
        status, raw = self.check.http("GET", "/object_info", timeout=60)
        info = json.loads(raw) if status == 200 else {}
        # Each bridge pack node and its one-process copy. ExitMidNode is model_pack's too: the
        # isolated ExitMidNode is the pack registered last's, so it is left out.
        names = sorted(name[len(BRIDGE_ONE_PROCESS):] for name in info if name.startswith(BRIDGE_ONE_PROCESS))
        names = [name for name in names if name in info and "OneProcess" + name not in info]
        missing = [name for name in ("InvertImage", "PlainValues") if name not in names]
        if missing:
            self.check.step(NODE_INFO_STEP, title, False, f"GET /object_info answered {status} without "
                                                    f"{' and '.join(missing)} isolated and in one process")
            return
        seen, ok = [], True
        for name in names:
            isolated, one = info[name], info[BRIDGE_ONE_PROCESS + name]
            # The name is the one key that differs: the copy lives beside the proxy in one ComfyUI.
            differ = [key for key in sorted((set(isolated) | set(one)) - {"name"})
                      if isolated.get(key, "(none)") != one.get(key, "(none)")]
            ok = ok and not differ
            seen += [f"{name}'s {key}: {json.dumps(isolated.get(key, '(none)'))[:120]} isolated, "
                     f"{json.dumps(one.get(key, '(none)'))[:120]} in one process" for key in differ]
        # The copy lies in custom_nodes/ under the pack's folder name: upstream's python_module for it is a user's.
        modules = {info[name].get("python_module") for name in names}
        if modules != {"custom_nodes." + BRIDGE_PACK.name}:
            ok = False
            seen.append(f"python_module {sorted(map(str, modules))}, not custom_nodes.{BRIDGE_PACK.name}")
        if ok:
            keys = sorted(set(info["PlainValues"]) - {"name"})
            seen.append(f"/object_info: {len(names)} nodes equal to their one-process copies but for the name "
                        f"({', '.join(keys)}; python_module custom_nodes.{BRIDGE_PACK.name}, PlainValues's "
                        f"output_tooltips {info['PlainValues'].get('output_tooltips')})")
        saved, failure = self.saved_prompts()
        if saved is None:
            self.check.step(NODE_INFO_STEP, title, False, "; ".join(seen + [failure]))
            return
        prompt = saved[0]
        for node in ("values", "empty", "invert", "save"):
            isolated, one = (prompt.get(f"{node}_{side}", {}).get("is_changed", "(none)") for side in ("iso", "one"))
            if isolated != one:
                ok = False
                seen.append(f"the saved prompt's {node}_iso has is_changed {isolated}, {node}_one {one}")
        invert = prompt.get("invert_iso", {}).get("is_changed", "(none)")
        values = prompt.get("values_iso", {}).get("is_changed", "(none)")
        # PlainValues has an IS_CHANGED of its own: its answer is saved, the pack's.
        ok = ok and invert == "(none)" and values != "(none)" and all(other == prompt for other in saved)
        if any(other != prompt for other in saved):
            seen.append("the two PNGs hold different prompts")
        seen.append(f"the prompt saved in the PNGs: InvertImage's is_changed {invert} isolated, "
                    f"{prompt.get('invert_one', {}).get('is_changed', '(none)')} in one process; PlainValues's "
                    f"{values} isolated, {prompt.get('values_one', {}).get('is_changed', '(none)')} in one process")
        self.check.step(NODE_INFO_STEP, title, ok, "; ".join(seen))

    def saved_prompts(self):
        """Runs PlainValues -> EmptyImage -> InvertImage -> SaveImage isolated ("_iso") and in
        one process ("_one") in one prompt: ([the prompt each PNG holds], None), or (None, why)."""
        prompt = {}
        for side, prefix in (("iso", ""), ("one", BRIDGE_ONE_PROCESS)):
            prompt.update({
                f"values_{side}": {"class_type": prefix + "PlainValues",
                                   "inputs": {"count": 63, "scale": 1.0, "text": "", "flag": False}},
                f"empty_{side}": {"class_type": "EmptyImage", "inputs": {"width": [f"values_{side}", 0], "height": 32,
                                                                         "batch_size": 1, "color": 0x204060}},
                f"invert_{side}": {"class_type": prefix + "InvertImage", "inputs": {"image": [f"empty_{side}", 0]}},
                f"save_{side}": {"class_type": "SaveImage", "inputs": {"images": [f"invert_{side}", 0],
                                                                       "filename_prefix": f"comfyui-check-{side}"}}})
        _, entry, failure = self.check.run_prompt(prompt)
        if entry is None:
            return None, failure
        from PIL import Image
        saved = []
        for side in ("iso", "one"):
            images = entry.get("outputs", {}).get(f"save_{side}", {}).get("images", [])
            if not images:
                return None, f"the prompt ran, but save_{side} saved no image"
            image = images[0]
            status, raw = self.check.http("GET", "/view?" + urllib.parse.urlencode(
                {"filename": image["filename"], "subfolder": image.get("subfolder", ""),
                 "type": image.get("type", "output")}))
            text = Image.open(io.BytesIO(raw)).info.get("prompt") if status == 200 else None
            if text is None:
                return None, f"GET /view of save_{side}'s {image['filename']} answered {status}, without a prompt"
            saved.append(json.loads(text))
        return saved, None

    def step_wildcard(self):
        title = ("wildcard sockets: an IMAGE into an isolated node's any-type input and its any-type output into a "
                 "core node pass ComfyUI's validation, bit-equal to one process")
        # `seed` is none of PassAnything's declared inputs: its optional inputs hold every name. With `pixels`, two
        # extra inputs came, its INT output; an EmptyImage that wide shows it in the digest's shape.
        extra = 2
        prompt = {"noise": remote_steps.node("ComfySupervisorCheckNoise", seed=5, width=64, height=64)}
        for side, prefix, label in (("iso", "", "isolated"), ("one", BRIDGE_ONE_PROCESS, "one_process")):
            prompt.update({
                f"pass_{side}": remote_steps.node(prefix + "PassAnything", value=["noise", 0], seed=9,
                                                  pixels=["noise", 0]),
                f"invert_{side}": remote_steps.node("ImageInvert", image=[f"pass_{side}", 0]),
                f"count_{side}": remote_steps.node("EmptyImage", width=[f"pass_{side}", 1], height=1, batch_size=1,
                                                   color=0),
                label: remote_steps.digest(label, image=(f"invert_{side}", 0)),
                f"count_{label}": remote_steps.digest(f"count {label}", image=(f"count_{side}", 0))})

        def counted(found):
            counts = {side: remote_steps.width_of(found.get(f"count_{side}"), "image")
                      for side in ("isolated", "one_process")}
            return (set(counts.values()) == {extra},
                    f"PassAnything's INT output {counts['isolated']} isolated, {counts['one_process']} in one "
                    f"process ({extra} extra inputs: seed, pixels)")
        steps = remote_steps.RemoteSteps(self.check)
        outcome = steps.compare(WILDCARD_STEP, title, prompt, [("isolated", "one_process"),
                                                               ("count_isolated", "count_one_process")],
                                also=counted, pack="bridge")
        if outcome is not None:
            ok, seen = outcome
            self.check.step(WILDCARD_STEP, title, ok, "POST /prompt accepted the prompt; " + seen)
