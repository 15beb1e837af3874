"""`comfyctl pack check DIR`: an estimate, from reading a pack's source, of which of its node
classes can run isolated (their inputs and outputs cross between ComfyUI and the pack's
worker), which cannot and why, and whether the whole pack must stay in ComfyUI's process
(docs/PACKS.md, "Will a pack run isolated? `comfyctl pack check`"). `comfyctl adopt` decides
isolate, group or keep from it.

The pack is never imported or run (adopt reads packs not yet trusted): its files are
parsed with ast and read as an import would bind them (interpreter.py). How each type
crosses follows the bridge's own tables (crossing_types.py).

- source: the pack's files, and where its imports lead;
- interpreter, calls, frames, values: what its modules bind, computed from their trees;
- mappings: the node classes it registers (NODE_CLASS_MAPPINGS, comfy_entrypoint);
- interfaces: each class's inputs and outputs (INPUT_TYPES/RETURN_TYPES, define_schema);
- crossing_types: how a type crosses; uses: what a node does with ComfyUI's remote objects;
- findings: what keeps the pack in ComfyUI's process, and notes;
- estimate: the verdicts, PackEstimate and NodeEstimate; report: the text and JSON output.

Imports of comfy_supervisor crossing alone (its tables: kinds.KINDS, replicas.REPLICATED),
and nothing outside the standard library: it runs as a tool. Imported by environments (cli's
`check`) and adopt.
"""

from .estimate import CROSSES, DOES_NOT_CROSS, UNKNOWN, NodeEstimate, PackEstimate, estimate
from .source import NotAPack

__all__ = ["estimate", "PackEstimate", "NodeEstimate", "NotAPack", "CROSSES", "DOES_NOT_CROSS", "UNKNOWN"]
