"""deploy/'s Prometheus and Kubernetes files: each parses, and they agree with each other
and with the supervisor's config format where they meet (the port the DaemonSet's config
listens on is the container's metrics port and the one its annotations name; its token
file comes from a Secret closed to others; the scrape config keeps pods by the label the
DaemonSet gives them).

    deploy_files.py SOURCE_DIR
"""

import json
import os
import sys

import yaml


def fail(message):
    print(f"deploy_files: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    deploy = os.path.join(sys.argv[1], "deploy")
    with open(os.path.join(deploy, "kubernetes", "daemonset.yaml")) as f:
        documents = {d["kind"]: d for d in yaml.safe_load_all(f)}
    with open(os.path.join(deploy, "prometheus", "scrape.yml")) as f:
        scrape = yaml.safe_load(f)

    config = json.loads(documents["ConfigMap"]["data"]["node.json"])
    listen_port = int(config["http"]["listen"].rsplit(":", 1)[1])
    pod = documents["DaemonSet"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    annotated = int(pod["metadata"]["annotations"]["prometheus.io/port"])
    if not listen_port == ports["metrics"] == annotated:
        fail(f"the config listens on {listen_port}, the container names {ports['metrics']}, "
             f"the annotation {annotated}: make them one port")
    # Listening beyond loopback, the supervisor starts only with a token file; it must be
    # mounted from a Secret, closed to other users.
    token_file = config["http"].get("token_file")
    if not token_file:
        fail("the config listens beyond loopback without http.token_file: the supervisor would refuse to start")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    holders = [name for name, path in mounts.items() if os.path.dirname(token_file) == path]
    if len(holders) != 1 or "secret" not in volumes[holders[0]]:
        fail(f"http.token_file {token_file} is not in a volume mounted from a Secret")
    if volumes[holders[0]]["secret"].get("defaultMode", 0o644) & 0o077:
        fail("the token's Secret volume must have defaultMode 0400 or 0600: the supervisor refuses a token others can read")
    shm = volumes["dshm"]
    if shm["emptyDir"].get("medium") != "Memory":
        fail("the /dev/shm volume must be memory-backed (emptyDir medium: Memory)")
    if documents["DaemonSet"]["spec"]["selector"]["matchLabels"] != pod["metadata"]["labels"]:
        fail("the DaemonSet's selector does not match its pods' labels")

    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    keep = jobs["comfy-supervisor-pods"]["relabel_configs"][0]
    if keep["regex"] != pod["metadata"]["labels"]["app.kubernetes.io/name"]:
        fail(f"the scrape config keeps pods labelled {keep['regex']}, the DaemonSet labels them otherwise")
    print("deploy_files: the DaemonSet, its config and the scrape config parse and agree")


if __name__ == "__main__":
    main()
