#!/usr/bin/env bash
# `pip install` of worker/python into a fresh venv, nothing downloaded (the venv sees
# Debian's setuptools and wheel: --system-site-packages, --no-build-isolation, --no-index):
# the venv's python must import comfy_supervisor from the venv, at the project's version,
# with every module of its rooms (pyproject.toml lists the subpackages one by one), and run
# the pack worker as the supervisor runs it (python -m comfy_supervisor.pack_worker).
# The distribution's metadata must carry the project's LICENSE, whole, and the classifier
# of that license. A copy of worker/python is installed, as setuptools writes build/ and
# egg-info/ where it builds; its LICENSE link is copied as the file, as an sdist holds it.
#
#   pip_venv.sh PYTHON SOURCE_DIR PROJECT_VERSION
set -euo pipefail
python=$1
source=$2
version=$3
scratch=$(mktemp -d /tmp/comfy-install-pip-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

cp -rL "$source/worker/python" "$scratch/src"
find "$scratch/src" -name __pycache__ -prune -exec rm -rf {} +
"$python" -m venv --system-site-packages "$scratch/venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
unset PYTHONPATH
"$scratch/venv/bin/pip" install --quiet --no-build-isolation --no-index "$scratch/src"
found=$(cd "$scratch" && "$scratch/venv/bin/python" -c \
    'import comfy_supervisor, importlib.metadata as m; print(comfy_supervisor.__version__, m.version("comfy-supervisor"), comfy_supervisor.__file__)')
read -r module_version dist_version file <<<"$found"
case "$file" in
    "$scratch/venv/"*) ;;
    *) echo "pip_venv: comfy_supervisor was imported from $file, not from the venv" >&2; exit 1 ;;
esac
if [ "$module_version" != "$version" ] || [ "$dist_version" != "$version" ]; then
    echo "pip_venv: the installed package says $module_version (distribution $dist_version); CMake's version is $version" >&2
    exit 1
fi
# Every module of the source tree, imported from the venv: a room pip left out fails here.
modules=$(cd "$source/worker/python" && find comfy_supervisor -name '*.py' ! -name __main__.py | sort |
    sed -e 's|/__init__\.py$||' -e 's|\.py$||' -e 's|/|.|g')
(cd "$scratch" && "$scratch/venv/bin/python" - $modules <<'PYTHON'
import importlib, sys
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    if not module.__file__.startswith(sys.prefix):
        sys.exit(f"pip_venv: {name} was imported from {module.__file__}, not from the venv")
PYTHON
)
(cd "$scratch" && "$scratch/venv/bin/python" - "$source/LICENSE" <<'PYTHON'
import importlib.metadata, sys
dist = importlib.metadata.distribution("comfy-supervisor")
license_text = open(sys.argv[1]).read()
shipped = [f for f in dist.files or [] if f.name == "LICENSE"]
if "LICENSE" not in (dist.metadata.get_all("License-File") or []) or len(shipped) != 1:
    sys.exit("pip_venv: the distribution does not carry LICENSE (License-File, and the file in its dist-info)")
if shipped[0].read_text() != license_text:
    sys.exit(f"pip_venv: {shipped[0]} differs from the project's LICENSE")
# The license's name is its first line ("MIT License"); its classifier must say the same.
wanted = "License :: OSI Approved :: " + license_text.splitlines()[0].strip()
classifiers = dist.metadata.get_all("Classifier") or []
if wanted not in classifiers:
    sys.exit(f"pip_venv: no classifier '{wanted}' among {classifiers}")
PYTHON
)
(cd "$scratch" && "$scratch/venv/bin/python" -m comfy_supervisor.pack_worker --help >/dev/null) || {
    echo "pip_venv: python -m comfy_supervisor.pack_worker does not run from the venv" >&2
    exit 1
}
echo "pip_venv: comfy_supervisor $module_version installed by pip into a venv and imported from it," \
    "$(echo "$modules" | wc -w) modules; its metadata carries LICENSE and its classifiers"
