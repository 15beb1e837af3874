"""The plan: for each pack of custom_nodes, isolate it, group it with the packs it shares
types with, or keep it in ComfyUI's own process, each with its reasons.

A pack's own type (an object of its own class) is a handle outside its worker, usable only
by nodes of the same worker (docs/PACKS.md, "Pack groups"): packs where one makes a type the
other takes share a worker, and a pack that shares one with a pack kept in ComfyUI's
process stays there too. What a pack makes and takes, and whether its node classes can
cross, is `comfyctl pack check`'s estimate from its source (pack_check/)."""

import dataclasses
import re

from ..environments.cli import default_name

ISOLATE, KEEP, SKIP = "isolate", "keep", "skip"
_NAME_LIMIT = 31  # the config's pack names, as the participant record keeps them


@dataclasses.dataclass
class Pack:
    candidate: object        # inventory.Candidate
    says: object             # author_says.AuthorSays, None for a single file
    estimate: object = None  # pack_check.PackEstimate, None when it could not be made
    action: str = ISOLATE
    reasons: list = dataclasses.field(default_factory=list)

    @property
    def folder(self):
        return self.candidate.folder

    def made(self):
        return set(self.estimate.types_made) if self.estimate else set()

    def taken(self):
        return set(self.estimate.types_taken) if self.estimate else set()

    def keep(self, reason):
        self.action, self.reasons = KEEP, [reason]


@dataclasses.dataclass
class Unit:
    """One config entry: a pack, or a group of packs in one worker."""
    name: str
    packs: list

    @property
    def folders(self):
        return [pack.candidate.path for pack in self.packs]


def _decide_alone(pack, asked_to_keep, asked_to_isolate, listed):
    """The pack's own decision, before the types it shares are looked at."""
    folder = pack.folder
    if not pack.candidate.importable:
        pack.action, pack.reasons = SKIP, ["not a pack: no __init__.py (ComfyUI cannot import it either)"]
    elif listed is not None and folder.lower() not in listed and \
            (pack.says is None or (pack.says.project_name or "").lower() not in listed):
        pack.keep("not in the pack list given (--from): left as it is")
    elif folder in asked_to_keep:
        pack.keep("you asked (--keep-in-host)")
    elif pack.candidate.is_file:
        pack.keep("a single-file pack: isolation takes a pack's folder, so it stays in ComfyUI's process")
    elif folder.lower() == "comfyui-manager":
        pack.keep("ComfyUI-Manager installs and updates the packs of ComfyUI's own process, so it runs there")
    elif pack.says.refusal and folder not in asked_to_isolate:
        pack.keep(f"{pack.says.refusal}; --isolate {folder} isolates it all the same")
    elif pack.estimate is None:
        pack.reasons = ["its source could not be read for an estimate; the import check decides"]
    elif pack.estimate.keep_in_host and folder not in asked_to_isolate:
        pack.keep(f"{'; '.join(pack.estimate.keep_in_host)}; --isolate {folder} isolates it all the same")
    else:
        failing = [node for node in pack.estimate.nodes if node.verdict == "does not cross"]
        if failing and folder not in asked_to_isolate:
            named = ", ".join(f"{node.name} ({'; '.join(node.reasons)})" for node in failing[:3])
            more = f" and {len(failing) - 3} more" if len(failing) > 3 else ""
            pack.keep(f"estimated not to cross: {named}{more}; --isolate {folder} isolates it all the same (those "
                      "nodes then fail)")
            return
        crossing = sum(1 for node in pack.estimate.nodes if node.verdict == "crosses")
        unknown = len(pack.estimate.nodes) - crossing - len(failing)
        if not pack.estimate.nodes:
            pack.reasons = ["no node class found in its source; the import check decides"]
        elif crossing == len(pack.estimate.nodes):
            pack.reasons = ["every node class estimated to cross"]
        else:
            pack.reasons = [f"{crossing} estimated to cross" + (f", {unknown} unknown until imported" if unknown else "")
                            + (f", {len(failing)} that do not, isolated as you asked" if failing else "")]


def _shared(one, other):
    return sorted((one.made() & other.taken()) | (other.made() & one.taken()))


def _keep_what_shares_with_kept(packs):
    """A pack that shares a type with a pack kept in ComfyUI's process stays there too, until
    nothing more moves."""
    moved = True
    while moved:
        moved = False
        kept = [pack for pack in packs if pack.action == KEEP]
        for pack in packs:
            if pack.action != ISOLATE:
                continue
            for holder in kept:
                types = _shared(pack, holder)
                if types:
                    pack.keep(f"shares {', '.join(types)} with {holder.folder}, which stays in ComfyUI's process")
                    moved = True
                    break


def _groups(packs):
    """The isolated packs joined where they share a type, in custom_nodes' order."""
    isolated = [pack for pack in packs if pack.action == ISOLATE]
    group_of = {id(pack): [pack] for pack in isolated}
    for index, one in enumerate(isolated):
        for other in isolated[index + 1:]:
            types = _shared(one, other)
            if types and group_of[id(one)] is not group_of[id(other)]:
                merged = group_of[id(one)] + group_of[id(other)]
                merged.sort(key=isolated.index)
                for pack in merged:
                    group_of[id(pack)] = merged
                for pack in (one, other):
                    pack.reasons.append(f"grouped with {(other if pack is one else one).folder}: they share "
                                        f"{', '.join(types)}")
    seen, groups = set(), []
    for pack in isolated:
        group = group_of[id(pack)]
        if id(group) not in seen:
            seen.add(id(group))
            groups.append(group)
    return groups


def _unique(name, taken):
    name = re.sub(r"[^A-Za-z0-9_-]", "-", name)[:_NAME_LIMIT] or "pack"
    if name == "host":
        name = "host-pack"
    base, number = name, 2
    while name in taken:
        suffix = f"-{number}"
        name, number = base[:_NAME_LIMIT - len(suffix)] + suffix, number + 1
    taken.add(name)
    return name


def plan(packs, asked_to_keep=(), asked_to_isolate=(), listed=None, names_in_use=None, other_names=()):
    """Each pack decided (its action and reasons set), and the units to isolate. A unit keeps
    the name the config already gives its folders (`names_in_use`: {tuple of folders: name}),
    so that a re-run changes nothing it need not; a new one takes none of `other_names`."""
    for pack in packs:
        _decide_alone(pack, set(asked_to_keep), set(asked_to_isolate), listed)
    _keep_what_shares_with_kept(packs)
    names_in_use = names_in_use or {}
    taken = set(names_in_use.values()) | set(other_names)
    units = []
    for group in _groups(packs):
        folders = tuple(pack.candidate.path for pack in group)
        name = names_in_use.get(folders) or _unique("-".join(default_name(pack.folder) for pack in group), taken)
        units.append(Unit(name, group))
    return units
