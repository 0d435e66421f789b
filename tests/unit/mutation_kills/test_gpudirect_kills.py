# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpudirect: what its own tests left unseen (make mutation's survivors): the facts document key by key, every
DMA-BUF reason word for word at its boundary (driver 515, kernel 5.12, rdma-core 34), the warning and when it is
given, the libibverbs order, the settings' refusals, each status document whole, and when check discovers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gpudirect_rdma import check as gdr_check
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import gpudirect
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology

LIB = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0"
RELEASE = "6.8.0-45-generic"
DEP = "/lib/modules/%s/modules.dep" % RELEASE
OPEN = {"flavour": "open", "version": "550.127.05"}
PEERMEM_DEP = "kernel/drivers/net/mlx5_core.ko:\nupdates/dkms/nvidia-peermem.ko.zst: kernel/nvidia.ko\n"
TAIL = "load nvidia-peermem or use the open NVIDIA kernel module with kernel >= 5.12 and rdma-core >= 34"


class Root(object):
    """A sysroot of a few files (``{path: text}``) and directories."""

    def __init__(self, files=None, dirs=()):
        self.files = dict(files or {})
        self.dirs = set(dirs)

    def read(self, p, default=None):
        text = self.files.get(p)
        return default if text is None else text.strip()

    def read_raw(self, p, default=None):
        return self.files.get(p, default)

    def isdir(self, p):
        return p in self.dirs

    def listdir(self, p):
        return sorted(k.rsplit("/", 1)[1] for k in self.files if k.rsplit("/", 1)[0] == p)


def root(drop=(), dirs=(), **files):
    """The base host (kernel 6.8 per the facts, a different one per /proc, rdma-core 50, mlx5 only in
    modules.dep) with ``files`` ({name: (path, text)}) added and the paths in ``drop`` removed."""
    base = {"/proc/sys/kernel/osrelease": "5.4.0-150-generic\n", LIB: "", DEP: "kernel/drivers/net/mlx5_core.ko:\n"}
    base.update(dict(files.values()))
    return Root({k: v for k, v in base.items() if k not in drop}, dirs)


def node(**over):
    n = {"gpu_driver": dict(OPEN), "kernel_release": RELEASE, "gpus": [{"bdf": "0000:18:00.0"}],
         "rails": [{"name": "rail0", "pairable": True}, {"name": "rail1", "pairable": False}]}
    n.update(over)
    return {k: v for k, v in n.items() if v is not Ellipsis}


# ------------------------------------------------------------------------------------------------ facts

def test_facts_whole_document_dmabuf():
    assert gpudirect.facts(root(), node()) == {
        "mechanism": "dmabuf", "usable": ["dmabuf"],
        "dmabuf": {"usable": True, "reasons": [], "unknown": [], "driver_flavour": "open",
                   "driver_version": "550.127.05", "kernel_release": RELEASE, "rdma_core": 50, "libibverbs": LIB},
        "peermem": {"loaded": False, "module": None, "installed": False}, "rdma_rails": 1, "warning": None}


def test_facts_whole_document_none_with_warning():
    sr = root(drop=(LIB,), dep=("/lib/modules/5.4.0-150-generic/modules.dep", PEERMEM_DEP))
    n = node(gpu_driver={"flavour": "proprietary", "version": "550.127.05"}, kernel_release="5.4.0-150-generic",
             gpus=Ellipsis)
    reasons = ["the NVIDIA kernel module is proprietary, DMA-BUF needs the open kernel module",
               "kernel 5.4.0-150-generic is older than 5.12", "no libibverbs (rdma-core) is installed"]
    assert gpudirect.facts(sr, n) == {
        "mechanism": "none", "usable": [],
        "dmabuf": {"usable": False, "reasons": reasons, "unknown": [], "driver_flavour": "proprietary",
                   "driver_version": "550.127.05", "kernel_release": "5.4.0-150-generic", "rdma_core": None,
                   "libibverbs": None},
        "peermem": {"loaded": False, "module": None, "installed": True}, "rdma_rails": 1,
        "warning": "no GPUDirect RDMA mechanism: DMA-BUF cannot be used (" + "; ".join(reasons) + ") and "
                   "nvidia-peermem is not loaded (installed: modprobe nvidia-peermem); RDMA stages GPU data through "
                   "host memory"}


