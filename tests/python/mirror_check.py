"""Mirrors without a second process (bridge/mirror.py): the owner's publication and a mirror
built from its description in this same process, as a worker builds one; every malformed
or hostile description a peer could send is refused in one line before anything is built;
a revoked or dropped mirror raises one line and lets go of the owner's pages; a revoked
copy is punched out, so that what a reader kept of it (a dup, a reopening, a mapping)
reads zeros and its pages are freed. The form a
CUDA mirror's description takes (its tensors themselves) is built here from CPU tensors:
the CUDA transport under it is bridge/cuda_ipc.py's. tests/python/remote_objects_test.cpp
runs mirrors across processes.

    mirror_check.py
"""

import copy
import fcntl
import gc
import mmap
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "host"))
sys.path.insert(0, os.path.join(ROOT, "tests", "host", "fake_comfyui"))
sys.path.insert(0, os.path.join(ROOT, "worker", "python"))

from check_report import CheckReport  # noqa: E402

import comfy.model_base  # noqa: E402
import torch  # noqa: E402
from comfy_supervisor import crossing  # noqa: E402
from comfy_supervisor.bridge import mirror, rules  # noqa: E402
from comfy_supervisor.bridge.remote import RemoteError  # noqa: E402
from comfy_supervisor.crossing import mirror_recipes  # noqa: E402

CONFIG = {"channels": 4, "dim": 32, "context_dim": 16, "heads": 4}


def forward(unet):
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        return unet(torch.randn(1, 4, 4, 4, generator=generator), torch.tensor([500.0]),
                    torch.randn(1, 3, 16, generator=generator))


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def refusal(description, fd):
    """The one line a description is refused with, or None when it was built."""
    try:
        mirror.Mirror(description, fd, "the host's DIFFUSION_MODEL's diffusion_model")
    except RemoteError as error:
        return str(error)
    return None


