"""deploy/'s Prometheus, Grafana and Kubernetes files: each parses, they agree with each
other and with the supervisor's config format where they meet, and `cmake --install`
puts each, as it is, under share/comfy-supervisor/deploy.

Where they meet: the port the DaemonSet's config listens on is the container's metrics
port, the one its annotations, probes and NetworkPolicy name; its token file comes from a
Secret that the pod's user can read and others cannot; the scrape config and the
NetworkPolicy select the pods by the label the DaemonSet gives them. The pod runs as a
user that is not root, without the service account's token and without capabilities,
asks for CPU and memory, and is probed on /healthz (start-up, liveness) and /readyz.

    deploy_files.py CMAKE BUILD_DIR SOURCE_DIR
"""

import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

# What the supervisor's token_file check refuses (supervisor/config/token_file.cpp): any
# bit for others, and the group's write.
TOKEN_MODE_REFUSED = 0o027


def fail(message):
    print(f"deploy_files: {message}", file=sys.stderr)
    sys.exit(1)


def check_port(config, pod, container):
    listen_port = int(config["http"]["listen"].rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    annotated = int(pod["metadata"]["annotations"]["prometheus.io/port"])
    if not listen_port == ports["metrics"] == annotated:
        fail(f"the config listens on {listen_port}, the container names {ports['metrics']}, "
             f"the annotation {annotated}: make them one port")
    return listen_port


def check_token(config, pod, container):
    """Listening beyond loopback, the supervisor starts only with a token file: mounted from
    a Secret, closed to others, readable by the pod's user (the file is root's, so through
    fsGroup and the group's read)."""
    token_file = config["http"].get("token_file")
    if not token_file:
        fail("the config listens beyond loopback without http.token_file: the supervisor would refuse to start")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    holders = [name for name, path in mounts.items() if os.path.dirname(token_file) == path]
    if len(holders) != 1 or "secret" not in volumes[holders[0]]:
        fail(f"http.token_file {token_file} is not in a volume mounted from a Secret")
    mode = volumes[holders[0]]["secret"].get("defaultMode", 0o644)
    if mode & TOKEN_MODE_REFUSED:
        fail(f"the token's Secret volume has defaultMode {mode:04o}: the supervisor refuses a token others can "
             "read or its group can write")
    context = pod["spec"].get("securityContext", {})
    if context.get("runAsUser", 0) != 0 and (context.get("fsGroup") is None or not mode & 0o040):
        fail("the pod's user reads the token (root's file) only through its group: set fsGroup and a "
             "defaultMode with the group's read (0440)")


def check_pod_security(spec, container):
    context = spec.get("securityContext", {})
    if context.get("runAsNonRoot") is not True or not context.get("runAsUser"):
        fail("the pod must run as a user that is not root (runAsNonRoot, runAsUser)")
    if spec.get("automountServiceAccountToken") is not False:
        fail("the pod must not mount the service account's token (automountServiceAccountToken: false)")
    own = container.get("securityContext", {})
    capabilities = own.get("capabilities", {})
    if own.get("allowPrivilegeEscalation") is not False or capabilities.get("drop") != ["ALL"] or \
            capabilities.get("add"):
        fail("the container must drop every capability, add none, and forbid privilege escalation")
    requests = container.get("resources", {}).get("requests", {})
    if not requests.get("cpu") or not requests.get("memory"):
        fail("the container must request CPU and memory (resources.requests)")


def check_probes(container, port):
    names = {p["name"] for p in container["ports"] if p["containerPort"] == port}
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or (get.get("port") not in names and get.get("port") != port):
            fail(f"the {probe} must GET {path} on the HTTP port {port}, not {get}")


def check_network_policy(policy, pod, port):
    """Ingress to the pods only from named peers, only to the HTTP port."""
    names = {p["name"] for p in pod["spec"]["containers"][0]["ports"] if p["containerPort"] == port}
    spec = policy["spec"]
    if spec["podSelector"].get("matchLabels") != pod["metadata"]["labels"]:
        fail("the NetworkPolicy does not select the DaemonSet's pods by their labels")
    if "Ingress" not in spec.get("policyTypes", []) or not spec.get("ingress"):
        fail("the NetworkPolicy must restrict ingress (policyTypes Ingress, with its rules)")
    for rule in spec["ingress"]:
        peers = rule.get("from", [])
        if not peers or any(not peer for peer in peers):
            fail("a NetworkPolicy ingress rule without 'from' peers admits everyone")
        rule_ports = [p.get("port") for p in rule.get("ports", [])]
        if not rule_ports or any(p not in names and p != port for p in rule_ports):
            fail(f"a NetworkPolicy ingress rule opens {rule_ports or 'every port'}, not only the HTTP port {port}")


def check_installed(cmake, build, deploy):
    """cmake --install puts each of deploy/'s Prometheus, Grafana and Kubernetes files, as
    they are, under share/comfy-supervisor/deploy."""
    scratch = tempfile.mkdtemp(prefix="comfy-install-deploy-")
    try:
        subprocess.run([cmake, "--install", build, "--prefix", scratch], check=True, stdout=subprocess.DEVNULL)
        installed = os.path.join(scratch, "share", "comfy-supervisor", "deploy")
        for folder in ("prometheus", "grafana", "kubernetes"):
            for name in os.listdir(os.path.join(deploy, folder)):
                copy = os.path.join(installed, folder, name)
                if not os.path.isfile(copy) or not filecmp.cmp(os.path.join(deploy, folder, name), copy, shallow=False):
                    fail(f"cmake --install does not put deploy/{folder}/{name} in "
                         f"share/comfy-supervisor/deploy/{folder}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    cmake, build, source = sys.argv[1:4]
    deploy = os.path.join(source, "deploy")
    with open(os.path.join(deploy, "kubernetes", "daemonset.yaml")) as f:
        documents = {d["kind"]: d for d in yaml.safe_load_all(f)}
    with open(os.path.join(deploy, "prometheus", "scrape.yml")) as f:
        scrape = yaml.safe_load(f)
    with open(os.path.join(deploy, "grafana", "comfy-supervisor.json")) as f:
        json.load(f)

    config = json.loads(documents["ConfigMap"]["data"]["node.json"])
    pod = documents["DaemonSet"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    port = check_port(config, pod, container)
    check_token(config, pod, container)
    check_pod_security(pod["spec"], container)
    check_probes(container, port)
    check_network_policy(documents["NetworkPolicy"], pod, port)
    shm = {v["name"]: v for v in pod["spec"]["volumes"]}["dshm"]
    if shm["emptyDir"].get("medium") != "Memory":
        fail("the /dev/shm volume must be memory-backed (emptyDir medium: Memory)")
    if documents["DaemonSet"]["spec"]["selector"]["matchLabels"] != pod["metadata"]["labels"]:
        fail("the DaemonSet's selector does not match its pods' labels")

    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    keep = jobs["comfy-supervisor-pods"]["relabel_configs"][0]
    if keep["regex"] != pod["metadata"]["labels"]["app.kubernetes.io/name"]:
        fail(f"the scrape config keeps pods labelled {keep['regex']}, the DaemonSet labels them otherwise")
    check_installed(cmake, build, deploy)
    print("deploy_files: the DaemonSet, its config, its NetworkPolicy and the scrape config parse and agree; "
          "cmake --install puts them and the Grafana dashboard in share/comfy-supervisor/deploy")


if __name__ == "__main__":
    main()
