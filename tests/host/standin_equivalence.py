"""Upstream's own free_memory over stand-in entries frees what it frees in one process.

    standin_equivalence.py [--comfyui DIR] [--machines N] [--seed S]

On each of N random machines (models of random sizes, loaded in part or whole, each
unloaded in blocks of its own size, as upstream's ModelPatcher unloads module by module;
a fractional target, as upstream's callers pass need * 1.1), it runs upstream's
comfy.model_management.free_memory twice:
- in one process: every model an entry of current_loaded_models of its own;
- as the ComfyUI host sees them: every model another process's, each a stand-in entry
  (comfy_supervisor.host.standin) whose unloads reach the owner's model. The supervisor
  between them is left out: it passes the bytes through as asked (the arbiter's tests
  check that).
Both runs must leave every model with the same loaded bytes and the same entries in the
list. Prints one line; exits 1 on the first machine that differs, naming it.

With --comfyui, upstream is the ComfyUI checkout DIR (imported with --cpu); without it,
our model of upstream in tests/host/fake_comfyui. comfy_supervisor is this checkout's."""

import argparse
import math
import os
import random
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "worker", "python"))


class OwnedModel:
    """A model in its owner's process: what upstream's LoadedModel reads off a patcher,
    unloading in whole blocks until at least the bytes asked are free."""

    def __init__(self, device, total, loaded, block):
        self.load_device = self.offload_device = device
        self.total, self.loaded, self.block = total, loaded, block
        self.model = _Module()
        self.parent = None
        self.clone_base_uuid = uuid.uuid4()

    def model_size(self):
        return self.total

    def loaded_size(self):
        return self.loaded

    def current_loaded_device(self):
        return self.load_device

    def model_patches_to(self, device_or_dtype):
        pass

    def model_dtype(self):
        return None

    def partially_load(self, device, extra_memory, force_patch_weights=False):
        return 0

    def partially_unload(self, device, memory_to_free, *args, **kwargs):
        blocks = max(0, math.ceil(memory_to_free / self.block))  # the fewest that free enough
        freed = min(self.loaded, blocks * self.block)
        self.loaded -= freed
        return freed

    def detach(self, unpatch_all=True):
        if unpatch_all:
            self.loaded = 0

    def model_patches_models(self):
        return []

    def get_nested_additional_models(self):
        return []

    def is_clone(self, other):
        return other is self

    def is_dynamic(self):
        return False


class _Module:
    """What upstream takes for the nn.Module: weak-referenceable."""


class OwnersLink:
    """Stands for the supervisor and the owners' processes: a stand-in's unload reaches the
    owner's model with the bytes as asked, and comes back with what it measured."""

    slot = 0

    def __init__(self, sv, owned):
        self.sv = sv
        self.owned = owned  # model id -> OwnedModel

    def unload_standin(self, entry, nbytes=0, detach=False, timeout_s=30.0):
        model = self.owned[entry.model_id]
        before = model.loaded
        if detach:
            model.detach()
        else:
            model.partially_unload(None, nbytes)
        return self.sv.StandInResult(self.sv.STANDIN_UNLOADED, before - model.loaded, model.loaded)


def random_machine(rng):
    count = rng.randint(1, 6)
    models = []
    for _ in range(count):
        total = rng.randint(1, 8 << 20)
        loaded = rng.choice([total, rng.randint(1, total)])
        block = rng.choice([1, 2, 7, 4096, rng.randint(1, max(1, total // 3))])
        models.append((total, loaded, block))
    free = rng.randint(0, 4 << 20)
    memory_required = (free + rng.randint(1, 8 << 20)) * 1.1
    return models, free, memory_required


def run_one_process(mm, device, machine):
    models, free, memory_required = machine
    owned = [OwnedModel(device, *m) for m in models]
    mm.current_loaded_models[:] = []
    for loaded in [mm.LoadedModel(model) for model in owned]:
        loaded.model_load()
        mm.current_loaded_models.insert(0, loaded)  # each load goes in front, as upstream's
    # Nothing here holds one model more than another: upstream's sort reads sys.getrefcount.
    _free_on(mm, owned, free)
    mm.free_memory(memory_required, device)
    listed = [model for model in owned if any(entry.model is model for entry in mm.current_loaded_models)]
    return [m.loaded for m in owned], [owned.index(m) for m in listed]


def run_standins(mm, sv, StandIns, device, machine):
    models, free, memory_required = machine
    owned = {i + 1: OwnedModel(device, *m) for i, m in enumerate(models)}
    link = OwnersLink(sv, owned)
    ledger = [sv.LedgerEntry(owner_slot=1 + i % 2, owner_generation=1, model_id=model_id, weights_id=model_id,
                             total_bytes=model.total, loaded_bytes=model.loaded, load_order=model_id, device=0,
                             references=1, kind=0, currently_used=False, dynamic=False)
              for i, (model_id, model) in enumerate(owned.items())]
    mm.current_loaded_models[:] = []
    standins = StandIns(mm, link, device)
    standins.refresh(ledger, {})
    _free_on(mm, owned.values(), free)
    mm.free_memory(memory_required, device)
    by_standin = {id(standins.patchers[entry.key]): i for i, entry in enumerate(ledger)}
    listed = sorted(by_standin[id(entry.model)] for entry in mm.current_loaded_models)
    return [model.loaded for model in owned.values()], listed


def _free_on(mm, owned, free):
    """The device as upstream reads it: `free` bytes, and what the models released since."""
    owned = list(owned)
    initially = [model.loaded for model in owned]

    def get_free_memory(dev=None, torch_free_too=False):
        bytes_free = free + sum(before - model.loaded for before, model in zip(initially, owned))
        return (bytes_free, 0) if torch_free_too else bytes_free

    mm.get_free_memory = get_free_memory


def import_upstream(comfyui):
    if comfyui:
        sys.argv = [sys.argv[0], "--cpu"]
        sys.path.insert(0, comfyui)
        import comfy.options
        comfy.options.enable_args_parsing()  # as main.py, so that --cpu is read at import
    else:
        sys.path.insert(0, os.path.join(HERE, "fake_comfyui"))
    import comfy.model_management as mm
    return mm


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--comfyui")
    parser.add_argument("--machines", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261202)
    options = parser.parse_args()
    mm = import_upstream(options.comfyui)
    from comfy_supervisor import participant as sv
    from comfy_supervisor.host.standin import StandIns
    device = mm.get_torch_device()
    rng = random.Random(options.seed)
    for number in range(options.machines):
        machine = random_machine(rng)
        one = run_one_process(mm, device, machine)
        isolated = run_standins(mm, sv, StandIns, device, machine)
        if one != isolated:
            print(f"standin equivalence: machine {number} (seed {options.seed}) differs: models, free and target "
                  f"{machine}; one process leaves {one}, stand-ins leave {isolated}")
            return 1
    print(f"standin equivalence: upstream's free_memory leaves {options.machines} random machines the same "
          f"over stand-ins as in one process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
