"""deploy/docker/Dockerfile, checked without building it (no registry is reached here):
its build stage copies every part of the tree that CMake's install rules read, installs
the build's packages through `scripts/setup --for build`, and installs where the
DaemonSet looks; its run stage installs, from Debian, the package of every shared library
the installed programs need and nothing else, and runs as the DaemonSet's user; the
DaemonSet names the image at the project's version. What is installed is read from
`cmake --install BUILD_DIR` into a scratch prefix.

    docker_image.py CMAKE BUILD_DIR SOURCE_DIR PROJECT_VERSION
"""

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import yaml

# The C library is in every image; everything else the programs need is named.
IN_EVERY_IMAGE = {"libc6"}
# Debian's build of the CUDA toolkit (non-free): what the build stage may add to scripts/setup's.
CUDA_TOOLKIT = re.compile(r"nvidia-cuda-\S+")


def fail(message):
    print(f"docker_image: {message}", file=sys.stderr)
    sys.exit(1)


def stages(dockerfile):
    """Each stage's instructions as (keyword, text), continued lines joined, comments dropped."""
    found = []
    logical = ""
    for line in dockerfile.splitlines():
        if not logical and (not line.strip() or line.lstrip().startswith("#")):
            continue
        logical += line.rstrip("\\").strip() + " "
        if line.endswith("\\"):
            continue
        keyword, _, text = logical.strip().partition(" ")
        logical = ""
        if keyword.upper() == "FROM":
            found.append([])
        found[-1].append((keyword.upper(), text.strip()))
    return found


def copies(stage):
    """COPY instructions as (from_stage or None, sources, destination)."""
    result = []
    for keyword, text in stage:
        if keyword != "COPY":
            continue
        words = shlex.split(text)
        origin = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
        words = [w for w in words if not w.startswith("--")]
        result.append((origin, words[:-1], words[-1]))
    return result


def apt_packages(stage):
    packages = []
    for keyword, text in stage:
        if keyword != "RUN":
            continue
        for command in re.split(r"&&|;", text):
            words = shlex.split(command)
            if words[:2] == ["apt-get", "install"]:
                packages += [w for w in words[2:] if not w.startswith("-") and not w.startswith(">")]
    return packages


def check_build_stage(build, source, project_cmake):
    """Every COPY source exists, keeps its place under /src, is not ignored, and together
    they hold every source path CMake reads for what is installed."""
    ignore_file = os.path.join(source, "deploy", "docker", "Dockerfile.dockerignore")
    with open(ignore_file) as f:
        ignored = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    copied = []
    for origin, sources, destination in copies(build):
        for path in sources:
            local = os.path.join(source, path)
            if not os.path.exists(local):
                fail(f"COPY {path}: no such file or folder in the repository")
            # A folder's contents go into the destination; a file into it when it ends in '/'.
            landed = destination.rstrip("/")
            if not os.path.isdir(local) and destination.endswith("/"):
                landed = destination + os.path.basename(path)
            if landed != "/src/" + path:
                fail(f"COPY {path} {destination}: the tree must keep its layout under /src")
            parts = path.split("/")
            for prefix in ("/".join(parts[:n]) for n in range(1, len(parts) + 1)):
                for pattern in ignored:
                    if fnmatch.fnmatch(prefix, pattern) or (
                            pattern.startswith("**/") and fnmatch.fnmatch(os.path.basename(prefix), pattern[3:])):
                        fail(f"COPY {path}: Dockerfile.dockerignore's {pattern} leaves it out of the build context")
            copied.append(path)
    for path in project_cmake:
        if not any(path == c or path.startswith(c + "/") for c in copied):
            fail(f"CMake reads {path}, which no COPY of the build stage brings in")
    return copied