def main():
    report = CheckReport("mirrors")
    crossing.install()  # the kinds, mirrors and recipes, as the host's install gives them
    torch.manual_seed(0)
    base = comfy.model_base.model_from_config(CONFIG)
    unet = base.diffusion_model
    expected = forward(unet)
    kind = rules.by_name["DIFFUSION_MODEL"]
    own = {name: tensor.data_ptr() for name, tensor in unet.state_dict().items()}
    publication = mirror.Publication(unet)
    report.check(publication.current() and same(forward(unet), expected) and
                 {name: tensor.data_ptr() for name, tensor in unet.state_dict().items()} == own and
                 mirror.publications_of(unet) == [publication],
                 "the owner's module keeps its own memory and computes as before; the copy is current")
    seals = fcntl.fcntl(publication.fd, fcntl.F_GET_SEALS)
    report.check(seals == fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL,
                 f"the memfd is sealed against resizing and new seals, and not against the owner's punch ({seals:#x})")
    recipe = mirror_recipes.recipe_of(base, kind, "diffusion_model", unet)
    good = {"key": 1, "recipe": recipe, "size": publication.size, "generation": publication.generation,
            "tensors": publication.entries}

    fd = publication.reader_fd()
    built = mirror.Mirror(good, fd, "the host's DIFFUSION_MODEL's diffusion_model")
    report.check(same(forward(built.module), expected) and mirror.mapped_bytes() > 0,
                 "a mirror built from the description computes bit-equal to the owner's module, over the mapping")
    with torch.no_grad():
        built.module.proj_in.weight.mul_(2.0)
    report.check(same(forward(unet), expected) and publication.current(), "a write into the mirror stays the reader's own")
    kept = kept_descriptors(fd)
    report.check(all(nonzero(k) for k in kept), "a descriptor kept by a reader (a dup, a reopening through "
                                                "/proc/self/fd, a mapping) reads the weights before revocation")
    try:
        fcntl.fcntl(kept[1], fcntl.F_ADD_SEALS, 0x0010)  # F_SEAL_FUTURE_WRITE, which would refuse the punch
        sealed = "sealed"
    except PermissionError:
        sealed = "refused"
    report.check(sealed == "refused", f"a reader's seal against the owner's punch: {sealed}")
    with torch.no_grad():
        unet.proj_in.weight.data.mul_(2.0)  # in place, through .data, as upstream's copy_to_param writes
        changed = publication.current()
        unet.proj_in.weight.data.div_(2.0)
    report.check(not changed and publication.current(), "an in-place write of the owner's tensor makes the copy stale")
    publication.revoke()
    blocks = os.fstat(kept[0]).st_blocks  # before any read: a read of the mapping allocates zeros of the reader's
    report.check(blocks == 0 and not any(nonzero(k) for k in kept) and mirror.publications_of(unet) == [],
                 f"after revocation the copy's pages are freed ({blocks} blocks), and a kept descriptor and a kept "
                 "mapping read zeros")
    report.check(same(forward(unet), expected), "the owner's module computes as before after revocation")
    error = str(_raises(lambda: forward(built.module)))
    report.check(error.startswith("the mirror of the host's DIFFUSION_MODEL's diffusion_model is gone: its owner "
                                  "evicted that model") and "\n" not in error,
                 f"a revoked mirror's next forward raises one line: {error}")
    report.check(built.address is None and mirror.mapped_bytes() == 0 and
                 all(t.device.type == "meta" for t in built.module.parameters()),
                 "a revoked mirror has let go of the owner's pages: its tensors are meta")
    collected_copy_goes(report)

    again = mirror.Mirror(dict(good, generation=publication.generation), fd, "again")
    again.drop("the node call that read it returned")
    error = str(_raises(lambda: forward(again.module)))
    report.check(error.endswith("the node call that read it returned; read it again from the model in the node that "
                                "uses it"), f"a dropped mirror's next forward raises one line: {error}")

    # What a peer could send instead: each refused in one line, nothing built.
    hostile = {
        "a class outside comfy.ldm": dict(good, recipe=dict(recipe, **{"class": "subprocess.Popen"})),
        "a class of comfy's that is no module": dict(good, recipe=dict(recipe, **{"class": "comfy.ldm.os.system"})),
        "arguments the class refuses": dict(good, recipe=dict(recipe, kwargs=dict(CONFIG, width=3))),
        "arguments that are objects": dict(good, recipe=dict(recipe, kwargs=dict(CONFIG, heads=object()))),
        "operations' arguments that are not data": dict(good, recipe=dict(recipe, scaled_fp8="float8_e4m3fn")),
        "operations named that are not upstream's fixed choice": dict(good, recipe=dict(recipe, operations="eval")),
        "a tensor outside the memfd": dict(good, tensors=[e[:4] + [publication.size] for e in publication.entries]),
        "a tensor in the header page": dict(good, tensors=[e[:4] + [0] for e in publication.entries]),
        "a size other than the memfd's": dict(good, size=publication.size * 2),
        "a size that is not pages": dict(good, size=publication.size + 1),
        "an unknown dtype": dict(good, tensors=[[e[0], e[1], "object", e[3], e[4]] for e in publication.entries]),
        "a tensor missing": dict(good, tensors=publication.entries[1:]),
        "a shape other than the module's": dict(good, tensors=[[e[0], e[1], e[2], [1] * len(e[3]), e[4]]
                                                              for e in publication.entries]),
        "no descriptor": None,
        "not an object": [],
    }
    for what, description in hostile.items():  # over the revoked copy: its size and seals stay
        line = refusal(copy.deepcopy(description) if description is not None else good,
                       None if description is None else fd)
        report.check(line is not None and "\n" not in line, f"{what}: refused ({line})")
    os.close(fd)
    for k in kept:
        k.close() if hasattr(k, "close") else os.close(k)

    unsealed = os.memfd_create("unsealed", os.MFD_CLOEXEC)
    os.ftruncate(unsealed, publication.size)
    line = refusal(good, unsealed)
    report.check(line is not None and "not sealed" in line, f"a memfd a reader could see shrink: refused ({line})")
    os.close(unsealed)
    reader, writer = os.pipe()
    line = refusal(good, reader)
    report.check(line is not None and "not sealed" in line, f"a descriptor that is no memfd: refused ({line})")
    os.close(reader), os.close(writer)

    # The form a CUDA mirror's description takes: the tensors themselves.
    tensors = [[name, kind_name, tensor.detach()] for name, kind_name, tensor in mirror._tensors(unet)]
    cuda_form = mirror.Mirror({"key": None, "recipe": recipe, "cuda": tensors}, None, "the CUDA form")
    report.check(same(forward(cuda_form.module), expected), "a mirror over the owner's tensors themselves (the CUDA "
                                                            "form) computes bit-equal")
    line = refusal({"key": None, "recipe": recipe, "cuda": [[name, "parameter", "a tensor"] for name, *_ in tensors]},
                   None)
    report.check(line is not None, f"the CUDA form with what is not a tensor: refused ({line})")

    base.model_config.custom_operations = type("CustomOps", (), {})
    error = str(_raises(lambda: mirror_recipes.recipe_of(base, kind, "diffusion_model", unet)))
    base.model_config.custom_operations = None
    report.check("custom operations" in error and "\n" not in error,
                 f"a model of custom operations (upstream's model_options) is not mirrored: {error}")
    error = str(_raises(lambda: mirror.Grants(None).grant(base, kind, "model_sampling")))
    report.check("is not mirrored" in error, f"an attribute MIRRORS does not list is not granted: {error}")
    del base, unet, publication
    sys.exit(report.finish())


def kept_descriptors(fd):
    """What a reader can keep of the memfd it got: a dup, a reopening through /proc/self/fd,
    and a shared mapping of its own."""
    dup = os.dup(fd)
    reopened = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)  # a memfd's mode lets its user write-open it
    return [dup, reopened, mmap.mmap(dup, os.fstat(dup).st_size, mmap.MAP_SHARED, mmap.PROT_READ)]


def nonzero(kept):
    """Whether what a reader kept reads anything but zeros."""
    data = kept[:] if isinstance(kept, mmap.mmap) else os.pread(kept, os.fstat(kept).st_size, 0)
    return data.count(0) != len(data)


def collected_copy_goes(report):
    """The owner's module collected: its copies are punched out, whoever kept them."""
    module = comfy.model_base.model_from_config(CONFIG).diffusion_model
    publication = mirror.Publication(module)
    kept = os.open(f"/proc/self/fd/{publication.fd}", os.O_RDONLY)
    del module
    gc.collect()
    report.check(publication.fd is None and not nonzero(kept) and os.fstat(kept).st_blocks == 0,
                 "the owner's module collected, a kept descriptor of its copy reads zeros and its pages are freed")
    os.close(kept)


def _raises(call):
    try:
        call()
    except RemoteError as error:
        return error
    return "nothing raised"


if __name__ == "__main__":
    main()
