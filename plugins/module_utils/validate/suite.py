# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation suite of one node (``fabric_validate``): which runs are possible, the plan, the runs, the doc.

``options(params)`` checks the user's input before anything is touched; ``detect(run, opts, facts)`` says which
tools the node has; ``plan(opts, facts, tools)`` lists the runs (``test``, ``variant``, ``expect``, the argv and the
environment) - a run that is not possible is planned ``not_checked`` with the reason and what to install;
``check.validation.execute`` runs the rest through the one command runner and reads them with ``runs``; ``validate``
does it all and returns the ``validation`` document (docs/validate.md, "The validation playbook") and the
``failures`` the play stops on (``failures``).

The runs:

- ``nccl`` (the network path): ``configured`` (pinned to ``NCCL_NET=IB`` where the node has an RDMA device, so a
  fallback to sockets fails instead of passing slowly), ``gdr_loc`` (``NCCL_NET_GDR_LEVEL=LOC``: the NIC may not
  reach the GPU) and ``socket`` (``NCCL_IB_DISABLE=1``). With several GPUs the ranks talk through the NICs
  (``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1``, NCCL's network transport inside one node); one GPU is one rank,
  whose network verdict is "not exercised".
- ``nccl_intra`` (several GPUs): ``configured`` reads the P2P/NVLS channels; ``host_memory`` disables P2P and NVLS
  (``NCCL_P2P_DISABLE=1 NCCL_NVLS_ENABLE=0``) and must show SHM.
- ``perftest``: ``ib_write_bw --use_cuda=<gpu>`` on the GPU's own NIC (``local_nic``) and on a NIC across the CPU
  (``remote_nic``: not behind the GPU's PCIe switch), server and client on this node through two NICs (or the
  client only, against a server the user runs at ``peer``).
- ``gds``: gdsio ``-x 0`` (``gds_direct``) against ``-x 2`` (``host_buffer``) with ``-V``; else KvikIO's ``cufile``
  API in KvikIO's own compat mode (``compat_on``: POSIX through host memory) and with both compat modes off
  (``compat_off``); else the collection's cuFile program with compat mode allowed and
  forced (``compat_on``: cuFile's POSIX path through host memory) and forbidden (``compat_off``).

Plain Python; commands through ``run(argv, env) -> (rc, out, err)`` with ``run.bin_path(name)``; paths through a
``Sysroot``. Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths

TESTS = ("nccl", "nccl_intra", "perftest", "gds")
RUNTIMES = ("podman", "docker")
NCCL_DEBUG = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH,ENV,P2P"}
NCCL_DEBUG_INTRA = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH,ENV,P2P,SHM"}
# CUDA numbers GPUs fastest first unless told otherwise; the suite's GPU indexes are the facts' (PCI bus order)
PCI_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
THROUGH_NET = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
GDSIO_DIRS = ("/usr/local/cuda/gds/tools",)
MIB = 1 << 20
MAX_SIZE = 16 << 30
MAX_GDS_MIB = 4096
DEFAULTS = {"tests": list(TESTS), "negative": True, "node": None, "nccl_tests_path": None, "image": None,
            "container_runtime": "auto", "gpus": None, "size": 64 * MIB, "timeout": 300, "gds_dir": "/var/tmp",
            "python": None, "peer": None, "iters": 20}
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_PEER = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9A-Fa-f:]{2,39}|[A-Za-z0-9][A-Za-z0-9.-]{0,252}")
_PATH = re.compile(r"(?:/[A-Za-z0-9._+,:=@-]+)+/?")

# what the node's Python says about PyTorch: one JSON line (the import alone takes seconds)
TORCH_CHECK = ("import json\ntry:\n import torch\n d={'torch':torch.__version__,'cuda':torch.cuda.is_available(),"
               "'gpus':torch.cuda.device_count() if torch.cuda.is_available() else 0,'nccl':'.'.join(str(v) for v in "
               "torch.cuda.nccl.version()) if torch.cuda.is_available() else None}\nexcept Exception as e:\n"
               " d={'torch':None,'error':type(e).__name__+': '+str(e)[:200]}\nprint(json.dumps(d))\n")
# the benchmark module too: it needs dask (format_bytes, parse_bytes), which KvikIO itself does not depend on
KVIKIO_CHECK = "import kvikio\nimport kvikio.benchmarks.single_node_io\nprint(kvikio.__version__)\n"


class SuiteError(ValueError):
    """Bad input: the module fails with this message before anything is run."""


def options(params):
    """The checked options (``DEFAULTS`` for what ``params`` leaves None); SuiteError names the bad one."""
    o = dict(DEFAULTS)
    o.update(dict((k, v) for k, v in (params or {}).items() if v is not None and k in DEFAULTS))
    tests = list(o["tests"])
    bad = [t for t in tests if t not in TESTS]
    if bad or not tests:
        raise SuiteError("tests: %s is not one of %s" % (", ".join(bad) or "an empty list", ", ".join(TESTS)))
    o["tests"] = [t for t in TESTS if t in tests]
    for key, rx in (("image", _IMAGE), ("node", _NODE), ("peer", _PEER)):
        if o[key] is not None and (not isinstance(o[key], str) or not rx.fullmatch(o[key]) or "/../" in
                                   "/%s/" % o[key]):
            raise SuiteError("%s: %r is not a valid %s" % (key, o[key], "address or host name" if key == "peer"
                                                           else "value (letters, digits, . _ - / : @ +)"))
    for key in ("nccl_tests_path", "gds_dir", "python"):
        if o[key] is not None and (not isinstance(o[key], str) or not _PATH.fullmatch(o[key]) or ".." in
                                   o[key].split("/")):
            raise SuiteError("%s: %r is not an absolute path of portable characters" % (key, o[key]))
    if o["container_runtime"] not in ("auto",) + RUNTIMES:
        raise SuiteError("container_runtime must be auto, podman or docker")
    if o["image"] and o["nccl_tests_path"]:
        raise SuiteError("nccl_tests_path and image are exclusive: the image brings its own all_reduce_perf")
    for key, lo, hi in (("size", 64, MAX_SIZE), ("timeout", 10, 86400), ("iters", 1, 10000)):
        v = o[key]
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise SuiteError("%s must be an integer from %d to %d" % (key, lo, hi))
    if o["gpus"] is not None:
        g = o["gpus"]
        bad = [i for i in g if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i <= 63] if isinstance(
            g, list) else [g]
        if bad or not g or len(set(g)) != len(g):
            raise SuiteError("gpus must be a list of distinct GPU indexes (0 to 63)")
    return o


def _run_json(run, argv, env=None):
    rc, out, _err = run(argv, env)
    for line in reversed((out or "").strip().splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        return doc if isinstance(doc, dict) else None
    return None


def detect(run, opts, facts):
    """``{all_reduce_perf, runtime, torch: {...}|None, ib_write_bw, gdsio, kvikio, python, gpus: [index],
    rdma: bool, nvfs_loaded}``: which of the suite's tools this node has (a path, or None)."""
    t = {"python": opts["python"], "all_reduce_perf": None, "runtime": None, "torch": None, "ib_write_bw": None,
         "gdsio": None, "kvikio": None}
    need_nccl = any(x in opts["tests"] for x in ("nccl", "nccl_intra"))
    if need_nccl and opts["image"]:
        names = RUNTIMES if opts["container_runtime"] == "auto" else (opts["container_runtime"],)
        t["runtime"] = next((p for p in (run.bin_path(n) for n in names) if p), None)
    elif need_nccl:
        path = opts["nccl_tests_path"]
        if path:
            # programs and work files are the ones the commands see: real paths, not below the sysroot (which holds
            # what is read: /proc, /sys)
            if os.path.isdir(path):
                path = path.rstrip("/") + "/all_reduce_perf"
            t["all_reduce_perf"] = path if os.access(path, os.X_OK) else None
        else:
            t["all_reduce_perf"] = run.bin_path("all_reduce_perf")
        if not t["all_reduce_perf"] and not opts["nccl_tests_path"]:
            t["torch"] = _run_json(run, [t["python"], "-c", TORCH_CHECK])
    if "perftest" in opts["tests"]:
        t["ib_write_bw"] = run.bin_path("ib_write_bw")
    if "gds" in opts["tests"]:
        t["gdsio"] = run.bin_path("gdsio") or next((d + "/gdsio" for d in GDSIO_DIRS
                                                   if os.access(d + "/gdsio", os.X_OK)), None)
        if not t["gdsio"]:
            rc, out, _err = run([t["python"], "-c", KVIKIO_CHECK])
            t["kvikio"] = out.strip() if rc == 0 and out.strip() else None
    gpus = [g["index"] for g in facts.get("gpus") or []]
    if not gpus and t["torch"] and t["torch"].get("cuda"):
        gpus = list(range(int(t["torch"].get("gpus") or 0)))
    if opts["gpus"] is not None:
        gpus = [g for g in opts["gpus"] if g in gpus]
    t["gpus"] = gpus
    t["rdma"] = any(r.get("ibdev") for r in facts.get("rails") or [])
    t["nvfs_loaded"] = bool((facts.get("nvidia_fs") or {}).get("loaded"))
    return t


def _run(test, variant, expect, tool=None, status=None, reason=None, command=None, env=None, **extra):
    r = {"id": "%s.%s" % (test, variant), "test": test, "variant": variant, "expect": expect, "status": status,
         "reason": reason, "tool": tool, "command": command or [], "env": env or {}, "rc": None, "metric": None,
         "bandwidth": None, "cpu_s": None, "wall_s": None, "verdict": None, "counters": {}}
    r.update(extra)
    return r


def _skip(test, variant, expect, reason, tool=None):
    return _run(test, variant, expect, tool, "not_checked", reason)


NCCL_MISSING = ("nccl-tests (all_reduce_perf) is not installed: install nccl-tests, give nccl_tests_path or an image "
                "with it, or PyTorch with CUDA in the node's Python (python option)")


def _nccl_variants(test, ranks, rdma, negative):
    """(variant, expect, env, why not) of one NCCL test."""
    if test == "nccl_intra":
        base = dict(NCCL_DEBUG_INTRA)
        out = [("configured", "direct", base, None)]
        if negative:
            out.append(("host_memory", "fallback", dict(base, NCCL_P2P_DISABLE="1", NCCL_NVLS_ENABLE="0"), None))
        return out
    base = dict(NCCL_DEBUG, **(THROUGH_NET if ranks > 1 else {}))
    pin = {"NCCL_NET": "IB"} if rdma else {}
    out = [("configured", "direct", dict(base, **pin), None)]
    if negative:
        why = None
        if ranks < 2:
            why = ("one rank: nothing crosses the network, a forced fallback cannot show (needs two GPUs or more on "
                   "the node)")
        elif not rdma:
            why = "no RDMA device: there is no GPUDirect RDMA path to force off"
        out.append(("gdr_loc", "fallback", dict(base, NCCL_NET_GDR_LEVEL="LOC", **pin), why))
        out.append(("socket", "fallback", dict(base, NCCL_IB_DISABLE="1"), why))
    return out


def _nccl_argv(opts, tools, ranks, env, workdir):
    """(tool, argv, env) of one NCCL run: all_reduce_perf on the node or in the image, else the torch program."""
    size = str(opts["size"])
    if tools["all_reduce_perf"] or tools["runtime"]:
        args = ["-b", size, "-e", size, "-f", "2", "-g", str(ranks), "-n", str(opts["iters"]), "-w", "5", "-c", "1"]
        if tools["all_reduce_perf"]:
            return "all_reduce_perf", [tools["all_reduce_perf"]] + args, env
        rt = tools["runtime"]
        argv = [rt, "run", "--rm", "--network=host", "--ipc=host", "--cap-add=IPC_LOCK", "--ulimit", "memlock=-1:-1"]
        argv.append("--device=nvidia.com/gpu=all" if os.path.basename(rt) == "podman" else "--gpus=all")
        argv.append("--device=/dev/infiniband")
        for k in sorted(env):
            argv += ["-e", "%s=%s" % (k, env[k])]
        return "all_reduce_perf", argv + [opts["image"], "all_reduce_perf"] + args, {}
    script = os.path.join(workdir, "allreduce_torch.py")
    store = os.path.join(workdir, "store")
    return "torch.distributed", [tools["python"], script, "--gpus", str(ranks), "--size", size, "--iters",
                                 str(opts["iters"]), "--store", store], env


def _plan_nccl(test, opts, tools, workdir):
    gpus = tools["gpus"]
    ranks = len(gpus)
    have = tools["all_reduce_perf"] or tools["runtime"] or (tools["torch"] or {}).get("cuda")
    variants = _nccl_variants(test, ranks, tools["rdma"], opts["negative"])
    out = []
    for variant, expect, env, why in variants:
        if opts["image"] and not tools["runtime"]:
            why = why or "image %s given but neither podman nor docker is installed" % opts["image"]
        elif not have:
            why = why or (NCCL_MISSING if not (tools["torch"] or {}).get("torch")
                          else "PyTorch %s sees no CUDA GPU" % tools["torch"]["torch"])
        if not ranks:
            why = "no GPU on this node"
        elif test == "nccl_intra" and ranks < 2:
            why = "one GPU: there is no path between GPUs of this node to exercise"
        if why:
            out.append(_skip(test, variant, expect, why))
            continue
        env = dict(env, CUDA_VISIBLE_DEVICES=",".join(str(g) for g in gpus), **PCI_ORDER)
        tool, argv, run_env = _nccl_argv(opts, tools, ranks, env, workdir)
        out.append(_run(test, variant, expect, tool, command=argv, env=run_env, ranks=ranks))
    return out


def _remote_nic(facts, gpu_bdf, local_ibdev):
    """The rail of a NIC away from the GPU (SYS before NODE; never PIX/PXB), or None."""
    matrix = (facts.get("matrix") or {}).get(gpu_bdf) or {}
    rails = dict((f, r) for r in facts.get("rails") or [] for f in r.get("pci_functions") or [])
    best = None
    for nic, rel in sorted(matrix.items()):
        r = rails.get(nic)
        if r is None or r.get("ibdev") == local_ibdev or rel not in ("NODE", "SYS"):
            continue
        if best is None or (rel == "SYS" and best[0] != "SYS"):
            best = (rel, r)
    return best


def _perftest_argv(tools, opts, rail, gpu, tcp_port, server=None):
    """``ib_write_bw`` on ``rail`` (a rails fact), with a buffer in GPU ``gpu`` unless None; ``-x`` the rail's RoCE
    v2 GID index when it has one."""
    argv = [tools["ib_write_bw"], "-d", rail["ibdev"], "-i", str(rail.get("port") or 1)]
    if gpu is not None:
        argv.append("--use_cuda=%d" % gpu)
    argv += ["-s", str(min(opts["size"], 8 * MIB)), "-n", "1000", "-F", "-p", str(tcp_port)]
    if rail.get("roce_v2_ipv4_gid_index") is not None:
        argv += ["-x", str(rail["roce_v2_ipv4_gid_index"])]
    return argv + [server] if server else argv


def _plan_perftest(opts, tools, facts):
    pairs = [p for p in facts.get("pairing") or [] if p.get("gpu_index") in tools["gpus"]]
    if not tools["ib_write_bw"]:
        why = "perftest (ib_write_bw) is not installed: install perftest (built with CUDA for --use_cuda)"
    elif not tools["rdma"]:
        why = "no RDMA device on this node: nothing for ib_write_bw to test"
    elif not pairs:
        why = "no GPU<->NIC pair in the node's pairing (%s)" % (facts.get("pairing_reason") or "no pairing")
    else:
        why = None
    if why:
        return [_skip("perftest", v, "direct", why, "ib_write_bw") for v in ("local_nic", "remote_nic")]
    rails = facts.get("rails") or []
    out = []
    port = 18515
    for p in pairs:
        g = p["gpu_index"]
        remote = _remote_nic(facts, p["gpu"], p["ibdev"])
        local = next((r for r in rails if r.get("ibdev") == p["ibdev"] and r.get("port") == p["port"]),
                     {"ibdev": p["ibdev"], "port": p["port"]})
        for variant, rail, rel in (("local_nic", local, p.get("relation")),
                                   ("remote_nic", remote[1] if remote else None, remote[0] if remote else None)):
            rid = "perftest.gpu%d.%s" % (g, variant)
            if rail is None:
                r = _skip("perftest", variant, "direct", "no NIC away from GPU %d (every RDMA NIC is behind its "
                          "PCIe switch)" % g, "ib_write_bw")
                r["id"] = rid
                out.append(r)
                continue
            port += 1
            server = _perftest_argv(tools, opts, rail, g, port)
            client_rail = next((r for r in rails if r.get("ibdev") and r["ibdev"] != rail["ibdev"]), rail)
            # the write lands in the server's buffer: on this node the server holds the GPU buffer behind the NIC
            # under test and the client sends from host memory; against a peer the client's GPU buffer is read
            client = _perftest_argv(tools, opts, client_rail if not opts["peer"] else rail,
                                    g if opts["peer"] else None, port, opts["peer"] or "127.0.0.1")
            r = _run("perftest", variant, "direct", "ib_write_bw", command=client, env=dict(PCI_ORDER), gpu=g,
                     nic=rail["ibdev"],
                     relation=rel, server_command=None if opts["peer"] else server)
            r["id"] = rid
            out.append(r)
    return out


def _plan_gds(opts, tools, workdir):
    gpus = tools["gpus"]
    if not gpus:
        return [_skip("gds", v, e, "no GPU on this node") for v, e in (("compat_on", "fallback"),
                                                                       ("compat_off", "direct"))]
    g = str(gpus[0])
    mib = max(1, min(opts["size"] // MIB, MAX_GDS_MIB))
    data = os.path.join(workdir, "data")
    out = []
    if tools["gdsio"]:
        for variant, expect, x in (("gds_direct", "direct", "0"), ("host_buffer", "fallback", "2")):
            argv = [tools["gdsio"], "-D", data, "-d", g, "-w", "1", "-s", "%dM" % mib, "-i", "1M", "-x", x, "-I",
                    "1", "-V"]
            out.append(_run("gds", variant, expect, "gdsio", command=argv, env=dict(PCI_ORDER), gpu=int(g)))
        return out
    if tools["kvikio"]:
        # KvikIO 26.10: kvikio/benchmarks/single_node_io.py (-d, --nbytes, --nruns, --api; the GPU by CUDA's own
        # means) and KVIKIO_COMPAT_MODE (ON|OFF|AUTO, kvikio/defaults.py). compat_on is KvikIO's own compat mode:
        # POSIX through a host buffer, libcufile not loaded - the host leg of the comparison on every node;
        # compat_off forbids both compat modes (KvikIO's, and cuFile's through a generated cufile.json): GDS or
        # nothing
        for variant, expect, compat in (("compat_on", "fallback", True), ("compat_off", "direct", False)):
            argv = [tools["python"], "-m", "kvikio.benchmarks.single_node_io", "-d", data, "--nbytes",
                    "%dMiB" % mib, "--nruns", "1", "--api", "cufile"]
            env = dict(PCI_ORDER, CUDA_VISIBLE_DEVICES=g, KVIKIO_COMPAT_MODE="ON" if compat else "OFF")
            if not compat:
                env.update(CUFILE_ENV_PATH_JSON=os.path.join(workdir, "cufile-%s.json" % variant),
                           CUFILE_ALLOW_COMPAT_MODE="false",
                           CUFILE_LOGFILE_PATH=os.path.join(workdir, "cufile.log"))
            out.append(_run("gds", variant, expect, "kvikio", command=argv, env=env, gpu=int(g)))
        return out
    script = os.path.join(workdir, "cufile_probe.py")
    # compat_on is cuFile's own host path: compat mode allowed and forced (CUFILE_FORCE_COMPAT_MODE), so it is the
    # fallback leg of the comparison on every node; compat_off forbids it: GDS or nothing
    for variant, compat, expect in (("compat_on", True, "fallback"), ("compat_off", False, "direct")):
        cfg = os.path.join(workdir, "cufile-%s.json" % variant)
        env = {"CUFILE_ENV_PATH_JSON": cfg, "CUFILE_ALLOW_COMPAT_MODE": "true" if compat else "false",
               "CUFILE_FORCE_COMPAT_MODE": "true" if compat else "false",
               "CUFILE_LOGFILE_PATH": os.path.join(workdir, "cufile.log")}
        env.update(PCI_ORDER)
        argv = [tools["python"], script, "--dir", data, "--size", str(mib * MIB), "--gpu", g]
        out.append(_run("gds", variant, expect, "cufile_probe", command=argv, env=env, gpu=int(g)))
    return out


def plan(opts, tools, facts, workdir):
    """Every run of the suite, in order; runs that cannot happen are ``not_checked`` with the reason."""
    out = []
    for test in opts["tests"]:
        if test in ("nccl", "nccl_intra"):
            out += _plan_nccl(test, opts, tools, workdir)
        elif test == "perftest":
            out += _plan_perftest(opts, tools, facts)
        else:
            out += _plan_gds(opts, tools, workdir)
    for r in out:
        if r["status"] is None and r["tool"] in ("all_reduce_perf", "torch.distributed", "ib_write_bw", "gdsio",
                                                 "kvikio"):
            r["metric"] = r["id"] + (".busbw" if r["test"].startswith("nccl") else ".bw")
        elif r["status"] is None:
            r["metric"] = r["id"] + ".bw"
    return out


def failures(doc):
    """What the play fails the node on: a forced-fallback run that did not flip while its direct run was direct,
    and a ``configured`` run that expects the direct path and could exercise it but did not take it (an error of
    a pinned run included: the pin turned a fallback into a failure)."""
    out = []
    runs = doc.get("runs") or []
    for r in runs:
        v = r.get("verdict") or {}
        if r["variant"] == "configured" and r["expect"] == "direct":
            if r["status"] == "error":
                out.append("%s failed: %s" % (r["id"], r["reason"]))
            elif r["status"] == "ok" and (r.get("ranks") or 0) > 1 and v.get("state") != paths.DIRECT:
                out.append("%s expected the direct path and shows %s: %s" % (r["id"], paths.label(v), v.get("reason")))
    for r in runs:
        if r["expect"] != "fallback" or r["status"] == "not_checked":
            continue
        direct = [d for d in runs if d["test"] == r["test"] and d["expect"] == "direct" and d["status"] == "ok"
                  and (d.get("verdict") or {}).get("state") == paths.DIRECT and d.get("gpu") == r.get("gpu")]
        if not direct:
            continue
        v = r.get("verdict") or {}
        if r["status"] == "error":
            out.append("%s (forced fallback) failed: %s" % (r["id"], r["reason"]))
        elif v.get("state") != paths.FALLBACK:
            out.append("%s (forced fallback) did not flip: it shows %s like %s; a silent fallback would not be "
                       "detected" % (r["id"], paths.label(v), direct[0]["id"]))
    return out


def verdict_line(r):
    """One line per run for the play's output."""
    v = r.get("verdict")
    bw = " %s" % paths.rate(r["bandwidth"]) if r.get("bandwidth") is not None else ""
    if r["status"] == "not_checked":
        return "%s: not checked - %s" % (r["id"], r["reason"])
    if not v:
        return "%s: %s - %s" % (r["id"], r["status"], r["reason"])
    label = paths.label(v)
    reason = v["reason"][len(label) + 2:] if v["reason"].startswith(label + ": ") else v["reason"]
    status = "" if r["status"] == "ok" else " [%s]" % r["status"]
    return "%s (%s, expect %s): %s - %s%s%s" % (r["id"], r["tool"], r["expect"], label, reason, bw, status)
