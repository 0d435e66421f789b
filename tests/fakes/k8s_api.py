# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small fake Kubernetes API server (stdlib http.server on 127.0.0.1, random port) that records requests.

It serves what kubernetes.core's ``k8s_info``/``k8s`` (discovery + nodes get/patch) and ``k8s_drain`` (nodes
get/patch, pods list/get/delete, evictions) need, plus ``/version``. State: nodes, pods and PodDisruptionBudgets in
memory. Pods, budgets and evictions follow the real API's contract (tests/fakes/k8s_pods.py): an eviction answers
429 while a budget that selects the pod allows no disruption, and a deleted pod terminates over its grace period
(``grace_scale`` real seconds per second of grace, on ``clock``). ``fail_evictions`` makes every eviction answer 500
(a drain that cannot finish). Every recorded request carries the ``code`` it was answered with.

It also serves the NVIDIA GPU Operator's ClusterPolicy (``nvidia.com/v1``, cluster-scoped, plural
``clusterpolicies``): discovery, get, list, update (PUT, resourceVersion checked) and patch as JSON merge patch,
strategic merge patch (treated as a merge patch here; a real API server refuses it for custom resources) and JSON
patch (RFC 6902). Every stored change bumps ``metadata.resourceVersion`` (and ``metadata.generation`` when the spec
changed); ``dryRun`` answers without storing. By default the fake holds ``cluster-policy`` with
``spec.gds.enabled: false`` and a driver section (``DEFAULT_CLUSTER_POLICY_SPEC``).

Callables in ``api.observers`` are called before every request is answered, under the lock, as
``observer(api, method, path, query)``; tests/fakes/gpu_operator.py models the GPU Operator's pods across a reboot
with one. List requests honour equality-based ``labelSelector`` terms (``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``)
and the ``spec.nodeName`` field selector of pods. A node's ``status.nodeInfo`` (``kernelVersion``, ``bootID``)
comes from its ``node_info``.

Callables in ``api.hooks`` are called after every stored change of a node or a ClusterPolicy, under the lock, as
``hook(api, kind, name, before, after)``; a test models a controller (the GPU Operator) with them.

    api = FakeK8s(nodes={"node1": {"unschedulable": False, "labels": {}}}, pods=[("default", "job-1", "node1")],
                  pdbs=[{"namespace": "default", "name": "job", "match_labels": {"app": "job"}, "min_available": 1}])
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

