"""recoverd-kube's translation rules, pure: Kubernetes objects (as the
JSON dicts the API server sends) to Platform messages, the fault
ConfigMaps, the reset document rules, the release information and the
annotation merge. No I/O; tests/kube/test_translation.py tests them. The
keys and formats are those of ../shared/spec/kubernetes-surface.md (section
numbers below refer to it)."""

import hashlib
import json
import logging

import platform_pb2

log = logging.getLogger("recoverd-kube")

# §1: the recovery switches on the PodGroup.
KNOWN_STRATEGIES = ("retry", "recover-in-place", "recover",
                    "elastic-training", "dump", "exit")
RANK_KEY = "hccl/rankIndex"
DEVICE_KEYS = ("ascend.kubectl.kubernetes.io/ascend-910-configuration",
               "ascend.kubectl.kubernetes.io/ascend-npu-configuration")
REAL_KEY = "huawei.com/AscendReal"
ENABLE_LABEL = "process-recover-enable"
# §4.1: what a platform writes on the PodGroup (mirrored into recoverd) and
# what recoverd writes (mirrored onto the PodGroup).
PLATFORM_KEYS = ("ProcessRecoverStrategy", "ProcessResultFault",
                 "RankTableReady", "recoverd.io/restart-budget")
RECOVERD_KEYS = ("ProcessConfirmFault", "ProcessRecoverStatus")
# Marks the jobs this adapter put, so a restarted adapter deletes only its
# own jobs whose PodGroup has gone.
MANAGED_KEY = "recoverd.io/managed-by"
MANAGED_BY = "recoverd-kube"
# §4.6
RELEASE_NS, RELEASE_NAME = "cluster-system", "fault-job-info"
BASE_DEVICES_KEY = "huawei.com/npu.base-device-infos"
BASE_DEVICES_OLD_KEY = "baseDeviceInfos"
# §4.4
NODE_HEALTH_KEY = "NodeHealthyStatus"
NODE_HEALTH_OWNER = "recoverd.io/node-health-by"
# §3
DEVICE_INFO_NS, DEVICE_INFO_PREFIX = "kube-system", "mindx-dl-deviceinfo-"
NODE_INFO_NS, NODE_INFO_PREFIX = "mindx-dl", "mindx-dl-nodeinfo-"
FAULT_CM_SELECTOR = "mx-consumer-cim=true"



# --- pure translation: Kubernetes objects -> Platform messages -------------

def meta(obj):
    return obj.get("metadata") or {}


def labels(obj):
    return meta(obj).get("labels") or {}


def annotations(obj):
    return meta(obj).get("annotations") or {}


def version(obj):
    text = meta(obj).get("resourceVersion", "")
    return int(text) if text.isdigit() else 0


