"""What adopt prints: the plan, one line per pack with its decision and why (the estimate
labelled as one), then what the builds gave."""

from . import plan as planning

_VERBS = {planning.ISOLATE: "isolate", planning.KEEP: "keep", planning.SKIP: "skip"}
_NOTE_WIDTH = 160  # a note's characters shown in the plan; pack check prints it whole


def _unit_of(pack, units):
    return next((unit for unit in units if pack in unit.packs), None)


def _nodes(pack):
    return f"{len(pack.estimate.nodes)} node class(es)" if pack.estimate else "node classes unknown"


def plan(custom_nodes, packs, units):
    print(f"{custom_nodes}: {len(packs)} entr{'y' if len(packs) == 1 else 'ies'} (decided from an estimate that "
          "reads each pack's source, `comfyctl pack check`; the import check of each isolated pack confirms it)",
          flush=True)
    width = max([len(pack.folder) for pack in packs] + [4])
    for pack in packs:
        unit = _unit_of(pack, units)
        where = f" as \"{unit.name}\"" if unit else ""
        if pack.says and pack.says.display_name:
            where += f" ({pack.says.display_name}, as its pyproject.toml names it)"
        verb = "group" if unit and len(unit.packs) > 1 else _VERBS[pack.action]
        print(f"  {verb:<8} {pack.folder:<{width}}  {_nodes(pack) if pack.action != planning.SKIP else '':<20} "
              f"{'; '.join(pack.reasons)}{where}".rstrip(), flush=True)
        notes = pack.estimate.notes if pack.estimate and pack.action != planning.SKIP else []
        for note in notes:
            shown = note if len(note) <= _NOTE_WIDTH else note[:_NOTE_WIDTH - 1] + "…"
            print(f"  {'':<8} {'':<{width}}  note: {shown}", flush=True)
        if any(len(note) > _NOTE_WIDTH for note in notes):
            print(f"  {'':<8} {'':<{width}}  (comfyctl pack check {pack.candidate.path} says all of it)", flush=True)


def dry_run(config_path, units, gone):
    print(f"dry run: would build {len(units)} environment(s) and write {config_path}"
          f"{'; would take out ' + ', '.join(gone) if gone else ''}; nothing written", flush=True)


def outcome(packs, outcomes):
    isolated = [outcome.unit.name for outcome in outcomes if outcome.ok]
    kept = [pack.folder for pack in packs if pack.action == planning.KEEP]
    failed = [f"{outcome.unit.name} ({outcome.said})" for outcome in outcomes if not outcome.ok]
    print(f"isolated: {', '.join(isolated) or 'none'}", flush=True)
    print(f"in ComfyUI's own process: {', '.join(kept) or 'none'}", flush=True)
    if failed:
        print(f"could not be isolated, so left in ComfyUI's process: {'; '.join(failed)}", flush=True)