def cmake_sources(source):
    """The source paths the configure and install of an image read: the root's subfolders
    but tests/ (the image is built with BUILD_TESTING=OFF), the root's includes, and every
    path in the tree that a CMake file of those folders or of cmake/ names."""
    with open(os.path.join(source, "CMakeLists.txt")) as f:
        root = f.read()
    folders = [d for d in re.findall(r"add_subdirectory\((\w+)\)", root) if d != "tests"]
    paths = {"CMakeLists.txt", *folders}
    paths |= set(re.findall(r"include\((cmake/[\w.]+)\)", root))
    # The root's own folder is the tree's; elsewhere only these two name the root.
    texts = [root.replace("${CMAKE_CURRENT_SOURCE_DIR}", "${PROJECT_SOURCE_DIR}")]
    for folder in folders + ["cmake"]:
        for where, _, names in os.walk(os.path.join(source, folder)):
            for name in names:
                if name == "CMakeLists.txt" or name.endswith(".cmake"):
                    with open(os.path.join(where, name)) as f:
                        texts.append(f.read())
    for text in texts:
        found = re.findall(r"\$\{(?:PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR)\}/([\w./@-]+)", text)
        paths |= {p.rstrip("/") for p in found}
    return sorted(paths)


def check_cmake_steps(build):
    """The configure leaves tests out and requires CUDA; the install's prefix and DESTDIR."""
    runs = " ".join(text for keyword, text in build if keyword == "RUN")
    configure = re.search(r"cmake -S /src -B (\S+) ([^&]*)", runs)
    if not configure or "-DBUILD_TESTING=OFF" not in configure.group(2):
        fail("the build stage must configure /src with -DBUILD_TESTING=OFF (only what is installed)")
    install = re.search(r"DESTDIR=(\S+) cmake --install (\S+) --prefix (\S+)", runs)
    if not install or install.group(2) != configure.group(1):
        fail("the build stage must run DESTDIR=DIR cmake --install BUILD --prefix PREFIX on its own build")
    return install.group(1), install.group(3), "-DCOMFY_REQUIRE_CUDA=ON" in configure.group(2)


def owners(libraries):
    """The Debian package that holds each library (by its path, its real path, either with
    or without /usr), or None for one from a toolkit outside Debian. One dpkg -S for all:
    each call reads the whole package database."""
    candidates = {}
    for library in libraries:
        paths = [library, os.path.realpath(library)]
        candidates[library] = paths + [p[len("/usr"):] if p.startswith("/usr/") else "/usr" + p for p in paths]
    listed = subprocess.run(["dpkg", "-S"] + sorted({p for paths in candidates.values() for p in paths}),
                            capture_output=True, text=True).stdout
    held = {path: package.split(":")[0] for package, path in re.findall(r"^(\S+): (/\S+)$", listed, re.M)}
    return {library: next((held[p] for p in paths if p in held), None) for library, paths in candidates.items()}


