"""`comfyctl pack check`'s output: the estimate as text, headed by the line that says it is
one, or as JSON (PackEstimate.to_json)."""

import json

from .estimate import CROSSES, DOES_NOT_CROSS, UNKNOWN

HEADING = "an estimate from reading the pack's source (it was not imported or run)"


def _node_lines(node, lines):
    lines.append(f"  {node.name} [{node.class_name}]: {node.verdict}")
    for reason in node.reasons:
        lines.append(f"      {reason}")


def text(found):
    counts = {verdict: sum(1 for n in found.nodes if n.verdict == verdict) for verdict in (CROSSES, DOES_NOT_CROSS,
                                                                                            UNKNOWN)}
    lines = [f"pack check {found.pack}: {HEADING}",
             f"{len(found.nodes)} node classes: {counts[CROSSES]} cross, {counts[DOES_NOT_CROSS]} do not, "
             f"{counts[UNKNOWN]} unknown" + (f"; {len(found.maybe_nodes)} more registered only under a condition"
                                             if found.maybe_nodes else "")]
    if not found.nodes and not found.maybe_nodes:
        lines.append("no node classes found: nothing to run isolated")
    elif found.keep_in_host:
        lines.append("keep in ComfyUI's own process:")
        lines += [f"  {reason}" for reason in found.keep_in_host]
    else:
        lines.append("the pack can run isolated" + (" (its classes that cross)" if counts[CROSSES] < len(found.nodes)
                                                    else ""))
    if found.types_made or found.types_taken:
        lines.append(f"its own types (handles: only nodes of this pack or its group take them): made "
                     f"{', '.join(found.types_made) or 'none'}; taken {', '.join(found.types_taken) or 'none'}")
    if found.nodes:
        lines.append("nodes:")
        for node in found.nodes:
            _node_lines(node, lines)
    if found.maybe_nodes:
        lines.append("registered only under a condition:")
        for node in found.maybe_nodes:
            _node_lines(node, lines)
    lines += [f"note: {note}" for note in found.notes]
    lines += [f"error: {error}" for error in found.errors]
    return "\n".join(lines)


def as_json(found):
    return json.dumps(found.to_json(), indent=2)