from k8s_patch import PatchError, json_patch, merge_patch  # noqa: F401 (re-exported) pylint: disable=import-error
from k8s_pods import PodsMixin  # pylint: disable=import-error

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
NVIDIA_RESOURCES = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "nvidia.com/v1",
    "resources": [{"name": "clusterpolicies", "singularName": "clusterpolicy", "namespaced": False,
                   "kind": "ClusterPolicy", "verbs": ["get", "list", "patch", "update"]}],
}
API_GROUPS = [("policy", "v1"), ("nvidia.com", "v1")]
CLUSTER_POLICIES = "/apis/nvidia.com/v1/clusterpolicies"
DEFAULT_CLUSTER_POLICY_SPEC = {
    "operator": {"defaultRuntime": "containerd"},
    "driver": {"enabled": True, "useOpenKernelModules": True, "repository": "registry.invalid/nvidia",
               "image": "driver", "version": "570.124.06",
               "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%",
                                 "drain": {"enable": False}}},
    "gds": {"enabled": False, "repository": "registry.invalid/nvidia/cloud-native", "image": "nvidia-fs",
            "version": "2.20.5"},
    "devicePlugin": {"enabled": True},
}
NODE_INFO = {  # every field of NodeSystemInfo is required
    "architecture": "amd64", "bootID": "boot-0", "containerRuntimeVersion": "containerd://1.7.24",
    "kernelVersion": "6.1.0-50-amd64", "kubeProxyVersion": "v1.30.0", "kubeletVersion": "v1.30.0",
    "machineID": "0" * 32, "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12 (bookworm)",
    "systemUUID": "00000000-0000-0000-0000-000000000000",
}
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class FakeK8s(PodsMixin):
    def __init__(self, nodes=None, pods=None, fail_evictions=False, cluster_policies=None, pdbs=None,
                 grace_scale=0.05, clock=time.monotonic):
        self.lock = threading.Lock()
        self.requests = []
        self.hooks = []
        self.observers = []
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
                "status": {"conditions": [{"type": "Ready", "status": "True"}],
                           "nodeInfo": dict(NODE_INFO, **spec.get("node_info", {}))},
            }
        self._init_pods(pods, pdbs, grace_scale, clock)
        if cluster_policies is None:
            cluster_policies = {"cluster-policy": DEFAULT_CLUSTER_POLICY_SPEC}
        self.cluster_policies = {}
        for name, spec in cluster_policies.items():
            self.cluster_policies[name] = {
                "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                "metadata": {"name": name, "uid": "uid-cp-" + name, "resourceVersion": str(self.rv),
                             "generation": 1, "creationTimestamp": "2025-01-01T00:00:00Z"},
                "spec": copy.deepcopy(spec),
                "status": {"state": "ready", "namespace": "gpu-operator"},
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
                body = self._body() if method in ("POST", "PATCH", "PUT", "DELETE") else None
                code, doc = api.dispatch(method, u.path, parse_qs(u.query),
                                         body, self.headers.get("Content-Type", ""))
                data = json.dumps(doc).encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                retry = ((doc.get("details") or {}) if isinstance(doc, dict) else {}).get("retryAfterSeconds")
                if retry:   # the apiserver writes a Status's retryAfterSeconds as the Retry-After header too
                    self.send_header("Retry-After", str(retry))
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

    def cluster_policy(self, name="cluster-policy"):
        with self.lock:
            return copy.deepcopy(self.cluster_policies[name])

    def _changed(self, kind, name, before, after):
        for hook in self.hooks:
            hook(self, kind, name, copy.deepcopy(before), copy.deepcopy(after))

    # ------------------------------------------------------------------ API
    @staticmethod
    def status(code, reason, msg):
        return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                      "message": msg, "code": code}

    def dispatch(self, method, path, query, body, ctype):
        with self.lock:
            rec = {"method": method, "path": path, "query": dict((k, v[0]) for k, v in query.items()),
                   "body": body, "content_type": ctype, "time": time.time()}
            self.requests.append(rec)
            self._reap()
            for observer in self.observers:
                observer(self, method, path.rstrip("/"), query)
            code, doc = self._dispatch(method, path.rstrip("/"), query, body, ctype)
            rec["code"] = code
            return code, doc

    def _dispatch(self, method, path, query, body, ctype=""):
        parts = [p for p in path.split("/") if p]
        if path == "/version":
            return 200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0", "platform": "linux/amd64"}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if path == "/apis":
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g, v) for g, v in API_GROUPS]}
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in dict(API_GROUPS):
            doc = _group(parts[1], dict(API_GROUPS)[parts[1]])
            doc.update(kind="APIGroup", apiVersion="v1")
            return 200, doc
        if path == "/api/v1":
            return 200, API_RESOURCES
        if path == "/apis/policy/v1":
            return 200, POLICY_RESOURCES
        if path == "/apis/nvidia.com/v1":
            return 200, NVIDIA_RESOURCES
        if path == CLUSTER_POLICIES or path.startswith(CLUSTER_POLICIES + "/"):
            return self._cluster_policies(method, parts[4:], query, body, ctype)
        if parts[:3] == ["api", "v1", "nodes"]:
            return self._nodes(method, parts[3:], body, query)
        if parts[:3] == ["api", "v1", "pods"] and method == "GET":
            return 200, self._pod_list(query)
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5 and parts[4] == "pods":
            if len(parts) == 5 and method == "GET":
                return 200, self._pod_list(query, parts[3])
            answer = self._pod_route(method, parts[3], parts[5:], body) if len(parts) > 5 else None
            if answer is not None:
                return answer
        if parts[:4] == ["apis", "policy", "v1", "poddisruptionbudgets"] and len(parts) == 4:
            return self._pdb_route(method, None, [])
        if parts[:4] == ["apis", "policy", "v1", "namespaces"] and len(parts) in (6, 7) and \
                parts[5] == "poddisruptionbudgets":
            return self._pdb_route(method, parts[4], parts[6:])
        return self.status(404, "NotFound", "the fake API does not serve %s %s" % (method, path))

    def _pod_list(self, query, ns=None):
        sel = (query.get("fieldSelector") or [""])[0]
        want = None
        for term in sel.split(","):
            if term.startswith("spec.nodeName="):
                want = term.split("=", 1)[1]
        match = label_matcher((query.get("labelSelector") or [""])[0])
        items = [p for (pns, _n), p in sorted(self.pods.items())
                 if (ns is None or pns == ns) and (want is None or p["spec"]["nodeName"] == want)
                 and match(p["metadata"].get("labels") or {})]
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.rv)},
                "items": copy.deepcopy(items)}

    def _nodes(self, method, rest, body, query=None):
        if not rest:
            if method == "GET":
                match = label_matcher(((query or {}).get("labelSelector") or [""])[0])
                return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.rv)},
                             "items": [copy.deepcopy(n) for _k, n in sorted(self.nodes.items())
                                       if match(n["metadata"].get("labels") or {})]}
            return self.status(405, "MethodNotAllowed", "only GET on the node list")
        name = rest[0]
        if name not in self.nodes:
            return self.status(404, "NotFound", 'nodes "%s" not found' % name)
        if method == "GET":
            return 200, copy.deepcopy(self.nodes[name])
        if method == "PATCH":
            if isinstance(body, list):
                return self.status(415, "UnsupportedMediaType", "JSON patch is not served by the fake")
            before = self.nodes[name]
            node = merge_patch(before, body or {})
            if node == before:  # a patch that changes nothing is no write: no new resourceVersion
                return 200, copy.deepcopy(node)
            self.rv += 1
            node["metadata"]["resourceVersion"] = str(self.rv)
            self.nodes[name] = node
            self._changed("Node", name, before, node)
            return 200, copy.deepcopy(node)
        return self.status(405, "MethodNotAllowed", "%s on a node" % method)

    def _cluster_policies(self, method, rest, query, body, ctype):
        if not rest:
            if method == "GET":
                return 200, {"kind": "ClusterPolicyList", "apiVersion": "nvidia.com/v1",
                             "metadata": {"resourceVersion": str(self.rv)},
                             "items": [copy.deepcopy(o) for _k, o in sorted(self.cluster_policies.items())]}
            return self.status(405, "MethodNotAllowed", "only GET on the ClusterPolicy list")
        name = rest[0]
        if len(rest) > 1:
            return self.status(404, "NotFound", "the fake API serves no subresource %s of clusterpolicies" % rest[1])
        current = self.cluster_policies.get(name)
        if current is None:
            return self.status(404, "NotFound", 'clusterpolicies.nvidia.com "%s" not found' % name)
        if method == "GET":
            return 200, copy.deepcopy(current)
        if method == "PATCH":
            mtype = ctype.split(";")[0].strip().lower()
            try:
                if mtype == JSON_PATCH:
                    new = json_patch(current, body)
                elif mtype in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
                    if not isinstance(body, dict):
                        raise PatchError("a merge patch is a JSON object")
                    new = merge_patch(current, body)
                else:
                    return self.status(415, "UnsupportedMediaType",
                                       "the body of the request was in an unknown format - accepted media types "
                                       "include: %s, %s, %s" % (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH))
            except PatchError as exc:
                return self.status(422, "Invalid", 'ClusterPolicy "%s" is invalid: %s' % (name, exc))
        elif method == "PUT":
            if not isinstance(body, dict):
                return self.status(400, "BadRequest", "the body of an update is a ClusterPolicy object")
            new = copy.deepcopy(body)
        else:
            return self.status(405, "MethodNotAllowed", "%s on a ClusterPolicy" % method)
        return self._store_cluster_policy(name, current, new, query)

    def _store_cluster_policy(self, name, current, new, query):
        meta = new.get("metadata")
        if not isinstance(meta, dict) or not isinstance(new.get("spec", {}), dict):
            return self.status(422, "Invalid", 'ClusterPolicy "%s" is invalid: metadata and spec are objects' % name)
        if meta.get("name", name) != name:
            return self.status(400, "BadRequest", "the name of the object (%s) does not match the name on the URL "
                                                  "(%s)" % (meta.get("name"), name))
        sent_rv = meta.get("resourceVersion")
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            return self.status(409, "Conflict", 'Operation cannot be fulfilled on clusterpolicies.nvidia.com "%s": '
                                                "the object has been modified; please apply your changes to the "
                                                "latest version and try again" % name)
        for key in ("apiVersion", "kind"):
            new[key] = current[key]
        for key in ("name", "uid", "creationTimestamp", "generation"):
            meta[key] = current["metadata"][key]
        new.setdefault("spec", {})
        new["status"] = copy.deepcopy(current.get("status", {}))  # status is a subresource: untouched here
        if new == current:
            return 200, copy.deepcopy(current)
        if new["spec"] != current["spec"]:
            meta["generation"] = current["metadata"]["generation"] + 1
        if "dryRun" in query:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
            return 200, new
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self.cluster_policies[name] = new
        self._changed("ClusterPolicy", name, current, new)
        return 200, copy.deepcopy(new)


def label_matcher(selector):
    """A predicate over a labels dict for an equality-based label selector (set-based terms are not served)."""
    terms = [t.strip() for t in selector.split(",") if t.strip()]

    def match(labels):
        for t in terms:
            if "!=" in t:
                k, v = t.split("!=", 1)
                if labels.get(k.strip()) == v.strip():
                    return False
            elif "=" in t:
                k, v = t.replace("==", "=").split("=", 1)
                if labels.get(k.strip()) != v.strip():
                    return False
            elif t.startswith("!"):
                if t[1:] in labels:
                    return False
            elif t not in labels:
                return False
        return True
    return match


def _group(name, version):
    gv = {"groupVersion": "%s/%s" % (name, version), "version": version}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


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
