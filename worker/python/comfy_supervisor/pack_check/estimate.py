"""The estimate of a pack: for each node class it registers, whether it can cross (run
isolated with what it takes and makes crossing between ComfyUI and the worker) and why;
the pack's own types its nodes make and take (a type one pack makes and another takes
means the two must run as one group); findings about the whole pack.

An estimate, from reading the source: the pack is never imported or run. What the reading
cannot compute is "unknown", with why; never a guess given as a fact."""

import dataclasses
import os

from . import crossing_types, findings, mappings, uses
from .frames import TooLarge
from .interpreter import Interpreter
from .source import PackSource

JSON_VERSION = 1
CROSSES, DOES_NOT_CROSS, UNKNOWN = "crosses", "does not cross", "unknown"


@dataclasses.dataclass
class NodeEstimate:
    name: str
    class_name: str
    inputs: dict
    outputs: list
    verdict: str
    reasons: list


@dataclasses.dataclass
class PackEstimate:
    pack: str
    nodes: list
    types_made: list
    types_taken: list
    keep_in_host: list
    notes: list
    errors: list
    # Classes registered only under a condition the reading cannot decide (a config value,
    # an optional import): each its NodeEstimate, its first reason that condition.
    maybe_nodes: list = dataclasses.field(default_factory=list)

    def to_json(self):
        data = dataclasses.asdict(self)
        data["version"] = JSON_VERSION
        data["estimate"] = "read from the pack's source, which was not imported or run"
        return data


# How what a pack's node makes reaches ComfyUI, where that differs from how ComfyUI's arrives.
_OUTPUT_WORDS = {"replica": "ComfyUI's nodes get them as remote objects (the host's own again where the host "
                            "handed them over)",
                 "remote": "ComfyUI's nodes get them as remote objects, used as in one process"}


def _node(entry, made, taken):
    interface = entry.interface
    class_name = getattr(entry.cls, "name", "?")
    in_types = {name: crossing_types.classify(value) for name, value in interface.inputs.items()}
    out_types = [crossing_types.classify(value) for value in interface.outputs]
    refused = list(interface.refused)
    unknown = list(interface.unknown)
    notable = {}  # (side, how) -> the types, for one line each
    for side, crossings in (("takes", in_types.items()), ("makes", enumerate(out_types))):
        for name, crossing in crossings:
            label = f"{crossing.type}" + (f" ({name})" if side == "takes" else "")
            if crossing.how == "no kind":
                refused.append(f"{side} {label}: {crossing.words}, so "
                               + ("one from ComfyUI's nodes cannot cross into the worker" if side == "takes" else
                                  "ComfyUI's nodes given it get a handle, of which they can read nothing"))
            elif crossing.how == "unknown":
                unknown.append(f"{side} {label}: {crossing.words}")
            elif crossing.how != "value":
                words = _OUTPUT_WORDS.get(crossing.how, crossing.words) if side == "makes" else crossing.words
                notable.setdefault((side, words), []).append(crossing.type)
            if crossing.how == "handle":
                (taken if side == "takes" else made).add(crossing.type)
    refused += uses.refusals(interface.function, interface.inputs, in_types)
    if refused:
        verdict, reasons = DOES_NOT_CROSS, refused + unknown
    elif unknown:
        verdict, reasons = UNKNOWN, unknown
    else:
        verdict = CROSSES
        reasons = [f"{side} {', '.join(dict.fromkeys(types))}: {words}" for (side, words), types in notable.items()] \
            or ["its inputs and outputs cross by value"]
    return NodeEstimate(entry.name, class_name, {name: c.type for name, c in in_types.items()},
                        [c.type for c in out_types], verdict, reasons)


def estimate(pack_dir):
    """The PackEstimate of the pack folder `pack_dir`; raises source.NotAPack for a folder
    that is not a pack."""
    source = PackSource(pack_dir)
    interpreter = Interpreter(source)
    nodes, maybe, made, taken, keep, notes = [], [], set(), set(), [], []
    errors = source.errors
    try:
        entries, why_none = mappings.registered(interpreter, source)
        if why_none:
            notes.append(f"no node classes found: {why_none}")
        for entry in entries:
            node = _node(entry, made, taken)
            if entry.condition:
                node.reasons.insert(0, f"registered only {entry.condition} (computed at import)")
                maybe.append(node)
            else:
                nodes.append(node)
        keep, notes_found = findings.pack_findings(interpreter, source)
        notes += notes_found
    except TooLarge as error:
        errors.append(f"{error}: the pack is too large to read whole, and what was not read is left out")
    except RecursionError:
        errors.append("the pack's source nests deeper than the reading follows: what was not read is left out")
    for foreign in sorted(taken - made):
        notes.append(f"takes {foreign}, which none of its nodes makes: another pack's own type, which reaches these "
                     "nodes only with that pack in one group (comfyctl pack add with both folders)")
    for where in interpreter.raised:
        notes.append(f"{where}: its import raises here, whatever the reading assumed: the pack may not import")
    return PackEstimate(os.path.basename(source.folder), nodes, sorted(made), sorted(taken), keep, notes,
                        list(errors), maybe)
