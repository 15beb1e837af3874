"""Holds comfy_supervisor.host.standin.StandIn to its surface table: every member of
STANDIN_SURFACE is there, nothing else upstream could read is, and a member outside the
table raises AttributeError naming it; and a stand-in's label names the model as the
supervisor does, the slot and number standing in for names the ledger did not give.
Prints one line; exits non-zero on a mismatch."""

import dataclasses
import sys

from comfy_supervisor import participant as sv
from comfy_supervisor.host.standin import STANDIN_SURFACE, StandIn, label_of

# What StandIns itself uses on its patchers; upstream never reads these.
OWN_MEMBERS = {"refresh", "ledger_entry"}

entry = sv.LedgerEntry(owner_slot=1, owner_generation=1, model_id=7, weights_id=7, total_bytes=4096,
                       loaded_bytes=1024, load_order=1, device=0, references=1, kind=0, currently_used=True,
                       dynamic=False)
standin = StandIn(entry, link=None, device="cuda:0", label="model 7 of slot 1", timeout_s=1.0)

problems = []
missing = [name for name in STANDIN_SURFACE if not hasattr(standin, name)]
if missing:
    problems.append("missing: " + ", ".join(missing))
public = {name for name in dir(StandIn) if not name.startswith("_")}
extra = public - set(STANDIN_SURFACE) - OWN_MEMBERS
if extra:
    problems.append("outside the table: " + ", ".join(sorted(extra)))
for outside in ("lowvram_patch_counter", "loaded_ram_size", "partially_unload_ram", "patch_model"):
    try:
        getattr(standin, outside)
        problems.append(f"{outside} did not raise")
    except AttributeError as error:
        if f"'{outside}'" not in str(error):
            problems.append(f"{outside}: the error does not name it: {error}")
if standin.model_size() != 4096 or standin.loaded_size() != 1024 or standin.is_dynamic():
    problems.append("sizes or is_dynamic() do not come from the ledger entry")
named = dataclasses.replace(entry, name="sdxl-vae", owner_name="sdxl")
for labelled, expected in ((named, '"sdxl-vae" (model 7 of pack sdxl)'),
                           (dataclasses.replace(named, owner_name=""), '"sdxl-vae" (model 7 of slot 1)'),
                           (dataclasses.replace(named, name=""), "model 7 of pack sdxl"),
                           (entry, "model 7 of slot 1")):
    if label_of(labelled) != expected:
        problems.append(f"label {label_of(labelled)!r}, not {expected!r}")

if problems:
    print("standin surface: " + "; ".join(problems))
    sys.exit(1)
print(f"standin surface: {len(STANDIN_SURFACE)} members, all present, nothing else; labels as the supervisor's")
