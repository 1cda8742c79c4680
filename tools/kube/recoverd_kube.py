"""recoverd-kube: keeps recoverd in step with a Kubernetes cluster.

It list-watches Volcano PodGroups, Pods, the fault ConfigMaps the device
plugin and NodeD write, and Nodes, and through recoverd's Platform API puts
and deletes jobs, reports device faults and mirrors the platform's PodGroup
annotations. From recoverd's event stream it writes back what ClusterD
writes: the PodGroup label `process-recover-enable`, the annotations
`ProcessConfirmFault` and `ProcessRecoverStatus`, the `reset-config-<job>`
ConfigMap, and the node annotation `NodeHealthyStatus`.

The keys, values and formats are those of ../shared/spec/kubernetes-surface.md
(section numbers below refer to it). It is written in Python because the
only Kubernetes client Debian 12 packages is python3-kubernetes; a C++
client would be hand-written.
"""

import argparse
import hashlib
import json
import logging
import queue
import threading
import time

import grpc
import kubernetes
from kubernetes.watch.watch import iter_resp_lines

import inspect_pb2
import platform_pb2
from translate import (
    DEVICE_INFO_NS,
    DEVICE_INFO_PREFIX,
    ENABLE_LABEL,
    FAULT_CM_SELECTOR,
    MANAGED_BY,
    MANAGED_KEY,
    NODE_HEALTH_KEY,
    NODE_HEALTH_OWNER,
    NODE_INFO_NS,
    NODE_INFO_PREFIX,
    RELEASE_NAME,
    RELEASE_NS,
    SYNC_KEYS,
    annotations,
    device_info_faults,
    fault_ranks,
    job_faults,
    job_id_of,
    job_spec,
    labels,
    merge_annotations,
    meta,
    node_info_faults,
    release_entry,
    reset_untouched,
    reset_writable,
    version,
)

log = logging.getLogger("recoverd-kube")

PLATFORM = "/recoverd.platform.v1.Platform/"
INSPECT = "/recoverd.inspection.v1.Inspect/"
RETRY_SLEEPS = (1, 2, 3)  # §"Retries": one attempt plus three retries


# --- Kubernetes side --------------------------------------------------------

class Informer(threading.Thread):
    """List, then watch from the list's resourceVersion; on 410 Gone (or any
    broken watch whose version has been compacted) list again. Bookmarks
    move the version forward. Every change calls on_change(kind, old, new)."""

    def __init__(self, kind, list_fn, on_change, key=None, **kwargs):
        super().__init__(name="informer-" + kind, daemon=True)
        self.kind, self.list_fn, self.kwargs = kind, list_fn, kwargs
        self.on_change = on_change
        self.key = key or (lambda o: (meta(o).get("namespace", ""),
                                      meta(o)["name"]))
        self.cache = {}
        self.rv = None
        self.synced = threading.Event()
        self.relists = 0
        self.lock = threading.Lock()

    def store(self, obj):
        """Caches `obj` unless a newer version is cached already (our own
        write's answer can arrive before the watch delivers older events;
        resourceVersions are compared as the integers etcd makes them)."""
        k = self.key(obj)
        with self.lock:
            old = self.cache.get(k)
            if old is not None and version(old) > version(obj):
                return
            self.cache[k] = obj
        if old != obj:
            self.on_change(self.kind, old, obj)

    def snapshot(self):
        with self.lock:
            return list(self.cache.values())

    def list_all(self):
        resp = self.list_fn(_preload_content=False, **self.kwargs)
        body = json.loads(resp.data)
        fresh = {self.key(o): o for o in body.get("items") or []}
        with self.lock:
            old, self.cache = self.cache, fresh
        for k in set(old) | set(fresh):
            if old.get(k) != fresh.get(k):
                self.on_change(self.kind, old.get(k), fresh.get(k))
        self.rv = body["metadata"]["resourceVersion"]
        self.relists += 1
        self.synced.set()

    def watch_once(self):
        resp = self.list_fn(watch=True, resource_version=self.rv,
                            allow_watch_bookmarks=True, timeout_seconds=240,
                            _preload_content=False, **self.kwargs)
        try:
            for line in iter_resp_lines(resp):
                event = json.loads(line)
                obj, kind = event.get("object") or {}, event.get("type")
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        log.info("%s: watch expired (%s): listing again",
                                 self.kind, obj.get("message"))
                        self.rv = None
                        return
                    raise RuntimeError(obj.get("message", "watch error"))
                self.rv = meta(obj).get("resourceVersion", self.rv)
                if kind == "BOOKMARK":
                    continue
                if kind == "DELETED":
                    with self.lock:
                        old = self.cache.pop(self.key(obj), None)
                    self.on_change(self.kind, old, None)
                else:
                    self.store(obj)
        finally:
            resp.release_conn()

    def run(self):
        backoff = 1
        while True:
            try:
                if self.rv is None:
                    self.list_all()
                self.watch_once()
                backoff = 1
            except kubernetes.client.exceptions.ApiException as e:
                if e.status == 410:
                    self.rv = None
                    continue
                log.warning("%s: %s; retrying in %d s", self.kind, e.reason,
                            backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 30)
            except Exception as e:  # connection refused, reset, bad JSON
                log.warning("%s: %s; retrying in %d s", self.kind, e, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 30)