def controller_owner(obj):
    """The controller ownerReference (§1), or None."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def job_id_of(obj):
    owner = controller_owner(obj)
    return owner.get("uid") if owner else None


def strategies(podgroup):
    """recover-strategy, unknown names dropped (§1), in the known order."""
    given = {s.strip() for s in
             annotations(podgroup).get("recover-strategy", "").split(",")}
    return [s for s in KNOWN_STRATEGIES if s in given]


def pod_devices(pod):
    """(device ids in order, super pod id) from the device plugin's
    annotation (§2), or ([], -1)."""
    for key in DEVICE_KEYS:
        text = annotations(pod).get(key)
        if not text:
            continue
        try:
            doc = json.loads(text)
            ids = [str(d["device_id"]) for d in doc.get("devices") or []]
            return ids, int(doc.get("super_pod_id", -1))
        except (ValueError, TypeError, KeyError) as e:
            log.warning("pod %s: bad %s: %s", meta(pod).get("name"), key, e)
    return [], -1


def pod_rank(pod):
    """hccl/rankIndex, a decimal string (§2); None when absent or not a
    pod rank the Platform API can carry."""
    text = annotations(pod).get(RANK_KEY, "")
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        return None
    return int(text)


def current_pods(pods):
    """One pod per rank: the newest incarnation that is not being deleted
    (a rescheduled pod's replacement wins over the old one)."""
    best = {}
    for pod in pods:
        rank = pod_rank(pod)
        if rank is None or not (pod.get("spec") or {}).get("nodeName"):
            continue
        key = (meta(pod).get("deletionTimestamp") is None,
               meta(pod).get("creationTimestamp") or "",
               meta(pod).get("resourceVersion") or "")
        if rank not in best or key > best[rank][0]:
            best[rank] = (key, pod)
    return [best[r][1] for r in sorted(best)]


def job_spec(podgroup, pods):
    """The JobSpec of a PodGroup and its pods (§1, §2)."""
    owner = controller_owner(podgroup)
    lab, ann = labels(podgroup), annotations(podgroup)
    spec = platform_pb2.JobSpec(
        jobId=owner["uid"], name=owner.get("name", ""),
        namespace=meta(podgroup).get("namespace", ""))
    framework = lab.get("framework", "")
    spec.framework = framework if framework in ("pytorch",
                                                "mindspore") else ""
    spec.recoverStrategies.extend(strategies(podgroup))
    # recoverd itself writes "pause" during a job-level fallback (§4.2): the
    # job stays enabled.
    spec.processRecoverEnable = lab.get(ENABLE_LABEL) in ("on", "pause")
    scheduling = lab.get("fault-scheduling", "")
    spec.faultScheduling = scheduling if scheduling in ("grace",
                                                        "force") else ""
    spec.podRescheduling = lab.get("pod-rescheduling") == "on"
    spec.subHealthyStrategy = lab.get("subHealthyStrategy", "")
    spec.platformMode = "ProcessRecoverStrategy" in ann
    chosen = current_pods(pods)
    # §2: rank = r*N + k, N the device count of the first pod with devices.
    per_pod = next((len(d) for d, _ in map(pod_devices, chosen) if d), 0)
    for pod in chosen:
        ids, super_pod = pod_devices(pod)
        rank = pod_rank(pod)
        status = pod.get("status") or {}
        real = annotations(pod).get(REAL_KEY, "")
        p = spec.pods.add(podRank=rank, uid=meta(pod)["uid"],
                          nodeName=pod["spec"]["nodeName"],
                          running=status.get("phase") == "Running"
                          and (bool(real) or not ids),
                          superPodId=super_pod)
        for k, device_id in enumerate(ids):
            p.devices.add(deviceId=device_id, rankId=str(rank * per_pod + k))
    return spec


def go_json(value):
    """The bytes Go's encoding/json writes for a decoded JSON value: map
    keys sorted, no spaces, <, > and & escaped (the CheckCode input, §3.1)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text.encode()


def checked(doc, body_key):
    """doc[body_key] if doc's CheckCode is its SHA-256, else None."""
    body, code = doc.get(body_key), doc.get("CheckCode")
    if body is None or not code:
        return None
    return body if hashlib.sha256(go_json(body)).hexdigest() == code else None


def device_info_faults(cm):
    """{device id: [(code, level)]} and node-level [(code, level)] of a
    mindx-dl-deviceinfo ConfigMap (§3.1), or None if it fails its check."""
    data = cm.get("data") or {}
    devices, node = {}, []
    if "DeviceInfoCfg" in data:
        try:
            info = checked(json.loads(data["DeviceInfoCfg"]), "DeviceInfo")
        except ValueError:
            info = None
        if info is None:
            return None
        lists = info.get("DeviceList") or {}
        if "huawei.com/npu" in lists:
            kind = "npu"
        else:
            kind = next((t for t in ("Ascend910", "Ascend310P", "Ascend310")
                         if any(t in k for k in lists)), "Ascend910")
        prefix = "huawei.com/" + kind
        unhealthy = set()
        for suffix in ("-Unhealthy", "-NetworkUnhealthy"):
            unhealthy.update(filter(None, lists.get(prefix + suffix,
                                                    "").split(",")))
        try:
            entries = json.loads(lists.get(prefix + "-Fault") or "[]")
        except ValueError:
            entries = []
        for f in entries if isinstance(entries, list) else []:
            name = str(f.get("npu_name", ""))
            device_id = name.rsplit("-", 1)[-1]
            levels = f.get("fault_time_and_level_map") or {}
            for code in filter(None, str(f.get("fault_code", "")).split(",")):
                level = (levels.get(code) or {}).get("fault_level") \
                    or f.get("fault_level", "")
                # §3.4 gate 2: a free restart counts only on a device also
                # listed unhealthy.
                if level == "FreeRestartNPU" and name not in unhealthy:
                    continue
                devices.setdefault(device_id, []).append((code, level))
    if "SwitchInfoCfg" in data:
        try:
            switch = json.loads(data["SwitchInfoCfg"])
        except ValueError:
            switch = {}
        state = switch.get("NodeStatus")
        level = {"UnHealthy": "SeparateNPU",
                 "SubHealthy": "SubHealthFault"}.get(state)
        if level:
            codes = []
            for item in switch.get("FaultCode") or []:
                try:
                    codes.append(json.loads(item).get("AssembledFaultCode"))
                except (ValueError, AttributeError):
                    pass
            for code in [c for c in codes if c] or ["switch-" + state]:
                node.append((code, level))
    return devices, node


def node_info_faults(cm):
    """Node-level [(code, level)] of a mindx-dl-nodeinfo ConfigMap (§3.2),
    or None if it fails its check."""
    try:
        info = checked(json.loads((cm.get("data") or {}).get("NodeInfo",
                                                             "{}")),
                       "NodeInfo")
    except ValueError:
        info = None
    if info is None:
        return None
    if info.get("NodeStatus") != "UnHealthy":
        return []
    codes = [c for d in info.get("FaultDevList") or []
             for c in d.get("FaultCode") or []]
    return [(c, "SeparateNPU") for c in codes or ["node-UnHealthy"]]


def job_faults(spec, device_faults, node_faults):
    """The fault center's view of one job: every fault on a device the job
    holds, and every node-level fault on its nodes, with the pod's uid."""
    out = platform_pb2.JobDeviceFaults(jobId=spec.jobId)
    for pod in spec.pods:
        grouped = {}
        for device in pod.devices:
            for code, level in device_faults.get(pod.nodeName, {}).get(
                    device.deviceId, []):
                grouped.setdefault((device.deviceId, level), []).append(code)
        for code, level in node_faults.get(pod.nodeName, []):
            grouped.setdefault(("", level), []).append(code)
        for (device_id, level), codes in sorted(grouped.items()):
            out.faults.add(nodeName=pod.nodeName, deviceId=device_id,
                           faultCodes=codes, faultLevel=level,
                           podUid=pod.uid)
    return out


def reset_writable(old_json):
    """§4.5: the reset document is not written over a rank whose policy the
    device plugin is acting on."""
    try:
        doc = json.loads(old_json or "{}")
    except ValueError:
        return True
    return not any(r.get("Policy") in ("reset", "restart")
                   for r in doc.get("RankList") or [] if isinstance(r, dict))


def reset_untouched(old_json, new_json):
    """The user's initial document ({"status":"initializing"}) stays until
    recoverd has something to say: a first, empty clear form is no news."""
    try:
        old, new = json.loads(old_json or "{}"), json.loads(new_json)
    except ValueError:
        return False
    return ("RankList" not in old and not new.get("RankList")
            and not new.get("RetryTime") and not new.get("FaultFlushing"))


def super_device_ids(node):
    """The super-device ids of a node's devices, from the device plugin's
    node annotation (a JSON map "<type>-<id>" -> {"SuperDeviceID": n, ...}),
    or None when unknown."""
    ann = annotations(node)
    text = ann.get(BASE_DEVICES_KEY) or ann.get(BASE_DEVICES_OLD_KEY)
    try:
        devices = json.loads(text) if text else None
        ids = sorted(str(v["SuperDeviceID"]) for v in devices.values())
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return ids or None


def fault_ranks(status):
    """The global ranks a flow is about: the reset document's fault list and
    the platform-mode confirm list ("rank:type,...")."""
    ranks = set()
    try:
        ranks.update(str(r["RankId"])
                     for r in json.loads(status.resetJson)["RankList"])
    except (ValueError, KeyError, TypeError):
        pass
    confirm = status.spec.annotations.get("ProcessConfirmFault", "")
    ranks.update(item.split(":", 1)[0].strip()
                 for item in confirm.split(",") if item.strip())
    return ranks


def release_entry(spec, ranks, nodes, now):
    """§4.6: the fault-job-info value of a job in its global-fault step, or
    None when it does not qualify: every pod must have a super pod id >= 0,
    every fault node known super-device ids. `nodes` maps node names to
    Node objects; `ranks` are the flow's fault ranks."""
    if not ranks or not spec.pods or any(p.superPodId < 0 for p in spec.pods):
        return None
    fault_nodes = {p.nodeName for p in spec.pods
                   if any(d.rankId in ranks for d in p.devices)}
    entry = {}
    for name in sorted(fault_nodes):
        ids = super_device_ids(nodes.get(name, {}))
        if ids is None:
            return None
        pod = next(p for p in spec.pods if p.nodeName == name)
        part = entry.setdefault(str(pod.superPodId), {
            "SdIds": [], "FaultNodes": {}, "NodeNames": [],
            "FaultTimes": now, "JobId": spec.jobId})
        part["SdIds"].extend(ids)
        part["FaultNodes"][name] = {}
    for p in spec.pods:
        part = entry.get(str(p.superPodId))
        if part is not None and p.nodeName not in fault_nodes \
                and p.nodeName not in part["NodeNames"]:
            part["NodeNames"].append(p.nodeName)
    return entry or None


SYNC_KEYS = PLATFORM_KEYS + RECOVERD_KEYS


def merge_annotations(pg, rd, base):
    """A three-way merge of the synchronised annotation keys between the
    PodGroup (`pg`), recoverd (`rd`) and what both last agreed on (`base`;
    a key missing from it has never been agreed). The side that changed
    since the agreement wins; when both did (or nothing was agreed yet), the
    writer that owns the key wins: the platform for PLATFORM_KEYS, recoverd
    for RECOVERD_KEYS. So a stale ProcessResultFault that recoverd removes
    is removed from the PodGroup too, and a platform's new value is not
    lost. Values are strings; None is an absent key.
    Returns (set in recoverd, remove in recoverd, PodGroup patch, agreed)."""
    rd_set, rd_remove, pg_patch, agreed = {}, [], {}, {}
    for k in SYNC_KEYS:
        p, r = pg.get(k), rd.get(k)
        if p == r:
            agreed[k] = p
            continue
        owner_pg = k in PLATFORM_KEYS
        if k in base and (p != base[k]) != (r != base[k]):
            pg_wins = p != base[k]
        else:
            pg_wins = owner_pg
        if pg_wins:
            if p is None:
                rd_remove.append(k)
            else:
                rd_set[k] = p
            agreed[k] = p
        else:
            pg_patch[k] = r
            agreed[k] = r
    return rd_set, rd_remove, pg_patch, agreed
