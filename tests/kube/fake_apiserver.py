#!/usr/bin/env python3
"""A small, faithful Kubernetes API server for the adapter's tests.

No real API server can run here, so this implements the part of the
protocol recoverd-kube relies on, for pods, nodes, configmaps and Volcano
podgroups:

* list (with equality label selectors and fieldSelector metadata.name=),
  returning the collection's resourceVersion;
* watch from a resourceVersion, as a stream of JSON lines (ADDED, MODIFIED,
  DELETED, BOOKMARK when allowWatchBookmarks=true), and an ERROR event with
  a 410 Status when the version is older than the compacted history,
  as a real server does after etcd compaction;
* get, create (409 AlreadyExists), update (409 Conflict on a stale
  metadata.resourceVersion), JSON merge patch (merge-patch and
  strategic-merge-patch bodies are both applied as RFC 7386 merges, which is
  what they mean for the metadata maps patched here), delete;
* one global resourceVersion counter, uids and creationTimestamps.

Test-only controls under /fake/: pause (hold events back from open watches),
resume, compact (forget history up to now: older watches get 410) and
break (close every open watch). Started with --port 0 it prints the port.
Only ever binds to 127.0.0.1.
"""

import argparse
import copy
import json
import re
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

# (group/version path prefix, plural) -> kind, namespaced
RESOURCES = {
    ("api/v1", "pods"): ("Pod", True),
    ("api/v1", "configmaps"): ("ConfigMap", True),
    ("api/v1", "nodes"): ("Node", False),
    ("apis/scheduling.volcano.sh/v1beta1", "podgroups"): ("PodGroup", True),
}

PATH = re.compile(
    r"^/(api/v1|apis/[^/]+/[^/]+)"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?$")


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason,
            "code": code}


class Store:
    """Objects, their history and the open watches."""

    def __init__(self):
        self.lock = threading.Condition()
        self.rv = 100
        self.objects = {}   # (api, plural) -> {(ns, name): obj}
        self.history = []   # (rv, api, plural, type, obj)
        self.compacted = 0  # history holds every event with rv > compacted
        self.paused = False
        self.generation = 0  # bumped by "break": open watches end
        self.requests = []   # (method, path) of writes, for tests

    def bucket(self, api, plural):
        return self.objects.setdefault((api, plural), {})

    def record(self, api, plural, kind, obj):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, api, plural, kind, copy.deepcopy(obj)))
        self.lock.notify_all()


def selected(obj, labels, name):
    meta = obj.get("metadata", {})
    if name is not None and meta.get("name") != name:
        return False
    have = meta.get("labels") or {}
    for key, value in labels:
        if have.get(key) != value:
            return False
    return True


def truthy(text):
    """As Go's strconv.ParseBool, which the API server uses."""
    return (text or "").lower() in ("1", "t", "true")