def with_retries(what, fn):
    """One attempt plus three retries, 1, 2 and 3 s apart, for errors a
    retry can fix; a conflict or a missing object is returned at once."""
    for sleep in RETRY_SLEEPS + (None,):
        try:
            return fn()
        except kubernetes.client.exceptions.ApiException as e:
            if e.status in (404, 409, 422) or sleep is None:
                raise
            log.warning("%s: %s %s; retrying", what, e.status, e.reason)
        except Exception as e:  # noqa: BLE001 - a broken connection
            if sleep is None:
                raise
            log.warning("%s: %s; retrying", what, e)
        time.sleep(sleep)
    return None


# --- recoverd side ----------------------------------------------------------

class Recoverd:
    """recoverd's Platform and Inspect APIs over one channel."""

    def __init__(self, address, ca=None, cert=None, key=None, token=None):
        if ca or cert:
            def read(path):
                with open(path, "rb") as f:
                    return f.read()
            creds = grpc.ssl_channel_credentials(
                read(ca) if ca else None, read(key) if key else None,
                read(cert) if cert else None)
            self.channel = grpc.secure_channel(address, creds)
        else:
            self.channel = grpc.insecure_channel(address)
        self.metadata = [("authorization", "Bearer " + token)] if token \
            else None

    def call(self, method, request, reply, timeout=10):
        fn = self.channel.unary_unary(
            method, request_serializer=type(request).SerializeToString,
            response_deserializer=reply.FromString)
        return fn(request, timeout=timeout, metadata=self.metadata)

    def platform(self, name, request, reply):
        return self.call(PLATFORM + name, request, reply)

    def watch_events(self):
        fn = self.channel.unary_stream(
            INSPECT + "WatchEvents",
            request_serializer=inspect_pb2.WatchEventsRequest.SerializeToString,
            response_deserializer=inspect_pb2.EventRecord.FromString)
        return fn(inspect_pb2.WatchEventsRequest(), metadata=self.metadata)


# --- the adapter -------------------------------------------------------------

