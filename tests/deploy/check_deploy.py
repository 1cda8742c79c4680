#!/usr/bin/python3
"""Checks the deploy files against what the code serves.

docker and a Kubernetes API server cannot run here: the Dockerfile, the
manifests, the systemd unit and the example configuration are parsed and
compared with the daemon's flags, ports and probe paths instead.
Usage: check_deploy.py SOURCE_DIR RECOVERD_BIN. Exit 0 when all checks hold;
otherwise one line per failed check and exit 1.
"""
import re
import shutil
import subprocess
import sys

import yaml

src, recoverd = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def flag_value(args, flag):
    for a in args:
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    if flag in args:
        return args[args.index(flag) + 1]
    return None


help_text = subprocess.run([recoverd, "--help"], capture_output=True,
                           text=True, check=True).stdout
flags = sorted(set(re.findall(r"^\s+(--[a-z0-9-]+)", help_text, re.M)))
gateway = open(f"{src}/services/http_gateway.cpp").read()

# -- the example configuration names every flag -------------------------------
toml_text = open(f"{src}/tools/deploy/recoverd.toml").read()
keys = set(re.findall(r"^#?\s*([a-z0-9-]+)\s*=", toml_text, re.M))
for f in flags:
    if f in ("--help", "--config", "--version"):
        continue
    check(f[2:] in keys, f"recoverd.toml: no key {f[2:]}")
for k in keys:
    check("--" + k in flags, f"recoverd.toml: key {k} is no flag of recoverd")

# -- Kubernetes manifests ---------------------------------------------------------
docs = [d for d in yaml.safe_load_all(
    open(f"{src}/tools/deploy/kubernetes/recoverd.yaml")) if d]
kinds = {d["kind"]: d for d in docs}
for kind in ("StatefulSet", "Service", "NetworkPolicy"):
    check(kind in kinds, f"manifests: no {kind}")
sts = kinds["StatefulSet"]
check(sts["spec"]["replicas"] == 1, "StatefulSet: one replica (RocksDB lock)")
check(sts["spec"].get("volumeClaimTemplates"), "StatefulSet: no PVC")
pod = sts["spec"]["template"]["spec"]
check(pod["securityContext"].get("runAsNonRoot") is True, "pod: not non-root")
c = pod["containers"][0]
check(c["securityContext"].get("readOnlyRootFilesystem") is True,
      "container: root file system not read-only")
args = c["args"]
for a in args:
    check(a.split("=", 1)[0] in flags, f"container: unknown flag {a}")
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
for name, flag in (("agent", "--listen"), ("control", "--control-listen"),
                   ("http", "--http-listen")):
    value = flag_value(args, flag)
    check(value is not None and value.endswith(f":{ports.get(name)}"),
          f"container: port {name} is not the one {flag} binds")
check(ports.get("agent") == 8899, "agent port is not 8899 (TaskD dials it)")
for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    got = c[probe]["httpGet"]
    check(got["path"] == path, f"{probe}: path {got['path']}, want {path}")
    check(got["port"] in ("http", ports.get("http")), f"{probe}: not on http")
    check(f'"{path}"' in gateway, f"{path} is not served by the gateway")
mount = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
check(mount.get("data") == flag_value(args, "--data-dir"),
      "the PVC is not mounted at --data-dir")
service_ports = set()
for d in docs:
    if d["kind"] == "Service":
        for p in d["spec"]["ports"]:
            check(p["targetPort"] in ports, f"Service {d['metadata']['name']}:"
                  f" target {p['targetPort']} is no container port")
            service_ports.add(p["port"])
check(service_ports == set(ports.values()), "Services do not expose every port")

# -- the adapter: its RBAC is exactly what its code calls -------------------------
adapter = open(f"{src}/tools/kube/recoverd_kube.py").read()
VERBS = {"list": {"list", "watch"}, "read": {"get"}, "replace": {"update"},
         "patch": {"patch"}, "create": {"create"}, "delete": {"delete"}}
RESOURCES = {"pod": ("", "pods"), "config_map": ("", "configmaps"),
             "node": ("", "nodes"),
             "custom_object": ("scheduling.volcano.sh", "podgroups")}
used = {}
for verb, rest in re.findall(
        r"\b(?:core|custom)\.(list|read|replace|patch|create|delete)_(\w+)",
        adapter):
    resource = next((r for k, r in RESOURCES.items()
                     if re.search(rf"(^|_){k}(_|$)", rest)), None)
    check(resource is not None, f"adapter: unknown API call {verb}_{rest}")
    if resource:
        used.setdefault(resource, set()).update(VERBS[verb])