def test_facts_release_from_proc_and_no_modules_dep():
    fa = gpudirect.facts(root(), node(kernel_release=Ellipsis, gpu_driver={}))
    assert fa["dmabuf"]["reasons"] == ["the NVIDIA kernel module is not loaded, DMA-BUF needs the open kernel module",
                                       "kernel 5.4.0-150-generic is older than 5.12"]
    assert fa["dmabuf"]["kernel_release"] == "5.4.0-150-generic"
    assert fa["peermem"] == {"loaded": False, "module": None, "installed": None}
    assert fa["warning"] == (
        "no GPUDirect RDMA mechanism: DMA-BUF cannot be used (the NVIDIA kernel module is not loaded, DMA-BUF needs "
        "the open kernel module; kernel 5.4.0-150-generic is older than 5.12) and nvidia-peermem is not loaded; "
        "RDMA stages GPU data through host memory")


@pytest.mark.parametrize("over,warning", [
    ({"gpus": []}, False),
    ({"gpus": Ellipsis}, True),
    ({"gpus": [{"bdf": "0000:18:00.0"}]}, True),
    ({"rails": [{"name": "rail1", "pairable": False}]}, False),
])
def test_facts_warning_needs_gpus_and_a_pairable_rail(over, warning):
    fa = gpudirect.facts(root(), node(gpu_driver={"flavour": "proprietary"}, **over))
    assert fa["mechanism"] == "none"
    assert fa["warning"] == ("no GPUDirect RDMA mechanism: DMA-BUF cannot be used (the NVIDIA kernel module is "
                             "proprietary, DMA-BUF needs the open kernel module) and nvidia-peermem is not loaded; "
                             "RDMA stages GPU data through host memory" if warning else None)


@pytest.mark.parametrize("drv,release,lib,reasons", [
    ({"flavour": "open", "version": "515.43.04"}, "5.12.0-1", "libibverbs.so.1.14.34.0", []),
    ({"flavour": "open", "version": "514.99"}, RELEASE, "libibverbs.so.1.14.50.0",
     ["NVIDIA driver 514.99 is older than 515"]),
    ({"flavour": "open", "version": "510.47.03"}, "5.11.22", "libibverbs.so.1.14.33.0",
     ["NVIDIA driver 510.47.03 is older than 515", "kernel 5.11.22 is older than 5.12",
      "rdma-core 33 has no ibv_reg_dmabuf_mr (needs 34)"]),
    ({"flavour": "open", "version": None}, "4.19.0", "libibverbs.so.1.14.50.0", ["kernel 4.19.0 is older than 5.12"]),
    ({"flavour": "open", "version": "r550"}, "garbage", "libibverbs.so.1.14.50.0",
     ["the kernel release is not readable"]),
    ({"flavour": "open"}, "6.1", "libibverbs.so.1.14.50.0", []),
])
def test_facts_dmabuf_reasons_at_their_bounds(drv, release, lib, reasons):
    sr = root(drop=(LIB,), lib=("/usr/lib64/" + lib, ""))
    fa = gpudirect.facts(sr, node(gpu_driver=drv, kernel_release=release))
    assert fa["dmabuf"]["reasons"] == reasons
    assert fa["dmabuf"]["usable"] is (not reasons)
    assert (fa["mechanism"], fa["dmabuf"]["driver_version"]) == ("none" if reasons else "dmabuf", drv.get("version"))


@pytest.mark.parametrize("osrelease,release", [(None, None), ("\n", "")])
def test_facts_no_kernel_release_reads_no_modules_dep(osrelease, release):
    files = {"/lib/modules/None/modules.dep": PEERMEM_DEP, "/lib/modules//modules.dep": PEERMEM_DEP,
             "/proc/sys/kernel/osrelease": osrelease}
    sr = Root({k: v for k, v in dict(files, **{LIB: ""}).items() if v is not None})
    fa = gpudirect.facts(sr, node(kernel_release=Ellipsis))
    assert fa["dmabuf"]["reasons"] == ["the kernel release is not readable"]
    assert fa["dmabuf"]["kernel_release"] == release
    assert fa["peermem"] == {"loaded": False, "module": None, "installed": None}
    assert fa["warning"] == ("no GPUDirect RDMA mechanism: DMA-BUF cannot be used (the kernel release is not "
                             "readable) and nvidia-peermem is not loaded; RDMA stages GPU data through host memory")