class Adapter:
    def __init__(self, core, custom, recoverd, namespace=None,
                 resync_seconds=30, release_clear_delay=10):
        self.core, self.custom, self.rd = core, custom, recoverd
        self.namespace = namespace
        self.resync_seconds = resync_seconds
        self.queue = queue.Queue()
        self.pending = set()
        self.pending_lock = threading.Lock()
        # Indexes over the informers' caches, kept by `changed`, so a job's
        # PodGroup and pods and a node's jobs are lookups, not scans of
        # every pod of the cluster on each resync.
        self.index_lock = threading.Lock()
        self.pg_by_job = {}    # job id -> PodGroup
        self.pods_by_job = {}  # job id -> {pod uid: pod}
        self.jobs_by_node = {}  # node -> {pod uid: job id}
        self.put_specs = {}    # job id -> the JobSpec last put (bytes)
        self.refused = {}      # job id -> a JobSpec recoverd refused
        self.sent_faults = {}  # job id -> the JobDeviceFaults last sent
        self.managed = {}      # job id -> (namespace, name)
        self.agreed = {}       # job id -> annotations both sides agree on
        self.released = {}     # job id -> uuid of the flow in fault-job-info
        self.release_clear_delay = release_clear_delay
        self.device_faults = {}  # node -> {device id: [(code, level)]}
        self.node_faults = {}    # node -> {source: [(code, level)]}
        group = ("scheduling.volcano.sh", "v1beta1", "podgroups")
        if namespace:
            pg_list = lambda **kw: custom.list_namespaced_custom_object(  # noqa
                *group[:2], namespace, group[2], **kw)
            pod_list = lambda **kw: core.list_namespaced_pod(  # noqa: E731
                namespace, **kw)
        else:
            pg_list = lambda **kw: custom.list_cluster_custom_object(  # noqa
                *group, **kw)
            pod_list = core.list_pod_for_all_namespaces
        self.podgroups = Informer("podgroups", pg_list, self.changed)
        self.pods = Informer("pods", pod_list, self.changed,
                             key=lambda o: meta(o)["uid"])
        self.configmaps = Informer(
            "configmaps", core.list_config_map_for_all_namespaces,
            self.changed, label_selector=FAULT_CM_SELECTOR)
        self.nodes = Informer("nodes", core.list_node, self.changed)
        self.informers = (self.podgroups, self.pods, self.configmaps,
                          self.nodes)

    # Informer callbacks run on informer threads: they only queue work.
    def changed(self, kind, old, new):
        obj = new or old
        self.reindex(kind, old, new)
        if kind == "podgroups":
            self.enqueue(("job", job_id_of(obj)))
        elif kind == "pods":
            for o in (old, new):
                if o is not None:
                    self.enqueue(("job", job_id_of(o)))
        elif kind == "configmaps":
            self.enqueue(("cm", (meta(obj).get("namespace", ""),
                                 meta(obj)["name"]), new is None))
        elif kind == "nodes":
            self.enqueue(("nodes",))

    def enqueue(self, item):
        if item[0] == "job" and item[1] is None:
            return
        with self.pending_lock:
            if item in self.pending:
                return
            self.pending.add(item)
        self.queue.put(item)

    # --- lookups over the caches ---
    def reindex(self, kind, old, new):
        with self.index_lock:
            if kind == "podgroups":
                if old is not None and \
                        self.pg_by_job.get(job_id_of(old)) is not None and \
                        meta(self.pg_by_job[job_id_of(old)]).get("uid") \
                        == meta(old).get("uid"):
                    del self.pg_by_job[job_id_of(old)]
                if new is not None and job_id_of(new) is not None:
                    self.pg_by_job[job_id_of(new)] = new
            elif kind == "pods":
                for o in (old, new):
                    if o is None:
                        continue
                    uid = meta(o)["uid"]
                    self.pods_by_job.get(job_id_of(o), {}).pop(uid, None)
                    node = (o.get("spec") or {}).get("nodeName")
                    self.jobs_by_node.get(node, {}).pop(uid, None)
                if new is not None:
                    uid = meta(new)["uid"]
                    self.pods_by_job.setdefault(job_id_of(new), {})[uid] = new
                    node = (new.get("spec") or {}).get("nodeName")
                    if node:
                        self.jobs_by_node.setdefault(node, {})[uid] = \
                            job_id_of(new)

    def podgroup_of(self, job_id):
        with self.index_lock:
            return self.pg_by_job.get(job_id)

    def pods_of(self, job_id):
        with self.index_lock:
            return list(self.pods_by_job.get(job_id, {}).values())

    # --- Kubernetes -> recoverd ---
    def sync_job(self, job_id):
        pg = self.podgroup_of(job_id)
        if pg is None:
            return self.forget_job(job_id)
        spec = job_spec(pg, self.pods_of(job_id))
        key = spec.SerializeToString(deterministic=True)
        if self.put_specs.get(job_id) != key \
                and self.refused.get(job_id) != key:
            fresh = job_id not in self.managed and not self.known(job_id)
            request = platform_pb2.PutJobRequest()
            request.spec.CopyFrom(spec)
            if fresh:
                # Annotations only at creation; later they move by
                # SetAnnotations, which cannot overwrite recoverd's own keys.
                request.spec.annotations[MANAGED_KEY] = MANAGED_BY
                for k in SYNC_KEYS:
                    if k in annotations(pg):
                        request.spec.annotations[k] = annotations(pg)[k]
                self.agreed[job_id] = {k: annotations(pg).get(k)
                                       for k in SYNC_KEYS}
            try:
                reply = self.rd.platform("PutJob", request,
                                         platform_pb2.PutJobResponse)
            except grpc.RpcError as e:
                log.error("job %s (%s/%s): PutJob refused: %s: %s", job_id,
                          spec.namespace, spec.name, e.code().name,
                          e.details())
                if e.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    # The same objects would be refused again: wait for a
                    # change instead of repeating the error every resync.
                    self.refused[job_id] = key
                return
            self.refused.pop(job_id, None)
            self.put_specs[job_id] = key
            self.managed[job_id] = (spec.namespace, spec.name)
            if reply.created:
                log.info("job %s (%s/%s) put with %d pods", job_id,
                         spec.namespace, spec.name, len(spec.pods))
        self.report_faults(job_id, spec)
        self.write_back(job_id)

    def known(self, job_id):
        try:
            self.rd.platform("GetAnnotations", platform_pb2.JobRef(jobId=job_id),
                             platform_pb2.Annotations)
            return True
        except grpc.RpcError as e:
            return e.code() != grpc.StatusCode.NOT_FOUND

    def forget_job(self, job_id):
        if job_id not in self.managed:
            return
        namespace, name = self.managed.pop(job_id)
        self.put_specs.pop(job_id, None)
        self.sent_faults.pop(job_id, None)
        self.agreed.pop(job_id, None)
        self.schedule_release_clear(job_id)
        try:
            self.rd.platform("DeleteJob", platform_pb2.JobRef(jobId=job_id),
                             platform_pb2.DeleteJobResponse)
            log.info("job %s (%s/%s) deleted with its PodGroup", job_id,
                     namespace, name)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:
                log.error("job %s: DeleteJob: %s", job_id, e.details())
                self.managed[job_id] = (namespace, name)
                return
        # §4.5: every controller reset, a PodGroup deletion included,
        # clears the reset document.
        clear = {"RankList": [], "UpdateTime": int(time.time()),
                 "RetryTime": 0, "FaultFlushing": False, "GracefulExit": 0,
                 "RestartFaultProcess": False}
        self.write_reset(namespace, name,
                         json.dumps(clear, separators=(",", ":")),
                         keep_retry_time=True)

    def report_faults(self, job_id, spec=None):
        if spec is None:
            pg = self.podgroup_of(job_id)
            if pg is None:
                return
            spec = job_spec(pg, self.pods_of(job_id))
        nodes = {k: [x for xs in v.values() for x in xs]
                 for k, v in self.node_faults.items()}
        faults = job_faults(spec, self.device_faults, nodes)
        key = faults.SerializeToString(deterministic=True)
        if self.sent_faults.get(job_id) == key:
            return
        request = platform_pb2.ReportDeviceFaultsRequest()
        request.jobs.add().CopyFrom(faults)
        try:
            reply = self.rd.platform("ReportDeviceFaults", request,
                                     platform_pb2.ReportDeviceFaultsResponse)
        except grpc.RpcError as e:
            log.error("job %s: ReportDeviceFaults: %s", job_id, e.details())
            return
        result = reply.results[0]
        if not result.accepted:
            log.error("job %s: fault snapshot refused: %s", job_id,
                      result.error)
            return
        for line in getattr(result, "ignored", []):
            log.warning("job %s: fault entry ignored: %s", job_id, line)
        self.sent_faults[job_id] = key

    def fault_cm_changed(self, namespace, name, deleted):
        if namespace == DEVICE_INFO_NS and name.startswith(DEVICE_INFO_PREFIX):
            node = name[len(DEVICE_INFO_PREFIX):]
            source = "switch"
        elif namespace == NODE_INFO_NS and name.startswith(NODE_INFO_PREFIX):
            node = name[len(NODE_INFO_PREFIX):]
            source = "node"
        else:
            return
        cm = None
        for o in self.configmaps.snapshot():
            if (meta(o).get("namespace"), meta(o).get("name")) == (namespace,
                                                                  name):
                cm = o
        if deleted or cm is None:
            # §3: deleting the ConfigMap removes all of that node's faults.
            if source == "switch":
                self.device_faults.pop(node, None)
            self.node_faults.get(node, {}).pop(source, None)
        elif source == "switch":
            parsed = device_info_faults(cm)
            if parsed is None:
                log.warning("%s/%s: CheckCode does not match; version "
                            "ignored", namespace, name)
                return
            self.device_faults[node] = parsed[0]
            self.node_faults.setdefault(node, {})["switch"] = parsed[1]
        else:
            parsed = node_info_faults(cm)
            if parsed is None:
                log.warning("%s/%s: CheckCode does not match; version "
                            "ignored", namespace, name)
                return
            self.node_faults.setdefault(node, {})["node"] = parsed
        for job_id in self.jobs_on(node):
            self.report_faults(job_id)

    def jobs_on(self, node):
        with self.index_lock:
            jobs = set(self.jobs_by_node.get(node, {}).values())
        return sorted(j for j in jobs if j in self.managed)

    # --- recoverd -> Kubernetes ---
    def write_back(self, job_id):
        """Both ways for the synchronised annotations (merge_annotations),
        recoverd's label onto the PodGroup, recoverd's reset document into
        the reset ConfigMap."""
        pg = self.podgroup_of(job_id)
        if pg is None or job_id not in self.managed:
            return
        for _ in range(5):
            try:
                have = self.rd.platform("GetJob",
                                        platform_pb2.JobRef(jobId=job_id),
                                        platform_pb2.JobStatus)
            except grpc.RpcError as e:
                log.error("job %s: GetJob: %s", job_id, e.details())
                return
            rd = dict(have.spec.annotations)
            rd_set, rd_remove, pg_patch, agreed = merge_annotations(
                annotations(pg), rd, self.agreed.get(job_id, {}))
            if rd.get(MANAGED_KEY) != MANAGED_BY:
                rd_set[MANAGED_KEY] = MANAGED_BY
            if not rd_set and not rd_remove:
                break
            request = platform_pb2.SetAnnotationsRequest(
                jobId=job_id, expectedSeq=have.lastSeq, set=rd_set,
                remove=rd_remove)
            try:
                self.rd.platform("SetAnnotations", request,
                                 platform_pb2.Annotations)
                break
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.ABORTED:
                    log.error("job %s: SetAnnotations: %s", job_id,
                              e.details())
                    return
                # Somebody wrote in between: read again, decide again.
        else:
            log.warning("job %s: annotations still moving; next time", job_id)
            return
        patch_labels = {}
        label = have.processRecoverLabel
        if label in ("on", "pause") and labels(pg).get(ENABLE_LABEL) != label:
            patch_labels[ENABLE_LABEL] = label
        if patch_labels or pg_patch:
            body = {"metadata": {}}
            if patch_labels:
                body["metadata"]["labels"] = patch_labels
            if pg_patch:
                body["metadata"]["annotations"] = pg_patch
            ns, name = meta(pg)["namespace"], meta(pg)["name"]
            try:
                patched = with_retries(
                    "patch podgroup %s/%s" % (ns, name),
                    lambda: self.custom.patch_namespaced_custom_object(
                        "scheduling.volcano.sh", "v1beta1", ns, "podgroups",
                        name, body))
                if isinstance(patched, dict):
                    self.podgroups.store(patched)
            except Exception as e:  # noqa: BLE001
                log.error("job %s: patching PodGroup %s/%s failed: %s",
                          job_id, ns, name, e)
                return
        self.agreed[job_id] = agreed
        if have.resetJson:
            ns, name = self.managed[job_id]
            self.write_reset(ns, name, have.resetJson)
        self.track_release(job_id, have)

    def track_release(self, job_id, have):
        """§4.6: a flow's fault nodes go into fault-job-info in its
        global-fault step; the entry goes `release_clear_delay` after a
        recover success (or the job's deletion)."""
        if have.uuid and have.recoveryState == "NotifyGlobalFaultState" \
                and self.released.get(job_id) != have.uuid:
            nodes = {meta(n)["name"]: n for n in self.nodes.snapshot()}
            entry = release_entry(have.spec, fault_ranks(have), nodes,
                                  int(time.time()))
            if entry is not None and self.write_release(job_id, entry):
                self.released[job_id] = have.uuid
        elif job_id in self.released and not have.uuid \
                and have.lastOutcome == "recover-success":
            self.schedule_release_clear(job_id)

    def schedule_release_clear(self, job_id):
        self.released.pop(job_id, None)
        timer = threading.Timer(self.release_clear_delay, self.enqueue,
                                (("unrelease", job_id),))
        timer.daemon = True
        timer.start()

    def write_release(self, job_id, entry):
        """Sets (entry) or removes (None) the job's key of fault-job-info,
        creating the ConfigMap if missing; three attempts."""
        for _ in range(3):
            try:
                try:
                    cm = json.loads(self.core.read_namespaced_config_map(
                        RELEASE_NAME, RELEASE_NS, _preload_content=False).data)
                except kubernetes.client.exceptions.ApiException as e:
                    if e.status != 404:
                        raise
                    if entry is None:
                        return True
                    self.core.create_namespaced_config_map(RELEASE_NS, {
                        "metadata": {"name": RELEASE_NAME,
                                     "namespace": RELEASE_NS},
                        "data": {job_id: json.dumps(
                            entry, separators=(",", ":"))}})
                    return True
                data = cm.get("data") or {}
                if entry is None:
                    if job_id not in data:
                        return True
                    del data[job_id]
                else:
                    data[job_id] = json.dumps(entry, separators=(",", ":"))
                cm["data"] = data
                self.core.replace_namespaced_config_map(RELEASE_NAME,
                                                        RELEASE_NS, cm)
                log.info("job %s: %s %s/%s", job_id,
                         "released in" if entry else "removed from",
                         RELEASE_NS, RELEASE_NAME)
                return True
            except kubernetes.client.exceptions.ApiException as e:
                if e.status != 409:
                    log.error("%s/%s: %s %s", RELEASE_NS, RELEASE_NAME,
                              e.status, e.reason)
                    return False
        return False

    def write_reset(self, namespace, job_name, document, keep_retry_time=False):
        """§4.5: GET, then Update with the old metadata (labels and
        resourceVersion kept, so a concurrent writer makes it a conflict),
        data exactly reset.json and checkCode."""
        name = "reset-config-" + job_name
        for _ in range(3):
            try:
                cm = self.core.read_namespaced_config_map(
                    name, namespace, _preload_content=False)
                cm = json.loads(cm.data)
            except kubernetes.client.exceptions.ApiException as e:
                if e.status == 404:
                    log.warning("%s/%s does not exist: the reset document "
                                "is not published (create it with the job)",
                                namespace, name)
                else:
                    log.error("%s/%s: %s %s", namespace, name, e.status,
                              e.reason)
                return
            old = (cm.get("data") or {}).get("reset.json")
            if old is None:
                log.error("%s/%s has no reset.json key", namespace, name)
                return
            if keep_retry_time:
                try:
                    doc = json.loads(document)
                    doc["RetryTime"] = json.loads(old).get("RetryTime", 0)
                    document = json.dumps(doc, separators=(",", ":"))
                except (ValueError, AttributeError):
                    pass
            if old == document or reset_untouched(old, document):
                return
            if not reset_writable(old):
                log.warning("%s/%s: a rank's policy is reset/restart; not "
                            "written", namespace, name)
                return
            cm["data"] = {"reset.json": document,
                          "checkCode": hashlib.sha256(
                              document.encode()).hexdigest()}
            try:
                self.core.replace_namespaced_config_map(name, namespace, cm)
                return
            except kubernetes.client.exceptions.ApiException as e:
                if e.status != 409:
                    log.error("%s/%s: update: %s %s", namespace, name,
                              e.status, e.reason)
                    return
        log.error("%s/%s: still conflicting after 3 attempts", namespace,
                  name)

    def sync_nodes(self):
        """§4.4: NodeHealthyStatus=UnHealthy on the nodes recoverd's fleet
        node registry quarantines (isolated by a stress test, or over the
        fault score threshold: Inspect.ListNodes) and on the nodes a job's
        stress test isolated (ListNodeHealth, which also lists the
        registry's quarantine); removed once an operator clears them in
        recoverd (only where recoverd-kube put it). The reference sets no
        taint, so neither does the adapter."""
        try:
            fleet = self.rd.call(
                INSPECT + "ListNodes",
                inspect_pb2.ListNodesRequest(quarantinedOnly=True),
                inspect_pb2.ListNodesResponse)
            reply = self.rd.platform("ListNodeHealth",
                                     platform_pb2.ListNodeHealthRequest(),
                                     platform_pb2.ListNodeHealthResponse)
        except grpc.RpcError as e:
            # Nothing is removed on an error: a node stays marked until
            # recoverd says it is cleared.
            log.error("ListNodes/ListNodeHealth: %s", e.details())
            return
        bad = {n.node for n in fleet.nodes if n.quarantined}
        bad |= {n.node for n in reply.nodes}
        for node in self.nodes.snapshot():
            name, ann = meta(node)["name"], annotations(node)
            if name in bad and ann.get(NODE_HEALTH_KEY) != "UnHealthy":
                body = {NODE_HEALTH_KEY: "UnHealthy",
                        NODE_HEALTH_OWNER: MANAGED_BY}
            elif name not in bad and ann.get(NODE_HEALTH_OWNER) == MANAGED_BY:
                body = {NODE_HEALTH_KEY: None, NODE_HEALTH_OWNER: None}
            else:
                continue
            try:
                with_retries("patch node " + name,
                             lambda: self.core.patch_node(
                                 name, {"metadata": {"annotations": body}}))
            except Exception as e:  # noqa: BLE001
                log.error("node %s: patch failed: %s", name, e)

    def delete_orphans(self):
        """Jobs this adapter put whose PodGroup went while it was away."""
        try:
            jobs = self.rd.platform("ListJobs", platform_pb2.ListJobsRequest(),
                                    platform_pb2.ListJobsResponse).jobs
        except grpc.RpcError as e:
            log.error("ListJobs: %s", e.details())
            return
        for job in jobs:
            if self.podgroup_of(job.jobId) is not None:
                continue
            try:
                have = self.rd.platform("GetAnnotations",
                                        platform_pb2.JobRef(jobId=job.jobId),
                                        platform_pb2.Annotations)
            except grpc.RpcError:
                continue
            if have.annotations.get(MANAGED_KEY) == MANAGED_BY:
                self.managed[job.jobId] = (job.namespace, job.name)
                self.enqueue(("job", job.jobId))

    def follow_recoverd(self):
        """recoverd's event stream: every event of a job is a reason to
        write its state back. Reconnects with a full resync."""
        backoff = 1
        while True:
            try:
                for record in self.rd.watch_events():
                    backoff = 1
                    self.enqueue(("back", record.jobId))
                    if record.kind in ("flow_stepped", "job_deleted"):
                        self.enqueue(("nodes",))
            except grpc.RpcError as e:
                log.warning("recoverd event stream: %s; reconnecting in %d s",
                            e.details() or e.code().name, backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, 30)
            self.enqueue(("all",))

    def handle(self, item):
        if item[0] == "job":
            self.sync_job(item[1])
        elif item[0] == "back":
            if item[1] in self.managed:
                self.write_back(item[1])
        elif item[0] == "cm":
            self.fault_cm_changed(item[1][0], item[1][1], item[2])
        elif item[0] == "nodes":
            self.sync_nodes()
        elif item[0] == "unrelease":
            if item[1] not in self.released:
                self.write_release(item[1], None)
        elif item[0] in ("all", "resync"):
            if item[0] == "all":
                # recoverd may have been away: say everything again.
                self.put_specs.clear()
                self.sent_faults.clear()
            for pg in self.podgroups.snapshot():
                self.enqueue(("job", job_id_of(pg)))
            self.delete_orphans()
            self.enqueue(("nodes",))

    def run(self):
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            informer.synced.wait()
        threading.Thread(target=self.follow_recoverd, name="recoverd-events",
                         daemon=True).start()
        self.enqueue(("all",))
        last_resync = time.monotonic()
        while True:
            try:
                item = self.queue.get(timeout=1)
            except queue.Empty:
                item = None
            if item is not None:
                with self.pending_lock:
                    self.pending.discard(item)
                try:
                    self.handle(item)
                except Exception:  # noqa: BLE001 - never let one item kill us
                    log.exception("while handling %s", item)
            if time.monotonic() - last_resync > self.resync_seconds:
                last_resync = time.monotonic()
                self.enqueue(("resync",))