check(used, "adapter: no Kubernetes API calls found")
role = next((d for d in docs if d["kind"] == "ClusterRole"
             and d["metadata"]["name"] == "recoverd-kube"), None)
check(role is not None, "manifests: no ClusterRole recoverd-kube")
granted = {}
for rule in (role or {}).get("rules", []):
    for g in rule["apiGroups"]:
        for r in rule["resources"]:
            granted.setdefault((g, r), set()).update(rule["verbs"])
for key, verbs in used.items():
    missing = verbs - granted.get(key, set())
    check(not missing, f"RBAC: {key} lacks {sorted(missing)} the adapter uses")
for key, verbs in granted.items():
    extra = verbs - used.get(key, set())
    check(not extra, f"RBAC: {key} grants {sorted(extra)} the adapter never "
          "uses (least privilege)")
deploy = next((d for d in docs if d["kind"] == "Deployment"
               and d["metadata"]["name"] == "recoverd-kube"), None)
check(deploy is not None, "manifests: no Deployment recoverd-kube")
if deploy:
    spec = deploy["spec"]["template"]["spec"]
    check(spec.get("serviceAccountName") == "recoverd-kube",
          "adapter: not bound to its ServiceAccount")
    binding = next((d for d in docs if d["kind"] == "ClusterRoleBinding"), {})
    check(any(s.get("name") == "recoverd-kube"
              for s in binding.get("subjects", [])),
          "adapter: ServiceAccount not bound to the ClusterRole")
    kargs = spec["containers"][0]["args"]
    check("--in-cluster" in kargs, "adapter: not --in-cluster")
    target = flag_value(kargs, "--recoverd") or ""
    check(target.endswith(f":{ports.get('control')}"),
          "adapter: --recoverd is not the control port")
    adapter_flags = set(re.findall(r'"(--[a-z-]+)"', adapter))
    for a in kargs:
        check(a.split("=", 1)[0] in adapter_flags,
              f"adapter: unknown flag {a}")
names = {d["metadata"]["name"] for d in docs if d["kind"] == "Service"}
check("clusterd-grpc-svc" in names,
      "no Service clusterd-grpc-svc (Ascend Operator resolves that name)")

# -- Dockerfile --------------------------------------------------------------------
docker = open(f"{src}/Dockerfile").read()
stages = re.findall(r"^FROM\s+(\S+)", docker, re.M)
check(len(stages) >= 2, "Dockerfile: not multi-stage")
check(all(s.startswith("debian:12") for s in stages), "Dockerfile: not Debian 12")
user = re.findall(r"^USER\s+(\S+)", docker, re.M)
check(user and not user[-1].startswith(("root", "0")), "Dockerfile: runs as root")
exposed = set(int(p) for p in re.findall(r"\d+", " ".join(
    re.findall(r"^EXPOSE\s+(.*)$", docker, re.M))))
check(exposed == set(ports.values()), "Dockerfile: EXPOSE is not the ports")
for pkg in re.findall(r"\b(lib[a-z0-9+.-]+-dev)\b", docker):
    setup = open(f"{src}/scripts/setup.sh").read()
    check(pkg in setup, f"Dockerfile: {pkg} is not in scripts/setup.sh")

# -- systemd unit --------------------------------------------------------------------
unit = f"{src}/tools/deploy/recoverd.service"
exec_start = re.search(r"^ExecStart=(.*)$", open(unit).read(), re.M).group(1)
for a in exec_start.split()[1:]:
    if a.startswith("--"):
        check(a in flags, f"recoverd.service: unknown flag {a}")
if shutil.which("systemd-analyze"):
    # The binary path of the unit need not exist here: check the rest.
    out = subprocess.run(["systemd-analyze", "verify", unit],
                         capture_output=True, text=True)
    for line in (out.stdout + out.stderr).splitlines():
        if "/usr/local/bin/recoverd" in line or "man:" in line \
                or not line.strip() or "User=" in line or "Group=" in line:
            continue
        if unit.split("/")[-1] in line or "recoverd" in line:
            failures.append("systemd-analyze: " + line)

for f in failures:
    print("FAIL", f)
print(f"check_deploy: {len(failures)} failed checks")
sys.exit(1 if failures else 0)