def needed_packages(prefix):
    """(Package or None, soname) of each shared library an installed program or library
    needs directly."""
    needed = {}
    for folder in ("bin", "lib"):
        for name in sorted(os.listdir(os.path.join(prefix, folder))):
            path = os.path.join(prefix, folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
            dynamic = subprocess.run(["objdump", "-p", path], capture_output=True, text=True, check=True).stdout
            listed = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
            resolved = dict(re.findall(r"^\s+(\S+) => (/\S+)", listed, re.M))
            # The dynamic loader, which ldd lists by its path alone.
            resolved.update((os.path.basename(p), p) for p in re.findall(r"^\s+(/\S+) \(", listed, re.M))
            for soname in re.findall(r"^\s+NEEDED\s+(\S+)$", dynamic, re.M):
                if soname not in resolved:
                    fail(f"{path} needs {soname}, which is not found here")
                needed[soname] = resolved[soname]
    held = owners(set(needed.values()))
    return {(held[library], soname) for soname, library in needed.items()}


def check_run_stage(run, needed, requires_cuda):
    packages = apt_packages(run)
    unwanted = [p for p in packages if p.endswith("-dev") or p in ("g++", "gcc", "cmake", "make")]
    if unwanted:
        fail(f"the run stage installs {unwanted}: runtime libraries only")
    cudart = [p for p in packages if p.startswith("libcudart")]
    if bool(cudart) != requires_cuda:
        fail("the run stage's libcudart and the build's -DCOMFY_REQUIRE_CUDA=ON go together")
    for package, soname in sorted(needed, key=str):
        if package is None:
            # The CUDA runtime of a toolkit outside Debian (/usr/local/cuda) where this was
            # built; the image's is Debian's.
            if not soname.startswith("libcudart.so") or not cudart:
                fail(f"the programs need {soname}, which no Debian package holds here")
        elif package not in packages and package not in IN_EVERY_IMAGE:
            fail(f"the programs need {soname} of {package}, which the run stage does not install")
    owners = {p for p, _ in needed}
    extra = [p for p in packages if p not in owners and not p.startswith("libcudart")]
    if extra:
        fail(f"the run stage installs {extra}, which no installed program needs")


def check_user(run, pod):
    """The image's user is the DaemonSet's runAsUser, and not root."""
    users = [text for keyword, text in run if keyword == "USER"]
    if not users:
        fail("the run stage has no USER: it would run as root")
    uid = users[-1].split(":")[0]
    created = re.search(r"useradd .*--uid (\d+)", " ".join(text for keyword, text in run if keyword == "RUN"))
    context = pod["spec"].get("securityContext", {})
    if not uid.isdigit() or int(uid) == 0 or not created or created.group(1) != uid:
        fail(f"the run stage's USER {uid} must be a numeric non-root uid that its useradd makes")
    if context.get("runAsUser") != int(uid):
        fail(f"the DaemonSet runs as {context.get('runAsUser')}, the image's user is {uid}")


def installed_paths(pod, config, prefix):
    """Every absolute path under PREFIX that the container's command and the config name."""
    container = pod["spec"]["containers"][0]
    strings = list(container.get("command", [])) + list(container.get("args", []))

    def walk(value):
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(config)
    return sorted({s for s in strings if s.startswith(prefix + "/")})


def main():
    cmake, build_dir, source, version = sys.argv[1:5]
    with open(os.path.join(source, "deploy", "docker", "Dockerfile")) as f:
        build, run = stages(f.read())[-2:]
    with open(os.path.join(source, "deploy", "kubernetes", "daemonset.yaml")) as f:
        documents = {d["kind"]: d for d in yaml.safe_load_all(f)}
    pod = documents["DaemonSet"]["spec"]["template"]
    config = json.loads(documents["ConfigMap"]["data"]["node.json"])

    image = pod["spec"]["containers"][0]["image"]
    if not image.endswith(f"/comfy-supervisor:{version}"):
        fail(f"the DaemonSet names the image {image}, not comfy-supervisor at the project's version {version}")
    check_build_stage(build, source, cmake_sources(source))
    if not any(keyword == "RUN" and re.search(r"/src/scripts/setup --for build\b", text) for keyword, text in build):
        fail("the build stage must install the build's packages with scripts/setup --for build")
    extra = [p for p in apt_packages(build) if not CUDA_TOOLKIT.fullmatch(p)]
    if extra:
        fail(f"the build stage installs {extra} beside scripts/setup --for build: name them there")
    destdir, prefix, requires_cuda = check_cmake_steps(build)
    staged = [(sources, destination) for origin, sources, destination in copies(run) if origin == "build"]
    if staged != [([destdir.rstrip("/") + "/"], "/")]:
        fail(f"the run stage must take the build's {destdir}/ whole, to /")
    check_user(run, pod)

    scratch = tempfile.mkdtemp(prefix="comfy-install-docker-")
    try:
        subprocess.run([cmake, "--install", build_dir, "--prefix", scratch], check=True, stdout=subprocess.DEVNULL)
        for path in installed_paths(pod, config, prefix):
            if not os.path.exists(scratch + path[len(prefix):]):
                fail(f"the DaemonSet uses {path}, which cmake --install --prefix {prefix} does not write")
        check_run_stage(run, needed_packages(scratch), requires_cuda)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"docker_image: the Dockerfile copies what CMake reads, installs to {prefix} what the DaemonSet runs, "
          f"and its run stage has the packages of every library the programs need")


if __name__ == "__main__":
    main()