def main(argv=None, version="unknown"):
    parser = argparse.ArgumentParser(
        prog="recoverd-kube",
        description="Keeps recoverd in step with a Kubernetes cluster: "
        "PodGroups, pods and fault ConfigMaps in; labels, annotations, the "
        "reset ConfigMap and node health out.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", metavar="FILE",
                       help="kubeconfig file of the cluster")
    where.add_argument("--in-cluster", action="store_true",
                       help="use the pod's service account")
    parser.add_argument("--recoverd", metavar="ADDR",
                        help="recoverd's control address, e.g. "
                        "recoverd-control.mindx-dl:8900")
    parser.add_argument("--namespace", metavar="NS",
                        help="only PodGroups and pods of this namespace")
    parser.add_argument("--ca", help="CA of recoverd's TLS certificate")
    parser.add_argument("--cert", help="client certificate for mTLS")
    parser.add_argument("--key", help="client key for mTLS")
    parser.add_argument("--token-file", metavar="FILE",
                        help="file holding a bearer token for recoverd")
    parser.add_argument("--resync-seconds", type=float, default=30,
                        help="full resync period (default 30)")
    parser.add_argument("--release-clear-delay", type=float, default=10,
                        metavar="SECONDS",
                        help="how long a job's fault-job-info entry stays "
                        "after a recover success or its deletion (default 10, "
                        "as ClusterD)")
    parser.add_argument("--log-level", default="info",
                        choices=("debug", "info", "warning", "error"))
    parser.add_argument("--version", action="version",
                        version="recoverd-kube " + version)
    args = parser.parse_args(argv)
    if not args.recoverd:
        parser.error("--recoverd ADDR is required")
    if not args.kubeconfig and not args.in_cluster:
        parser.error("one of --kubeconfig FILE or --in-cluster is required")
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The client's own debug lines are whole response bodies.
    logging.getLogger("kubernetes").setLevel(
        max(logging.INFO, logging.getLogger().level))
    if args.in_cluster:
        kubernetes.config.load_incluster_config()
    else:
        kubernetes.config.load_kube_config(config_file=args.kubeconfig)
    token = None
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    api = kubernetes.client.ApiClient()
    adapter = Adapter(kubernetes.client.CoreV1Api(api),
                      kubernetes.client.CustomObjectsApi(api),
                      Recoverd(args.recoverd, args.ca, args.cert, args.key,
                               token),
                      namespace=args.namespace,
                      resync_seconds=args.resync_seconds,
                      release_clear_delay=args.release_clear_delay)
    log.info("recoverd-kube %s: recoverd at %s", version, args.recoverd)
    try:
        adapter.run()
    except KeyboardInterrupt:
        pass
    return 0