def parse_selector(text):
    pairs = []
    for part in filter(None, (text or "").split(",")):
        key, _, value = part.partition("=")
        pairs.append((key.strip(), value.strip().lstrip("=")))
    return pairs


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    store = None

    def log_message(self, *args):
        pass

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"null")

    def route(self):
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        m = PATH.match(url.path)
        if not m or (m.group(1), m.group("plural")) not in RESOURCES:
            return None
        api, plural = m.group(1), m.group("plural")
        kind, namespaced = RESOURCES[(api, plural)]
        ns = m.group("ns") if namespaced else ""
        return api, plural, kind, ns, m.group("name"), query

    # --- test controls -------------------------------------------------
    def control(self):
        s = self.store
        what = urlparse(self.path).path[len("/fake/"):]
        with s.lock:
            if what == "pause":
                s.paused = True
            elif what == "resume":
                s.paused = False
            elif what == "compact":
                s.compacted = s.rv
                s.history = []
            elif what == "break":
                s.generation += 1
            elif what == "requests":
                return self.send_json(200, {"requests": s.requests})
            else:
                return self.send_json(404, status(404, "NotFound", what))
            s.lock.notify_all()
        self.send_json(200, {"rv": s.rv})

    # --- verbs ----------------------------------------------------------
    def do_GET(self):
        if self.path.startswith("/fake/"):
            return self.control()
        r = self.route()
        if r is None:
            return self.send_json(404, status(404, "NotFound",
                                              "the server could not find "
                                              "the requested resource"))
        api, plural, kind, ns, name, query = r
        if truthy(query.get("watch")):
            return self.watch(api, plural, kind, ns, query)
        s = self.store
        with s.lock:
            objs = s.bucket(api, plural)
            if name is not None:
                obj = objs.get((ns, name))
                if obj is None:
                    return self.send_json(404, status(
                        404, "NotFound", f'{plural} "{name}" not found'))
                return self.send_json(200, obj)
            labels = parse_selector(query.get("labelSelector"))
            field = query.get("fieldSelector", "")
            fname = field.split("=", 1)[1] if field.startswith(
                "metadata.name=") else None
            items = [copy.deepcopy(o) for (ons, _), o in sorted(objs.items())
                     if (not ns or ons == ns) and selected(o, labels, fname)]
            body = {"kind": kind + "List", "apiVersion": api.split("/", 1)[-1]
                    if api != "api/v1" else "v1",
                    "metadata": {"resourceVersion": str(s.rv)},
                    "items": items}
        self.send_json(200, body)

    def watch(self, api, plural, kind, ns, query):
        s = self.store
        labels = parse_selector(query.get("labelSelector"))
        bookmarks = truthy(query.get("allowWatchBookmarks"))
        timeout = float(query.get("timeoutSeconds") or 300)
        deadline = time.monotonic() + timeout
        with s.lock:
            since = int(query.get("resourceVersion") or s.rv)
            gone = since < s.compacted
            generation = s.generation
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def emit(event):
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        try:
            if gone:
                emit({"type": "ERROR", "object": status(
                    410, "Expired",
                    f"too old resource version: {since} ({s.compacted})")})
                return
            sent_rv = since
            last_bookmark = time.monotonic()
            while True:
                batch = []
                with s.lock:
                    while True:
                        if s.generation != generation:
                            return
                        if time.monotonic() >= deadline:
                            return
                        if not s.paused:
                            batch = [h for h in s.history if h[0] > sent_rv]
                        if batch or (bookmarks and time.monotonic()
                                     - last_bookmark > 1.0):
                            break
                        s.lock.wait(0.2)
                    current = s.rv
                for rv, hapi, hplural, etype, obj in batch:
                    sent_rv = rv
                    if (hapi, hplural) != (api, plural):
                        continue
                    if ns and obj["metadata"].get("namespace") != ns:
                        continue
                    if not selected(obj, labels, None):
                        continue
                    emit({"type": etype, "object": obj})
                if bookmarks and not batch:
                    last_bookmark = time.monotonic()
                    sent_rv = max(sent_rv, current) if not s.paused else \
                        sent_rv
                    emit({"type": "BOOKMARK", "object": {
                        "kind": kind, "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(sent_rv)}}})
        except (BrokenPipeError, ConnectionResetError):
            return
        finally:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass
            self.close_connection = True

    def write(self, method):
        r = self.route()
        if r is None:
            return self.send_json(404, status(404, "NotFound", self.path))
        api, plural, kind, ns, name, _ = r
        s = self.store
        body = self.body() if method != "DELETE" else None
        with s.lock:
            s.requests.append((method, urlparse(self.path).path))
            objs = s.bucket(api, plural)
            if method == "POST":
                meta = body.setdefault("metadata", {})
                if ns:
                    meta["namespace"] = ns
                key = (ns, meta.get("name"))
                if not meta.get("name"):
                    return self.send_json(422, status(422, "Invalid",
                                                      "metadata.name"))
                if key in objs:
                    return self.send_json(409, status(
                        409, "AlreadyExists",
                        f'{plural} "{key[1]}" already exists'))
                meta["uid"] = meta.get("uid") or str(uuid.uuid4())
                meta["creationTimestamp"] = datetime.now(
                    timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                body.setdefault("kind", kind)
                objs[key] = body
                s.record(api, plural, "ADDED", body)
                return self.send_json(201, body)
            key = (ns, name)
            obj = objs.get(key)
            if obj is None:
                return self.send_json(404, status(
                    404, "NotFound", f'{plural} "{name}" not found'))
            if method == "DELETE":
                del objs[key]
                s.record(api, plural, "DELETED", obj)
                return self.send_json(200, obj)
            if method == "PUT":
                want = (body.get("metadata") or {}).get("resourceVersion")
                if want and want != obj["metadata"]["resourceVersion"]:
                    return self.send_json(409, status(
                        409, "Conflict",
                        f'Operation cannot be fulfilled on {plural} "{name}":'
                        " the object has been modified; please apply your "
                        "changes to the latest version and try again"))
                new = copy.deepcopy(body)
                for keep in ("uid", "creationTimestamp", "namespace", "name"):
                    if keep in obj["metadata"]:
                        new["metadata"][keep] = obj["metadata"][keep]
            else:  # PATCH
                ctype = self.headers.get("Content-Type", "")
                if "json-patch" in ctype:
                    return self.send_json(415, status(
                        415, "UnsupportedMediaType", ctype))
                new = merge_patch(obj, body)
                want = (body.get("metadata") or {}).get("resourceVersion")
                if want and want != obj["metadata"]["resourceVersion"]:
                    return self.send_json(409, status(409, "Conflict",
                                                      "stale resourceVersion"))
            objs[key] = new
            s.record(api, plural, "MODIFIED", new)
            return self.send_json(200, new)

    def do_POST(self):
        if self.path.startswith("/fake/"):
            return self.control()
        self.write("POST")

    def do_PUT(self):
        self.write("PUT")

    def do_PATCH(self):
        self.write("PATCH")

    def do_DELETE(self):
        self.write("DELETE")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    Handler.store = Store()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
