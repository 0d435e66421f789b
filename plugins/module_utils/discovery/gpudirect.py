# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which GPUDirect RDMA mechanism an RDMA NIC of the node can use: DMA-BUF or nvidia-peermem. Read-only: the
concern ``gpudirect_rdma``.

An RDMA NIC can register GPU memory in two ways:

* **DMA-BUF** (upstream): the GPU driver exports the memory as a dma-buf fd and the NIC registers it with
  ``ibv_reg_dmabuf_mr``. It needs the NVIDIA *open* kernel module (``/proc/driver/nvidia/version`` says
  "Open Kernel Module"; the proprietary one cannot export CUDA memory as dma-buf) of release 515 or later, a
  kernel of 5.12 or later (dma-buf importers in RDMA, ``ib_umem_dmabuf``) and rdma-core 34 or later
  (``ibv_reg_dmabuf_mr``, libibverbs 1.12). rdma-core's release is read from the file name of the installed
  libibverbs, which rdma-core's build names ``libibverbs.so.1.<abi>.${PACKAGE_VERSION}``
  (libibverbs/CMakeLists.txt, ``rdma_library(ibverbs ... 1 1.<abi>.${PACKAGE_VERSION})``; see RELEASES below):
  upstream ``libibverbs.so.1.14.50.0`` is rdma-core 50. The MLNX_OFED/DOCA-OFED fork keeps the upstream
  PACKAGE_VERSION it is based on, so its library has the upstream form too: MLNX_OFED 5.4's fork (package version
  ``54mlnx1``) sets ``PACKAGE_VERSION "35.0"`` in its CMakeLists.txt, and a host with MLNX_OFED 5.8's
  ``rdma-core-58mlnx43`` has ``libibverbs.so.1.14.43.0``. A library named after the package version instead is read
  as that version says: ``<YYMM>mlnx<release>`` (MLNX_OFED 23.04 and later, DOCA: ``2307mlnx47`` is rdma-core 47)
  and ``<5x>mlnx<n>`` (MLNX_OFED 5.x), where ``n`` is the upstream release from 5.5 on (``55mlnx37``, ``56mlnx40``,
  ``58mlnx43``) but a build counter before (``54mlnx1`` is rdma-core 35), so an ``n`` below 28 (the oldest
  rdma-core an MLNX_OFED 5.x fork is based on is newer) says no release. A libibverbs whose name says no release is
  "cannot tell", not "not installed".
  NCCL (2.13 and later) tries DMA-BUF first.
* **nvidia-peermem** (``/sys/module/nvidia_peermem`` while loaded; the older Mellanox ``nv_peer_mem`` at
  ``/sys/module/nv_peer_mem``): the peer-memory client of MLNX_OFED/DOCA or of inbox kernels with the
  peer-memory patches. Installed but not loaded (``modules.dep`` lists it) does not count: it must be loaded.

Neither: NCCL and other RDMA users stage GPU data through host memory (``NET/IB`` without ``/GDRDMA``), which
costs bandwidth and latency on every rail.

Public API: ``rdma_core_release(sysroot)``, ``facts(sysroot, facts)`` (gpufabric facts with ``gpu_driver``,
``kernel_release``, ``rails``/``pairing``), ``normalize_desired``, ``status_of(mech, facts, desired)``,
``check(sysroot, desired=None, facts=None)``. Plain Python; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns

