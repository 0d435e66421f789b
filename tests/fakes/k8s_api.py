# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small fake Kubernetes API server (stdlib http.server on 127.0.0.1, random port) that records requests.

It serves what kubernetes.core's ``k8s_info``/``k8s`` (discovery + nodes get/patch) and ``k8s_drain`` (nodes
get/patch, pods list/get, evictions) need, plus ``/version``. State: nodes and pods in memory. Evicting a pod
deletes it; ``fail_evictions`` makes every eviction answer 500 (a drain that cannot finish).

    api = FakeK8s(nodes={"node1": {"unschedulable": False, "labels": {}}}, pods=[("default", "job-1", "node1")])
    api.start(); api.write_kubeconfig(path); ...; api.requests; api.stop()

Also a CLI for manual use: ``python k8s_api.py --node node1 --pod default/job-1@node1`` prints the URL.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import sys
import threading
import time

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlparse
except ImportError:  # pragma: no cover - Python 2 is not a target of the tests
    raise

API_RESOURCES = {
    "kind": "APIResourceList", "groupVersion": "v1",
    "resources": [
        {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node",
         "verbs": ["get", "list", "patch", "update", "watch"], "shortNames": ["no"]},
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": ["get", "list", "delete", "watch"], "shortNames": ["po"]},
        {"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy", "version": "v1",
         "kind": "Eviction", "verbs": ["create"]},
        {"name": "namespaces", "singularName": "namespace", "namespaced": False, "kind": "Namespace",
         "verbs": ["get", "list"], "shortNames": ["ns"]},
    ],
}
POLICY_RESOURCES = {
    "kind": "APIResourceList", "groupVersion": "policy/v1",
    "resources": [{"name": "poddisruptionbudgets", "singularName": "poddisruptionbudget", "namespaced": True,
                   "kind": "PodDisruptionBudget", "verbs": ["get", "list"], "shortNames": ["pdb"]}],
}


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (also what a strategic merge patch of labels/annotations/spec does here)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class FakeK8s(object):
    def __init__(self, nodes=None, pods=None, fail_evictions=False):
        self.lock = threading.Lock()
        self.requests = []
        self.fail_evictions = fail_evictions
        self.nodes = {}
        self.rv = 100
        for name, spec in (nodes or {}).items():
            self.nodes[name] = {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "uid": "uid-" + name, "resourceVersion": str(self.rv),
                             "labels": dict(spec.get("labels", {})),
                             "annotations": dict(spec.get("annotations", {}))},
                "spec": {"unschedulable": True} if spec.get("unschedulable") else {},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        self.pods = {}
        for ns, name, node in pods or []:
            self.pods[(ns, name)] = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "uid": "uid-%s-%s" % (ns, name),
                             "resourceVersion": str(self.rv),
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name + "-rs",
                                                  "uid": "rs-" + name, "controller": True}]},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
                "status": {"phase": "Running"},
            }
        self.server = None
        self.thread = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def start(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                return

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    return json.loads(raw.decode("utf-8")) if raw else None
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def _handle(self, method):
                u = urlparse(self.path)
                body = self._body() if method in ("POST", "PATCH", "PUT") else None
                code, doc = api.dispatch(method, u.path, parse_qs(u.query),
                                         body, self.headers.get("Content-Type", ""))
                data = json.dumps(doc).encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

            def do_PUT(self):
                self._handle("PUT")

            def do_DELETE(self):
                self._handle("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-k8s")
        self.thread.daemon = True
        self.thread.start()
        return self

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def write_kubeconfig(self, path, context="fake"):
        doc = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "fake-token"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        }
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    # ------------------------------------------------------------------ views for tests
    def mutations(self):
        """Recorded requests that change state (PATCH/POST/PUT/DELETE), in order."""
        return [r for r in self.requests if r["method"] != "GET"]

    def node(self, name):
        with self.lock:
            return copy.deepcopy(self.nodes[name])

    # ------------------------------------------------------------------ API
    @staticmethod
    def status(code, reason, msg):
        return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                      "message": msg, "code": code}

    def dispatch(self, method, path, query, body, ctype):
        with self.lock:
            self.requests.append({"method": method, "path": path, "query": dict((k, v[0]) for k, v in query.items()),
                                  "body": body, "content_type": ctype, "time": time.time()})
            return self._dispatch(method, path.rstrip("/"), query, body)

    def _dispatch(self, method, path, query, body):
        parts = [p for p in path.split("/") if p]
        if path == "/version":
            return 200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0", "platform": "linux/amd64"}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if path == "/apis":
            gv = {"groupVersion": "policy/v1", "version": "v1"}
            return 200, {"kind": "APIGroupList", "apiVersion": "v1",
                         "groups": [{"name": "policy", "versions": [gv], "preferredVersion": gv}]}
        if path == "/api/v1":
            return 200, API_RESOURCES
        if path == "/apis/policy/v1":
            return 200, POLICY_RESOURCES
        if parts[:3] == ["api", "v1", "nodes"]:
            return self._nodes(method, parts[3:], body)
        if parts[:3] == ["api", "v1", "pods"] and method == "GET":
            return 200, self._pod_list(query)
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5 and parts[4] == "pods":
            ns = parts[3]
            if len(parts) == 5 and method == "GET":
                return 200, self._pod_list(query, ns)
            key = (ns, parts[5])
            if len(parts) == 7 and parts[6] == "eviction" and method == "POST":
                if key not in self.pods:
                    return self.status(404, "NotFound", 'pods "%s" not found' % key[1])
                if self.fail_evictions:
                    return self.status(500, "InternalError", "eviction of %s/%s refused by the fake" % key)
                del self.pods[key]
                return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
            if len(parts) == 6 and method == "GET":
                if key in self.pods:
                    return 200, self.pods[key]
                return self.status(404, "NotFound", 'pods "%s" not found' % key[1])
            if len(parts) == 6 and method == "DELETE":
                if self.pods.pop(key, None) is None:
                    return self.status(404, "NotFound", 'pods "%s" not found' % key[1])
                return 200, {"kind": "Status", "status": "Success"}
        if parts[:4] == ["apis", "policy", "v1", "poddisruptionbudgets"] or (
                len(parts) == 6 and parts[:3] == ["apis", "policy", "v1"] and parts[5] == "poddisruptionbudgets"):
            return 200, {"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1", "metadata": {}, "items": []}
        return self.status(404, "NotFound", "the fake API does not serve %s %s" % (method, path))

    def _pod_list(self, query, ns=None):
        sel = (query.get("fieldSelector") or [""])[0]
        want = None
        for term in sel.split(","):
            if term.startswith("spec.nodeName="):
                want = term.split("=", 1)[1]
        items = [p for (pns, _n), p in sorted(self.pods.items())
                 if (ns is None or pns == ns) and (want is None or p["spec"]["nodeName"] == want)]
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.rv)},
                "items": copy.deepcopy(items)}

    def _nodes(self, method, rest, body):
        if not rest:
            if method == "GET":
                return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.rv)},
                             "items": [copy.deepcopy(n) for _k, n in sorted(self.nodes.items())]}
            return self.status(405, "MethodNotAllowed", "only GET on the node list")
        name = rest[0]
        if name not in self.nodes:
            return self.status(404, "NotFound", 'nodes "%s" not found' % name)
        if method == "GET":
            return 200, copy.deepcopy(self.nodes[name])
        if method == "PATCH":
            if isinstance(body, list):
                return self.status(415, "UnsupportedMediaType", "JSON patch is not served by the fake")
            node = merge_patch(self.nodes[name], body or {})
            self.rv += 1
            node["metadata"]["resourceVersion"] = str(self.rv)
            self.nodes[name] = node
            return 200, copy.deepcopy(node)
        return self.status(405, "MethodNotAllowed", "%s on a node" % method)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="fake Kubernetes API server")
    ap.add_argument("--node", action="append", default=[])
    ap.add_argument("--cordoned", action="append", default=[])
    ap.add_argument("--pod", action="append", default=[], help="ns/name@node")
    ap.add_argument("--kubeconfig")
    args = ap.parse_args(argv)
    nodes = dict((n, {"unschedulable": n in args.cordoned}) for n in args.node)
    pods = []
    for p in args.pod:
        nsname, node = p.split("@")
        ns, name = nsname.split("/")
        pods.append((ns, name, node))
    api = FakeK8s(nodes, pods).start()
    if args.kubeconfig:
        api.write_kubeconfig(args.kubeconfig)
    print(api.url)
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        api.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
