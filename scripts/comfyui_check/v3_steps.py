"""comfyui-check's step over a pack of ComfyUI's newer node API (tests/packs/v3_pack, run
isolated as pack "v3"; its nodes are io.ComfyNode classes given only by comfy_entrypoint):

17. The V3 pack's nodes run isolated as upstream runs them in one process: V3Invert, its
   image from EmptyImage, gives the inverted image to PreviewImage and says in its UI text
   the hidden inputs it got (its UNIQUE_ID, the PROMPT's nodes); V3Echo, async, runs once
   for one text however often the prompt is queued (its fingerprint_inputs answers IS_CHANGED)
   and again for another; V3Count's validate_inputs refuses a negative count: POST /prompt
   answers 400 with its message; V3Choose takes one of two lazy images, and the node behind
   the other (V3Fail, which fails if it runs) is never run; V3Block's block_execution stops
   the PreviewImage after it, and its message is reported as upstream reports a blocker's.
   Its nodes' /object_info entries equal, but for the name, those of the same classes
   imported into ComfyUI's own process (one_process/, their node ids prefixed).
"""

import io
import json
import pathlib
import urllib.parse

import bridge_steps

V3_PACK = pathlib.Path(__file__).resolve().parents[2] / "tests" / "packs" / "v3_pack"
V3_STEP = 17
V3_ONE_PROCESS = "OneProcessV3"  # the prefix of v3_pack's nodes imported into ComfyUI's own process
TITLE = "a pack of ComfyUI's newer node API (comfy_api io.ComfyNode) runs isolated as in one process"


def step_v3(check):
    try:
        seen = _check(check)
    except AssertionError as error:
        check.step(V3_STEP, TITLE, False, str(error))
        return
    check.step(V3_STEP, TITLE, True, seen)


def _expect(condition, why):
    if not condition:
        raise AssertionError(why)


def _as_read(entry, key):
    """An /object_info value as the front end reads it. Upstream writes a comfy_api node's
    entry from its schema, deprecated, experimental and api_node false where an older
    node's (the proxy's) leaves them out: the one difference in form."""
    if key in ("deprecated", "experimental", "api_node"):
        return bool(entry.get(key))
    return entry.get(key) if key in entry else "(none)"


def _check(check):
    status, raw = check.http("GET", "/object_info")
    info = json.loads(raw or b"{}") if status == 200 else {}
    nodes = sorted(name for name in info if V3_ONE_PROCESS + name in info)
    _expect(len(nodes) == 6, f"GET /object_info answered {status} with {nodes} isolated and in one process")
    differ = [f"{name}'s {key}: {json.dumps(info[name].get(key))[:100]} isolated, "
              f"{json.dumps(info[V3_ONE_PROCESS + name].get(key))[:100]} in one process"
              for name in nodes for key in sorted((set(info[name]) | set(info[V3_ONE_PROCESS + name])) - {"name"})
              if _as_read(info[name], key) != _as_read(info[V3_ONE_PROCESS + name], key)]
    _expect(not differ, "/object_info differs from one process: " + "; ".join(differ[:8]))
    _expect(info["V3Invert"].get("display_name") == "Invert (V3)" and
            info["V3Invert"].get("python_module") == "custom_nodes.v3_pack",
            f"V3Invert's /object_info entry: {json.dumps(info['V3Invert'])[:300]}")
    color = 0x204060
    prompt = {"1": {"class_type": "EmptyImage", "inputs": {"width": 16, "height": 8, "batch_size": 1, "color": color}},
              "2": {"class_type": "V3Invert", "inputs": {"image": ["1", 0]}},
              "3": {"class_type": "PreviewImage", "inputs": {"images": ["2", 0]}}}
    _, entry, failure = check.run_prompt(prompt)
    _expect(entry is not None, f"V3Invert's prompt: {failure}")
    hidden = entry["outputs"].get("2", {}).get("text")
    _expect(hidden == ["node 2, prompt of 3 nodes"], f"V3Invert's hidden inputs: {hidden}")
    image = entry["outputs"]["3"]["images"][0]
    status, raw = check.http("GET", "/view?" + urllib.parse.urlencode(
        {"filename": image["filename"], "subfolder": image.get("subfolder", ""), "type": image.get("type", "temp")}))
    from PIL import Image
    pixels = set(Image.open(io.BytesIO(raw)).convert("RGB").getdata()) if status == 200 else set()
    inverted = (255 - (color >> 16 & 0xFF), 255 - (color >> 8 & 0xFF), 255 - (color & 0xFF))
    _expect(pixels == {inverted}, f"V3Invert's image: {sorted(pixels)[:3]}, not {inverted}")
    echoes = []
    for text in ("hello", "hello", "bye"):
        _, entry, failure = check.run_prompt({"1": {"class_type": "V3Echo", "inputs": {"text": text}}})
        _expect(entry is not None, f"V3Echo's prompt: {failure}")
        echoes += entry["outputs"].get("1", {}).get("text", [])
    _expect(echoes == ["hello, run 1", "hello, run 1", "bye, run 2"], f"V3Echo queued three times: {echoes}")
    status, raw = check.http("POST", "/prompt", {"prompt": {"1": {"class_type": "V3Count", "inputs": {"count": -1}}}})
    refused = raw.decode(errors="replace")
    _expect(status == 400 and "count must not be negative, not -1" in refused,
            f"V3Count with -1: {status} {refused[:200]}")
    empty = {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": color}}
    _, entry, failure = check.run_prompt({"1": empty, "2": {"class_type": "V3Fail", "inputs": {}},
                                          "3": {"class_type": "V3Choose", "inputs": {"first": True, "a": ["1", 0],
                                                                                     "b": ["2", 0]}},
                                          "4": {"class_type": "PreviewImage", "inputs": {"images": ["3", 0]}}})
    _expect(entry is not None and entry["outputs"].get("4", {}).get("images"),
            f"V3Choose of lazy inputs (V3Fail's never asked for): {failure}")
    # Upstream reports a blocker's message to the browser (not in the history): listen there.
    messages, failure = bridge_steps.BridgeSteps(check).prompt_seen_by_browser(
        {"1": empty, "2": {"class_type": "V3Block", "inputs": {"image": ["1", 0]}},
         "3": {"class_type": "PreviewImage", "inputs": {"images": ["2", 0]}}}, "comfyui-check-v3")
    errors = [m["data"].get("exception_message") for m in messages if m.get("type") == "execution_error"]
    previewed = [m for m in messages if m.get("type") == "executed" and m["data"].get("node") == "3"]
    _expect(errors == ["Execution Blocked: V3Block blocked the nodes after it"] and not previewed,
            f"V3Block's prompt: {failure}; errors {errors}; PreviewImage {'ran' if previewed else 'did not run'}")
    return (f"lazy inputs asked for as in one process (V3Fail never ran); V3Block's blocker reported; "
            f"/object_info of its {len(nodes)} nodes equal to their one-process copies but for the name; "
            f"V3Invert saw {hidden[0]!r} and inverted #{color:06x}; V3Echo {echoes}; "
            "V3Count -1 refused with 400 and its own message")
