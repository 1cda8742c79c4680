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
def load_docs(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


def check_recoverd(docs, w):
    """The checks of recoverd's StatefulSet and Services both forms share; w
    prefixes the failures. Returns the StatefulSet, its container's args and
    the container's ports by name."""
    kinds = {d["kind"]: d for d in docs}
    for kind in ("StatefulSet", "Service", "NetworkPolicy"):
        check(kind in kinds, f"{w}manifests: no {kind}")
    sts = next(d for d in docs if d["kind"] == "StatefulSet"
               and d["metadata"]["name"] == "recoverd")
    check(sts["spec"].get("volumeClaimTemplates"), f"{w}StatefulSet: no PVC")
    pod = sts["spec"]["template"]["spec"]
    check(pod["securityContext"].get("runAsNonRoot") is True,
          f"{w}pod: not non-root")
    c = pod["containers"][0]
    check(c["securityContext"].get("readOnlyRootFilesystem") is True,
          f"{w}container: root file system not read-only")
    args = c["args"]
    for a in args:
        check(a.split("=", 1)[0] in flags, f"{w}container: unknown flag {a}")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for name, flag in (("agent", "--listen"), ("control", "--control-listen"),
                       ("http", "--http-listen")):
        value = flag_value(args, flag)
        check(value is not None and value.endswith(f":{ports.get(name)}"),
              f"{w}container: port {name} is not the one {flag} binds")
    check(ports.get("agent") == 8899,
          f"{w}agent port is not 8899 (TaskD dials it)")
    for probe, path in (("livenessProbe", "/healthz"),
                        ("readinessProbe", "/readyz")):
        got = c[probe]["httpGet"]
        check(got["path"] == path,
              f"{w}{probe}: path {got['path']}, want {path}")
        check(got["port"] in ("http", ports.get("http")),
              f"{w}{probe}: not on http")
        check(f'"{path}"' in gateway, f"{path} is not served by the gateway")
    mount = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    check(mount.get("data") == flag_value(args, "--data-dir"),
          f"{w}the PVC is not mounted at --data-dir")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    service_ports = set()
    for d in docs:
        if d["kind"] == "Service" and d["spec"]["selector"] == labels:
            for p in d["spec"]["ports"]:
                check(p["targetPort"] in ports,
                      f"{w}Service {d['metadata']['name']}:"
                      f" target {p['targetPort']} is no container port")
                service_ports.add(p["port"])
    check(service_ports == set(ports.values()),
          f"{w}Services do not expose every port")
    agents = next((d for d in docs if d["kind"] == "Service" and
                   d["metadata"]["name"] == "clusterd-grpc-svc"), None)
    check(agents is not None, f"{w}no Service clusterd-grpc-svc (Ascend "
          "Operator resolves that name)")
    if agents:
        check(agents["spec"]["selector"] == labels,
              f"{w}clusterd-grpc-svc does not select recoverd's pods")
        check([(p["port"], p["targetPort"]) for p in agents["spec"]["ports"]]
              == [(ports.get("agent"), "agent")],
              f"{w}clusterd-grpc-svc: not the port --listen binds")
        # Only ready pods: the HA form's standby is never ready.
        check(not agents["spec"].get("publishNotReadyAddresses"),
              f"{w}clusterd-grpc-svc also routes to pods that are not ready")
    return sts, args, ports


docs = load_docs(f"{src}/tools/deploy/kubernetes/recoverd.yaml")
sts, args, ports = check_recoverd(docs, "")
check(sts["spec"]["replicas"] == 1, "StatefulSet: one replica (RocksDB lock)")

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

# -- Kubernetes: the high-availability form (etcd) ----------------------------------
ha_dir = f"{src}/tools/deploy/kubernetes/ha"
ha_docs = load_docs(f"{ha_dir}/recoverd.yaml")
etcd_docs = load_docs(f"{ha_dir}/etcd.yaml")
kustomization = yaml.safe_load(open(f"{ha_dir}/kustomization.yaml"))
check(sorted(kustomization.get("resources", [])) == ["etcd.yaml", "recoverd.yaml"]
      and not kustomization.get("patches"),
      "ha: apply -k is not the same as apply -f etcd.yaml -f recoverd.yaml")
ha_sts, ha_args, ha_ports = check_recoverd(ha_docs, "ha: ")
check(ha_ports == ports, "ha: not the single replica's ports")


def ident(d):
    return (d["kind"], d["metadata"]["name"])


# Everything but the StatefulSet is the single replica's: the form applies
# over a single-replica install, and the adapter's RBAC checked above holds.
ha_by = {ident(d): d for d in ha_docs}
for d in docs:
    if ident(d) != ("StatefulSet", "recoverd"):
        check(ha_by.get(ident(d)) == d,
              f"ha: {d['kind']} {d['metadata']['name']} differs from"
              " ../recoverd.yaml's")
# The fields a StatefulSet cannot change are the single replica's.
for field in ("serviceName", "selector", "volumeClaimTemplates",
              "podManagementPolicy"):
    check(ha_sts["spec"].get(field) == sts["spec"].get(field),
          f"ha: StatefulSet {field} differs from the single replica's"
          " (immutable: the form could not be applied over it)")
ha_spec = ha_sts["spec"]
check(ha_spec["replicas"] >= 2, "ha: StatefulSet: fewer than two replicas")
# A rolling update waits for every new pod to become ready; a standby never
# does.
check(ha_spec.get("updateStrategy", {}).get("type") == "OnDelete",
      "ha: StatefulSet: a rolling update would wait for a standby's readiness")
ha_pod = ha_spec["template"]["spec"]
ha_labels = ha_spec["template"]["metadata"]["labels"]


def spread(pod, labels, w):
    terms = pod.get("affinity", {}).get("podAntiAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", [])
    check(any(t.get("topologyKey") == "kubernetes.io/hostname"
              and t.get("labelSelector", {}).get("matchLabels") == labels
              for t in terms), f"{w}: replicas not on different nodes")


def pdb_of(pdb_docs, labels, w):
    pdb = next((d for d in pdb_docs if d["kind"] == "PodDisruptionBudget"
                and d["spec"]["selector"].get("matchLabels") == labels), None)
    check(pdb is not None and pdb["spec"].get("maxUnavailable") == 1,
          f"{w}: no PodDisruptionBudget of maxUnavailable 1")


def env_field(container, name):
    for e in container.get("env", []):
        if e["name"] == name:
            return e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    return None


spread(ha_pod, ha_labels, "ha: recoverd")
pdb_of(ha_docs, ha_labels, "ha: recoverd")
ha_c = ha_pod["containers"][0]
check(flag_value(ha_args, "--store") == "etcd", "ha: not --store etcd")
check(flag_value(ha_args, "--advertise") == f"$(POD_IP):{ha_ports['agent']}",
      "ha: --advertise is not the pod IP and the agent port")
check(env_field(ha_c, "POD_IP") == "status.podIP",
      "ha: POD_IP is not the pod's IP (downward API)")
cluster = flag_value(ha_args, "--etcd-cluster")
check(cluster is None or re.fullmatch(r"[A-Za-z0-9._-]{1,64}", cluster),
      f"ha: --etcd-cluster {cluster} is no valid cluster name")
ttl = flag_value(ha_args, "--etcd-lease-ttl")
check(ttl is None or (re.fullmatch(r"(\d+)s", ttl)
                      and int(ttl[:-1]) >= 2),
      f"ha: --etcd-lease-ttl {ttl}: whole seconds, at least 2s")
governing = next((d for d in ha_docs if d["kind"] == "Service" and
                  d["metadata"]["name"] == ha_spec["serviceName"]), None)
check(governing is not None and governing["spec"].get("clusterIP") == "None",
      "ha: no headless Service of the StatefulSet's serviceName")

# etcd: three members, the names recoverd dials
etcd_sts = next((d for d in etcd_docs if d["kind"] == "StatefulSet"), None)
check(etcd_sts is not None, "ha: etcd.yaml: no StatefulSet")
if etcd_sts:
    e_spec = etcd_sts["spec"]
    e_name, e_svc = etcd_sts["metadata"]["name"], e_spec["serviceName"]
    n = e_spec["replicas"]
    check(n == 3, "ha: etcd: not three members")
    # One member alone has no quorum and is never ready: OrderedReady would
    # wait for the first forever.
    check(e_spec.get("podManagementPolicy") == "Parallel",
          "ha: etcd: members not started in parallel")
    e_pod = e_spec["template"]["spec"]
    e_labels = e_spec["template"]["metadata"]["labels"]
    spread(e_pod, e_labels, "ha: etcd")
    pdb_of(etcd_docs, e_labels, "ha: etcd")
    check(e_pod["securityContext"].get("runAsNonRoot") is True,
          "ha: etcd: not non-root")
    e_c = e_pod["containers"][0]
    e_args = e_c["args"]
    if shutil.which("etcd"):
        etcd_help = subprocess.run(["etcd", "--help"], capture_output=True,
                                   text=True).stdout
        etcd_flags = set(re.findall(r"^\s+(--[a-z0-9-]+)", etcd_help, re.M))
        for a in e_args:
            check(a.split("=", 1)[0] in etcd_flags,
                  f"ha: etcd: unknown flag {a}")
    e_ports = {p["name"]: p["containerPort"] for p in e_c["ports"]}
    svc = next((d for d in etcd_docs if d["kind"] == "Service"
                and d["metadata"]["name"] == e_svc), None)
    check(svc is not None and svc["spec"].get("clusterIP") == "None"
          and svc["spec"].get("publishNotReadyAddresses") is True,
          f"ha: etcd: no headless Service {e_svc} publishing members before"
          " they are ready")
    svc_ports = {p["name"]: p["port"] for p in (svc or {}).get(
        "spec", {}).get("ports", [])}
    check(svc_ports == e_ports, "ha: etcd: Service ports are not the members'")
    check(env_field(e_c, "POD_NAME") == "metadata.name",
          "ha: etcd: POD_NAME is not the pod's name")
    check(flag_value(e_args, "--name") == "$(POD_NAME)",
          "ha: etcd: --name is not the pod's name")
    member = f"$(POD_NAME).{e_svc}"
    for flag, port in (("--listen-client-urls", "client"),
                       ("--advertise-client-urls", "client"),
                       ("--listen-peer-urls", "peer"),
                       ("--initial-advertise-peer-urls", "peer")):
        value = flag_value(e_args, flag) or ""
        check(value.endswith(f":{e_ports.get(port)}"),
              f"ha: etcd: {flag} is not the {port} port")
        if "advertise" in flag:
            check(value.split("://")[-1].startswith(member + ":"),
                  f"ha: etcd: {flag} is not the member's name {member}")
    peer_scheme = (flag_value(e_args, "--listen-peer-urls") or "").split(":")[0]
    want = ",".join(f"{e_name}-{i}={peer_scheme}://{e_name}-{i}.{e_svc}:"
                    f"{e_ports.get('peer')}" for i in range(n))
    check(flag_value(e_args, "--initial-cluster") == want,
          f"ha: etcd: --initial-cluster is not {want}")
    check(flag_value(e_args, "--initial-cluster-state") == "new",
          "ha: etcd: --initial-cluster-state is not new")
    e_mount = {m["name"]: m["mountPath"] for m in e_c["volumeMounts"]}
    check(e_spec.get("volumeClaimTemplates")
          and e_mount.get("data") == flag_value(e_args, "--data-dir"),
          "ha: etcd: the PVC is not mounted at --data-dir")
    # recoverd dials every member, by the names and port etcd serves
    client_scheme = (flag_value(e_args, "--listen-client-urls")
                     or "").split(":")[0]
    endpoints = (flag_value(ha_args, "--etcd-endpoints") or "").split(",")
    hosts = set()
    for url in endpoints:
        m = re.fullmatch(rf"(https?)://({re.escape(e_name)}-(\d+))"
                         rf"\.{re.escape(e_svc)}"
                         rf"(\.mindx-dl(\.svc(\.[a-z0-9.-]+)?)?)?:(\d+)", url)
        check(m is not None, f"ha: --etcd-endpoints: {url} is no etcd member")
        if m:
            hosts.add(int(m.group(3)))
            check(m.group(1) == client_scheme,
                  f"ha: --etcd-endpoints: {url} is not {client_scheme}")
            check(int(m.group(7)) == e_ports.get("client"),
                  f"ha: --etcd-endpoints: {url} is not the client port")
    check(hosts == set(range(n)),
          "ha: --etcd-endpoints does not name every etcd member")
    check((client_scheme == "https") == ("--etcd-ca" in
                                         [a.split("=")[0] for a in ha_args]),
          "ha: --etcd-ca and https:// etcd endpoints go together")
    pol = next((d for d in etcd_docs if d["kind"] == "NetworkPolicy"), None)
    check(pol is not None and any(
        {"podSelector": {"matchLabels": ha_labels}} in r.get("from", [])
        and {"port": e_ports.get("client"), "protocol": "TCP"}
        in r.get("ports", []) for r in pol["spec"]["ingress"]),
        "ha: etcd's NetworkPolicy does not let recoverd reach the client port")

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
