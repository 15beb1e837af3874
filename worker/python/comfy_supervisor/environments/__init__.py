"""A pack's own Python environment, built from what the pack declares, with ComfyUI's torch
kept: `python -m comfy_supervisor.environments add PACK_DIR` (what `comfyctl pack add` runs).

- manifests, requirements_txt: the pack's declarations (requirements.txt, pyproject.toml,
  comfy-env.toml, pyisolate.yaml), an unknown key refused; pack_folder: each file read from
  inside the pack's folder alone, bounded, path requirements made the pack's;
- baseline: what of ComfyUI's environment the pack's sees (the host's site dirs, torch,
  numpy, ComfyUI's requirements.txt); key: the hash of all of it, which names the folder;
- resolve (pip's report, torch's protection), installer (pip or uv), install_script
  (a pack's install.py, run only when asked), build (a venv made beside the others and
  renamed into place), lock (comfy-env.lock.json, written last);
- stamp: stale_reason(), run by a pack's worker in the environment's own interpreter;
- import_check: the pack's worker started as the supervisor starts it, by
  `comfy-supervisor check` (its environment, its sandbox);
- config_entry: the supervisor's config read and the pack's entry written; cli;
- access: an environment readable by every user, and why one cannot be used (missing,
  unreadable, unfinished); owners: which configs use an environments folder (recorded,
  the unit's, given) and the lock that keeps a remove or gc from an add's environment;
  inventory: what a folder holds, for env_cli (`comfyctl env list` and `gc`);
- files: a file's sha256, a JSON file replaced whole, an flock.

Imports of comfy_supervisor pack_check alone (cli's `check`: the estimate of which node
classes of a pack can run isolated), and of what is not the standard library only yaml
(for pyisolate.yaml), inside the function that reads one. Imported by no other room:
it runs as a tool, and the pack worker runs stamp from its own command line.
docs/ENVIRONMENTS.md says what it does and why.
"""