CONCERN = "gpudirect_rdma"
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib64")
_LIBIBVERBS_ANY = re.compile(r"libibverbs\.so\.1\.\S+")
# How the file names carry rdma-core's release (the upstream release the library is built from):
RELEASES = (
    # upstream rdma-core and the distributions: libibverbs.so.1.<abi>.<release>.<minor> (Debian 12: 1.14.44.0)
    ("upstream", re.compile(r"libibverbs\.so\.1\.\d+\.(?P<release>\d+)\.\d+")),
    # MLNX_OFED 23.04+ and DOCA-OFED: <YYMM>mlnx<release>, e.g. 2307mlnx47 (23.10/24.01), 2410mlnx54 (DOCA 2.9);
    # the upstream release follows "mlnx" (package version strings of the MLNX_OFED/DOCA dpkg listings)
    ("mlnx", re.compile(r"libibverbs\.so\.1\.\d+\.(?P<branch>\d{4})mlnx(?P<release>\d+)(?:\.\d+)*")),
    # MLNX_OFED 5.x: <5x>mlnx<n>: n is the upstream release from 5.5 on (58mlnx43 is rdma-core 43), a build counter
    # before (54mlnx1 is rdma-core 35: its CMakeLists.txt says PACKAGE_VERSION "35.0"); see MLNX_COUNTER_BELOW
    ("mlnx", re.compile(r"libibverbs\.so\.1\.\d+\.(?P<branch>\d{2})mlnx(?P<release>\d+)(?:\.\d+)*")),
)
# an MLNX_OFED 5.x "<5x>mlnx<n>" with n below this names a build counter, not a release: every MLNX_OFED 5.x fork is
# based on rdma-core 28 or later (MLNX_OFED 5.0, 2020), and the counters seen are single digits (54mlnx1, 52mlnx1)
MLNX_COUNTER_BELOW = 28
_KERNEL = re.compile(r"(\d+)\.(\d+)")
_PEERMEM_KO = re.compile(r"(?:^|/)nvidia[-_]peermem\.ko(?:\.[a-z]+)?:", re.M)
MIN_KERNEL = (5, 12)
MIN_RDMA_CORE = 34
MIN_DRIVER = 515
MECHANISMS = ("any", "dmabuf", "nvidia_peermem")
DEFAULTS = {"mechanism": "any"}


def libibverbs(sr):
    """``[(release or None, flavour, path)]`` of every installed ``libibverbs.so.1.*`` file (not the symlinks'
    targets twice: each name once), newest release first, unknown ones last."""
    out = []
    for d in LIB_DIRS:
        for name in sr.listdir(d):
            if not _LIBIBVERBS_ANY.fullmatch(name):
                continue
            found = (None, "unknown", "%s/%s" % (d, name))
            for flavour, pat in RELEASES:
                m = pat.fullmatch(name)
                if m:
                    release = int(m.group("release"))
                    if flavour == "mlnx" and len(m.group("branch")) == 2 and release < MLNX_COUNTER_BELOW:
                        release = None
                    found = (release, flavour, found[2])
                    break
            out.append(found)
    out.sort(key=lambda x: (x[0] is None, -(x[0] or 0), x[2]))
    return out


def rdma_core_release(sr):
    """(release, path) of the newest installed libibverbs whose name says its release; (None, path) when the
    installed libibverbs names no release it can be told from; (None, None) when none is installed."""
    libs = libibverbs(sr)
    return (libs[0][0], libs[0][2]) if libs else (None, None)


