"""A warm template: one process per interpreter and environment that has imported what every
pack worker imports (torch, numpy, this package's worker side), frozen for the garbage
collector, with no thread but its own, from which the supervisor's pack workers are forked.

    python -m comfy_supervisor.template      (run by the supervisor, never by hand)

Each Python pack worker used to import torch on its own: seconds of start-up and a hundred
and more megabytes of private memory each. A worker forked from the template shares those
pages with it until one side writes them; gc.freeze() keeps the collector from touching the
frozen objects' headers, which would copy their pages into each child.

- __main__.py: the server: the imports, then one fork for each request the supervisor sends
  on COMFY_SV_TEMPLATE_FD, answered with the new worker's pid.
- forking.py: the double fork that makes the worker the supervisor's child (a subreaper's),
  and the process set-up the supervisor's own spawner does: its group, its descriptors,
  death with the supervisor.
- warm_start.py: in the new worker, whether the template's imports are the pack's own (its
  interpreter, its environment's sys.path, its environment variables): then the worker goes
  on in the template's memory; else it execs the pack's command and starts cold, as before.
"""