@pytest.mark.parametrize("dirs,module", [
    (("/sys/module/nv_peer_mem",), "nv_peer_mem"),
    (("/sys/module/nvidia_peermem", "/sys/module/nv_peer_mem"), "nvidia_peermem"),
])
def test_facts_peermem_module(dirs, module):
    fa = gpudirect.facts(root(dep=(DEP, PEERMEM_DEP), dirs=dirs), node())
    assert fa["peermem"] == {"loaded": True, "module": module, "installed": True}
    assert fa["usable"] == ["dmabuf", "nvidia_peermem"]


# ------------------------------------------------------------------------------------------------ libibverbs

@pytest.mark.parametrize("paths,order", [
    # release 0 is a release: before the names that tell none, whatever their directory
    (["/lib64/libibverbs.so.1.14.custom", "/usr/lib/libibverbs.so.1.14.0.0"],
     [(0, "upstream", "/usr/lib/libibverbs.so.1.14.0.0"), (None, "unknown", "/lib64/libibverbs.so.1.14.custom")]),
    # newest first: release 1 before release 0
    (["/lib64/libibverbs.so.1.14.0.0", "/usr/lib/libibverbs.so.1.14.1.0"],
     [(1, "upstream", "/usr/lib/libibverbs.so.1.14.1.0"), (0, "upstream", "/lib64/libibverbs.so.1.14.0.0")]),
])
def test_libibverbs_order(paths, order):
    assert gpudirect.libibverbs(Root({p: "" for p in paths})) == order


# ------------------------------------------------------------------------------------------------ settings

@pytest.mark.parametrize("desired,message", [
    ({"b": 1, "a": 2}, "gpudirect_rdma: unknown setting(s) a, b (known: mechanism)"),
    ({"mechanism": "gdr"}, "gpudirect_rdma: mechanism must be one of any, dmabuf, nvidia_peermem, got 'gdr'"),
])
def test_normalize_desired_messages(desired, message):
    with pytest.raises(ValueError) as e:
        gpudirect.normalize_desired(desired)
    assert str(e.value) == message


# ------------------------------------------------------------------------------------------------ status_of

def mech(mechanism, usable, dmabuf, reasons=(), unknown=(), loaded=False, installed=False, rails=1):
    return {"mechanism": mechanism, "usable": list(usable),
            "dmabuf": {"usable": dmabuf, "reasons": list(reasons), "unknown": list(unknown)},
            "peermem": {"loaded": loaded, "module": "nvidia_peermem" if loaded else None, "installed": installed},
            "rdma_rails": rails, "warning": None}


def drift(current, desired, reason):
    return {"status": "drift", "reason": reason + "; " + TAIL,
            "items": [{"concern": "gpudirect_rdma", "object": "node", "key": "mechanism", "current": current,
                       "desired": desired}]}


GPUS = {"gpus": [{"bdf": "0000:18:00.0"}]}

