#!/usr/bin/env python3
"""Watches the dashboard update live in headless Chromium (DevTools protocol).

Usage: dashboard_live.py CHROMIUM PROFILE_DIR URL JOBS -- SIM_COMMAND...

Opens URL, waits until the page's watch is open and no job is listed, runs
SIM_COMMAND (which creates JOBS jobs), then waits until the same page (not
reloaded) lists them and draws the incident of the job named in URL's
#job=. Then clicks the last job's row and waits for its incidents. Prints
one JSON object with what the page showed ("clicked": after the click) and
exits 0, or prints why and exits 1. Used by tests/e2e/dashboard_test.cpp.
"""

import json
import os
import subprocess
import sys
import time
import urllib.request

import websocket

PROBE = """JSON.stringify({
  live: document.getElementById('live').dataset.state,
  events: Number(document.getElementById('live').dataset.events || 0),
  jobs: Array.from(document.querySelectorAll('#jobs tr[data-job]'), (r) => r.dataset.job),
  incidents: document.querySelectorAll('#incidents .incident').length,
  phases: Array.from(document.querySelectorAll('#incidents .phase[data-phase]'), (p) => p.dataset.phase),
  same: window.__same === 1,
  title: document.getElementById('job-title').textContent,
  errors: window.__errors || [],
})"""

# Collects uncaught errors of the page (installed before its scripts run).
CATCH = """window.__errors = [];
window.addEventListener('error', (e) => window.__errors.push(String(e.message)));
window.addEventListener('unhandledrejection', (e) => window.__errors.push(String(e.reason)));"""


class page:
    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=30,
                                              suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method,
                                 "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(method + ": " + json.dumps(msg["error"]))
                return msg.get("result", {})

    def probe(self):
        r = self.call("Runtime.evaluate", expression=PROBE, returnByValue=True)
        if "exceptionDetails" in r or "value" not in r.get("result", {}):
            return None  # not the dashboard yet
        return json.loads(r["result"]["value"])


def wait_for(p, what, ok, seconds):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            last = p.probe()
        except RuntimeError:
            last = None  # the page is between documents
        if last is not None and ok(last):
            return last
        time.sleep(0.1)
    print(json.dumps({"failed": "timed out waiting for " + what,
                      "page": last}))
    sys.exit(1)


def main(argv):
    if "--" not in argv or argv.index("--") != 5:
        sys.stderr.write(__doc__)
        return 2
    chromium, profile, url, jobs = argv[1:5]
    jobs = int(jobs)
    sim = argv[6:]
    browser = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
         "--no-first-run", "--user-data-dir=" + profile,
         "--remote-debugging-port=0", "--remote-allow-origins=*",
         "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file) and time.monotonic() < deadline:
            time.sleep(0.05)
        # Chromium writes the file as it opens the port: on a busy machine
        # the first reads may find the file half written or the port not
        # yet answering.
        targets = None
        while targets is None:
            try:
                with open(port_file) as f:
                    port = f.readline().strip()
                with urllib.request.urlopen("http://127.0.0.1:" + port
                                            + "/json/list") as r:
                    targets = [t for t in json.load(r)
                               if t.get("type") == "page"]
            except (OSError, ValueError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
        p = page(targets[0]["webSocketDebuggerUrl"])
        p.call("Page.enable")
        p.call("Page.addScriptToEvaluateOnNewDocument", source=CATCH)
        p.call("Page.navigate", url=url)
        wait_for(p, "the watch to open with no job listed",
                 lambda s: s["live"] == "live" and not s["jobs"], 20)
        # Marks this document: a reload would lose the mark.
        p.call("Runtime.evaluate", expression="window.__same = 1")
        done = subprocess.run(sim, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=60)
        if done.returncode != 0:
            print(json.dumps({"failed": "the simulator failed",
                              "output": done.stdout.decode(errors="replace")}))
            return 1
        # The events counted by the page show that the watch brought them.
        seen = wait_for(p, "the jobs and the incident to appear",
                        lambda s: len(s["jobs"]) == jobs
                        and s["incidents"] >= 1 and "result" in s["phases"]
                        and s["events"] > 0, 10)
        last = seen["jobs"][-1]
        # A cell without a link: the row itself opens the job.
        p.call("Runtime.evaluate", expression=(
            "document.querySelector('#jobs tr[data-job=\"%s\"] td:nth-child(2)')"
            ".click()" % last))
        seen["clicked"] = wait_for(
            p, "the clicked job's incidents",
            lambda s: s["title"] == "Incidents of " + last
            and s["incidents"] >= 1 and "result" in s["phases"], 10)
        print(json.dumps(seen))
        return 0
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
