"""The bridge between the ComfyUI host and a pack's worker: what both ends share.

- values: how a call's values cross (plain values as JSON, tensors as blocks of an arena
  or by CUDA IPC, a pack's other objects as handles); by_value: the value classes that
  cross as copies (upstream's conditioning values);
- arena: the shared memory they cross in (our own page-granular allocator), with the
  interrupt word; cuda_ipc over cuda_driver (the CUDA driver's own IPC calls) for tensors
  that stay on the GPU;
- channel: the wire (frames of JSON on a call socket, the supervisor's control datagrams);
- session: one peer's life on both sides, its lends and the releases owed;
- object_kinds, remote, conversation: ComfyUI's objects as remote objects both ways (the
  kinds applied: what a pack may use of the host's; the proxies; the uses and their
  answers, served by the thread that waits);
- mirror: a model's torch module itself in the other process, built there over its
  owner's weights mapped from a sealed memfd of the owner's, for code that needs the module;
- http_frames: a pack's HTTP requests and their answers, on a socket of their own;
- rules: what of ComfyUI crosses and how (its kinds, value classes, functions, mirrors'
  recipes, module names and errors), empty until comfy_supervisor.crossing, which names
  ComfyUI's modules, fills it once per process (crossing.install()).

Each end lives in its own room: the host's proxy nodes in host, the worker's node server
in pack_worker (docs/PACKS.md tells the whole story). The bridge knows neither end nor
ComfyUI, and runs the same in both processes: it names no module of ComfyUI, which
tests/python/layering_check.py checks.

Imports nothing else of comfy_supervisor. Imported by crossing, host and pack_worker.
"""