def _kernel(release):
    m = _KERNEL.match(release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def _driver_major(version):
    m = re.match(r"(\d+)", str(version or ""))
    return int(m.group(1)) if m else None


def facts(sr, node):
    """The ``gpudirect_rdma`` facts: ``{mechanism: dmabuf|nvidia_peermem|none|unknown, usable, dmabuf: {usable:
    true|false|null (cannot tell), reasons, unknown, ...}, peermem: {...},
    rdma_rails, warning}`` from the node's gpufabric facts (``node``) and the files named above."""
    node = node or {}
    drv = node.get("gpu_driver") or {}
    release = node.get("kernel_release") or sr.read("/proc/sys/kernel/osrelease")
    kernel = _kernel(release)
    rdma_core, lib = rdma_core_release(sr)
    reasons, unknown = [], []
    if drv.get("flavour") != "open":
        reasons.append("the NVIDIA kernel module is %s, DMA-BUF needs the open kernel module"
                       % (drv.get("flavour") or "not loaded"))
    elif _driver_major(drv.get("version")) is not None and _driver_major(drv.get("version")) < MIN_DRIVER:
        reasons.append("NVIDIA driver %s is older than %d" % (drv.get("version"), MIN_DRIVER))
    if kernel is None:
        reasons.append("the kernel release is not readable")
    elif kernel < MIN_KERNEL:
        reasons.append("kernel %s is older than %d.%d" % (release, MIN_KERNEL[0], MIN_KERNEL[1]))
    if lib is None:
        reasons.append("no libibverbs (rdma-core) is installed")
    elif rdma_core is None:
        unknown.append("cannot tell the rdma-core release of %s from its name (check that it exports "
                       "ibv_reg_dmabuf_mr: nm -D %s | grep ibv_reg_dmabuf_mr, or the libibverbs package's version)"
                       % (lib, lib))
    elif rdma_core < MIN_RDMA_CORE:
        reasons.append("rdma-core %d has no ibv_reg_dmabuf_mr (needs %d)" % (rdma_core, MIN_RDMA_CORE))
    dep = sr.read_raw("/lib/modules/%s/modules.dep" % release) if release else None
    module = None
    for name in ("nvidia_peermem", "nv_peer_mem"):
        if sr.isdir("/sys/module/" + name):
            module = name
            break
    peermem = {"loaded": module is not None, "module": module,
               "installed": bool(dep and _PEERMEM_KO.search(dep)) if dep is not None else None}
    usable = []
    dmabuf = None if unknown and not reasons else not reasons
    if dmabuf:
        usable.append("dmabuf")
    if module:
        usable.append("nvidia_peermem")
    rails = [r for r in node.get("rails") or [] if r.get("pairable")]
    mech = usable[0] if usable else ("unknown" if dmabuf is None else "none")
    warning = None
    if mech == "none" and rails and node.get("gpus", True):
        warning = ("no GPUDirect RDMA mechanism: DMA-BUF cannot be used (%s) and nvidia-peermem is not loaded%s; "
                   "RDMA stages GPU data through host memory"
                   % ("; ".join(reasons), " (installed: modprobe nvidia-peermem)" if peermem["installed"] else ""))
    return {"mechanism": mech, "usable": usable,
            "dmabuf": {"usable": dmabuf, "reasons": reasons, "unknown": unknown,
                       "driver_flavour": drv.get("flavour"),
                       "driver_version": drv.get("version"), "kernel_release": release, "rdma_core": rdma_core,
                       "libibverbs": lib},
            "peermem": peermem, "rdma_rails": len(rails), "warning": warning}


def normalize_desired(desired):
    desired = dict(desired or {})
    unknown = sorted(k for k in desired if k not in DEFAULTS)
    if unknown:
        raise ValueError("gpudirect_rdma: unknown setting(s) %s (known: mechanism)" % ", ".join(unknown))
    out = dict(DEFAULTS)
    if desired.get("mechanism") is not None:
        if desired["mechanism"] not in MECHANISMS:
            raise ValueError("gpudirect_rdma: mechanism must be one of %s, got %r"
                             % (", ".join(MECHANISMS), desired["mechanism"]))
        out["mechanism"] = desired["mechanism"]
    return out


def status_of(mech, node, desired=None):
    """The gpudirect_rdma concern's status document (read-only: check and real run alike)."""
    desired = normalize_desired(desired)
    node = node or {}
    if not node.get("gpus"):
        return concerns.status(concerns.NOT_APPLICABLE, "no GPU on this node", gpudirect=mech)
    if not mech["rdma_rails"]:
        return concerns.status(concerns.NOT_APPLICABLE, "no pairable RDMA rail on this node", gpudirect=mech)
    want = desired["mechanism"]
    dmabuf_unknown = (mech.get("dmabuf") or {}).get("usable") is None
    if (want == "dmabuf" and dmabuf_unknown) or (want == "any" and mech["mechanism"] == "unknown"):
        return concerns.status(concerns.NOT_CHECKED, "cannot tell whether DMA-BUF can be used%s: %s"
                               % ("" if want == "dmabuf" else " and nvidia-peermem is not loaded",
                                  "; ".join(mech["dmabuf"].get("unknown") or [])), gpudirect=mech)
    if mech["mechanism"] in ("none", "unknown") or (want != "any" and want not in mech["usable"]):
        need = "a GPUDirect RDMA mechanism" if want == "any" else want
        why = []
        if want in ("any", "dmabuf"):
            why.append("DMA-BUF: " + "; ".join(mech["dmabuf"]["reasons"] or ["usable"]))
        if want in ("any", "nvidia_peermem"):
            why.append("nvidia-peermem: " + ("loaded" if mech["peermem"]["loaded"] else
                                             "not loaded" + (" (installed)" if mech["peermem"]["installed"]
                                                             else "")))
        item = {"concern": CONCERN, "object": "node", "key": "mechanism", "current": mech["mechanism"],
                "desired": want}
        return concerns.status(concerns.DRIFT, "%s is not available (%s); load nvidia-peermem or use the open "
                               "NVIDIA kernel module with kernel >= 5.12 and rdma-core >= 34"
                               % (need, "; ".join(why)), [item], gpudirect=mech)
    label = {"dmabuf": "DMA-BUF", "nvidia_peermem": "nvidia-peermem"}[mech["mechanism"]]
    return concerns.status(concerns.OK, "%s (usable: %s)" % (label, ", ".join(mech["usable"])), [],
                           gpudirect=mech)