STATUS = [
    ("no_gpu", None, None, mech("dmabuf", ["dmabuf"], True),
     {"status": "not_applicable", "reason": "no GPU on this node", "items": []}),
    ("no_rail", GPUS, None, mech("dmabuf", ["dmabuf"], True, rails=0),
     {"status": "not_applicable", "reason": "no pairable RDMA rail on this node", "items": []}),
    ("dmabuf_ok", GPUS, "dmabuf", mech("dmabuf", ["dmabuf"], True),
     {"status": "ok", "reason": "DMA-BUF (usable: dmabuf)", "items": []}),
    ("both_ok", GPUS, None, mech("dmabuf", ["dmabuf", "nvidia_peermem"], True, loaded=True),
     {"status": "ok", "reason": "DMA-BUF (usable: dmabuf, nvidia_peermem)", "items": []}),
    ("peermem_ok", GPUS, "nvidia_peermem", mech("nvidia_peermem", ["nvidia_peermem"], False, ["r1"], loaded=True),
     {"status": "ok", "reason": "nvidia-peermem (usable: nvidia_peermem)", "items": []}),
    ("dmabuf_unknown", GPUS, "dmabuf",
     mech("nvidia_peermem", ["nvidia_peermem"], None, unknown=["u1", "u2"], loaded=True),
     {"status": "not_checked", "reason": "cannot tell whether DMA-BUF can be used: u1; u2", "items": []}),
    ("any_unknown", GPUS, "any", mech("unknown", [], None, unknown=["u1"]),
     {"status": "not_checked", "reason": "cannot tell whether DMA-BUF can be used and nvidia-peermem is not "
                                         "loaded: u1", "items": []}),
    ("none_installed", GPUS, None, mech("none", [], False, ["r1", "r2"], installed=True),
     drift("none", "any", "a GPUDirect RDMA mechanism is not available (DMA-BUF: r1; r2; nvidia-peermem: not "
                          "loaded (installed))")),
    ("none_not_installed", GPUS, "any", mech("none", [], False, ["r1"], installed=False),
     drift("none", "any", "a GPUDirect RDMA mechanism is not available (DMA-BUF: r1; nvidia-peermem: not loaded)")),
    ("none_no_modules_dep", GPUS, "any", mech("none", [], False, ["r1"], installed=None),
     drift("none", "any", "a GPUDirect RDMA mechanism is not available (DMA-BUF: r1; nvidia-peermem: not loaded)")),
    ("peermem_wanted", GPUS, "nvidia_peermem", mech("dmabuf", ["dmabuf"], True),
     drift("dmabuf", "nvidia_peermem", "nvidia_peermem is not available (nvidia-peermem: not loaded)")),
    ("dmabuf_wanted", GPUS, "dmabuf", mech("nvidia_peermem", ["nvidia_peermem"], False, ["r1"], loaded=True),
     drift("nvidia_peermem", "dmabuf", "dmabuf is not available (DMA-BUF: r1)")),
    # documents facts() does not write, e.g. from an older gpufabric: an unknown mechanism is never ok, and an
    # empty reason list reads "usable"
    ("unknown_never_ok", GPUS, "nvidia_peermem", mech("unknown", ["nvidia_peermem"], None, loaded=True),
     drift("unknown", "nvidia_peermem", "nvidia_peermem is not available (nvidia-peermem: loaded)")),
    ("no_reasons", GPUS, "dmabuf", mech("nvidia_peermem", ["nvidia_peermem"], True, loaded=True),
     drift("nvidia_peermem", "dmabuf", "dmabuf is not available (DMA-BUF: usable)")),
]


@pytest.mark.parametrize("_id,n,want,m,expect", STATUS, ids=[c[0] for c in STATUS])
def test_status_of_whole_document(_id, n, want, m, expect):
    desired = None if want is None else {"mechanism": want}
    assert gpudirect.status_of(m, n, desired) == dict(expect, gpudirect=m)
    if want in (None, "any"):
        assert gpudirect.status_of(m, n) == dict(expect, gpudirect=m)


# ------------------------------------------------------------------------------------------------ check

GIVEN = mech("nvidia_peermem", ["nvidia_peermem"], False, ["given"], loaded=True, rails=2)
GIVEN_OK = {"status": "ok", "reason": "nvidia-peermem (usable: nvidia_peermem)", "items": [], "gpudirect": GIVEN}


@pytest.mark.parametrize("given,discovers", [
    (None, True),
    ({"gpu_driver": OPEN}, True),
    ({"rails": []}, True),
    ({"gpu_driver": OPEN, "rails": []}, False),
])
def test_check_discovers_unless_driver_and_rails_are_given(monkeypatch, given, discovers):
    calls = []

    def discover(*args):
        calls.append(args)
        return node(gpudirect_rdma=GIVEN)

    monkeypatch.setattr(topology, "discover", discover)
    sr = root()
    if given is None:
        doc = gdr_check.check(sr)
    else:
        doc = gdr_check.check(sr, None, dict(given, gpus=[{"bdf": "0000:18:00.0"}], gpudirect_rdma=GIVEN))
    assert calls == ([(sr, ["pci", "rails", "gpu_driver"])] if discovers else [])
    assert doc == GIVEN_OK


def test_check_uses_the_given_gpudirect_facts():
    assert gdr_check.check(root(), None, node(gpudirect_rdma=GIVEN)) == GIVEN_OK


def test_check_computes_the_facts_from_the_sysroot():
    doc = gdr_check.check(root(), {"mechanism": "dmabuf"}, node())
    assert doc == {"status": "ok", "reason": "DMA-BUF (usable: dmabuf)", "items": [],
                   "gpudirect": gpudirect.facts(root(), node())}
    assert doc["gpudirect"]["dmabuf"]["libibverbs"] == LIB
