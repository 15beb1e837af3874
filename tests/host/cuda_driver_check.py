"""The CUDA driver binding (comfy_supervisor.bridge.cuda_driver) against what a machine without a
GPU still has: the toolkit's stub libcuda, which exports every driver call and answers
each with CUDA_ERROR_STUB_LIBRARY, and no driver at all.

- Bound against the stub, every call the binding needs is found (a missing one would be
  refused before cuInit), and cuInit's refusal is one line naming the call.
- Without a driver, the refusal is one line too, and the process's usable CUDA devices
  are none: every CUDA tensor is staged through the arenas.

  cuda_driver_check.py STUB_LIBCUDA
Prints one line per check and "cuda-driver: N passed, M failed"; exit status 1 on any failure."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker", "python"))

from check_report import CheckReport  # noqa: E402
from comfy_supervisor.bridge import cuda_driver, cuda_ipc  # noqa: E402


def refusal(library):
    try:
        cuda_driver.Driver(library)
    except cuda_driver.CudaError as error:
        return str(error)
    return None


def main(stub):
    report = CheckReport("cuda-driver")
    check = report.check
    stub_refusal = refusal(stub)
    check(stub_refusal is not None and stub_refusal.startswith("cuInit failed: ") and "\n" not in stub_refusal,
          f"the stub driver binds every call and refuses at cuInit: {stub_refusal}")
    missing = refusal("libcuda-that-is-not-here.so.1")
    check(missing is not None and missing.startswith("no CUDA driver (") and "\n" not in missing,
          f"no driver is one line: {missing}")
    devices = cuda_ipc.usable_devices()
    check(devices == {}, f"a process whose torch has not initialised CUDA probes no device: {devices}")
    return report.finish()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: cuda_driver_check.py STUB_LIBCUDA", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
