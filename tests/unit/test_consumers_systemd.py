# -*- coding: utf-8 -*-
"""The unit files the collection writes, read by systemd itself: ``systemd-analyze verify --root`` on a private root
holding the host's unit files and every file the collection installs there (the scripts ExecStart= runs included).

Covered: the boot-time applier's ``gpufabric-apply.service`` and its template ``gpufabric-apply@.service`` (as the
instances the udev rule starts), the evidence ``.service`` and ``.timer``, the NFS ``.mount`` units. Each is
rendered by the collection's own code (persist_task.desired_files, persist_evidence.files, nfs_mounts.plan).
"""
from __future__ import absolute_import, division, print_function

import os

import pytest

import consumers
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import manage as nfs_mounts
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import install as persist, evidence_unit as persist_evidence
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import task as persist_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type

PYTHON = "/usr/bin/python3"


def params(**kw):
    """fabric_persist's parameters with their defaults (persist_task.ARGUMENT_SPEC), ``kw`` on top."""
    p = dict((k, v.get("default")) for k, v in persist_task.ARGUMENT_SPEC.items())
    p.update(kw)
    return p


def applier_files(p):
    unit_dir = p["unit_dir"]
    files = persist_task.desired_files(p, PYTHON, None, {"applier": "# the applier\n"},
                                       "%s/%s" % (unit_dir, persist.UNIT), "%s/%s" % (unit_dir, persist.TEMPLATE))
    return dict((path, (content, mode)) for path, (content, mode, _diff) in files.items())


def evidence_files(p):
    p = dict(p)
    # as the module does: the default textfile directory is the node's OS profile's (here a node without
    # os-release: upstream's)
    persist_evidence.validate(p, Sysroot("/nonexistent-gpufabric-root"))
    files = applier_files(p)
    files.update((path, (content, mode)) for path, (content, mode, _d) in persist_evidence.files(p, PYTHON).items())
    return files


def mount_files(desired):
    plan = nfs_mounts.plan(desired, vendor_installed=True)
    return dict((v["unit_path"], (v["unit_text"], 0o644)) for v in plan["volumes"] if v["state"] == "present")


def lay_out(root, files):
    consumers.systemd_root(root)
    for path, (content, mode) in files.items():
        consumers.write(root, path, content, mode)
    return str(root)


VOLUMES = [
    {"path": "/mnt/nfs-rdma", "server": "vast-vip.example.com", "export": "/ai", "nconnect": 16,
     "remoteports": "172.16.0.1-172.16.0.8", "localports": "ens1np0~ens2np0", "options": ["hard", "timeo=600"]},
    {"path": "/data/vast@ai:1", "server": "[fd00:10::5]", "export": "/export/a-b", "vers": "3"},
    {"path": "/scratch/ckpt.2026", "server": "10.10.0.5", "export": "/ckpt", "vers": "4.2", "port": 20049},
    {"path": "/mnt/old", "state": "absent"},
]
MOUNT_UNITS = ["mnt-nfs\\x2drdma.mount", "data-vast\\x40ai:1.mount", "scratch-ckpt.2026.mount"]
INSTANCES = ["gpufabric-apply@mlx5_0.service", "gpufabric-apply@mlx5-bond0.service",
             "gpufabric-apply@rxe.eth0.service"]

GOOD = [
    # id, files {path: (content, mode)}, the units handed to verify
    ("applier defaults", applier_files(params()), [persist.UNIT] + INSTANCES),
    ("applier, path of every allowed character, no boot wait",
     applier_files(params(script="/opt/gpu=fabric/s,bin/apply+x@1:2", lib_dir="/opt/gpu=fabric/lib", boot_wait=0,
                          device_wait=3600, before_units=["remote-fs-pre.target", "kubelet.service",
                                                          "mnt-nfs\\x2drdma.mount"])),
     [persist.UNIT] + INSTANCES),
    ("evidence defaults", evidence_files(params(evidence=True)), [persist_evidence.SERVICE, persist_evidence.TIMER]),
    ("evidence, odd textfile directory, one day",
     evidence_files(params(evidence=True, evidence_interval=86400, evidence_script="/opt/gf/sbin/evi=dence",
                           evidence_textfile_dir="/var/lib/node_exporter/text@file:1", evidence_filename="gf+1.prom",
                           evidence_desired={"version": 1, "concerns": {}})),
     [persist_evidence.SERVICE, persist_evidence.TIMER]),
    ("nfs mounts, escaped mount points", mount_files({"volumes": VOLUMES}), MOUNT_UNITS),
    ("nfs mounts, own after and before units",
     mount_files({"volumes": VOLUMES[:1], "after_units": ["gpufabric-apply.service", "openibd.service"],
                  "before_units": ["kubelet.service", "slurmd.service"], "unit_dir": "/run/systemd/system"}),
     MOUNT_UNITS[:1]),
]


@pytest.mark.parametrize("case", GOOD, ids=[c[0] for c in GOOD])
def test_systemd_reads_the_units(tmp_path, case):
    _id, files, units = case
    root = lay_out(tmp_path, files)
    rc, diag = consumers.verify_units(root, units)
    assert (rc, diag) == (0, "")


def _edit(files, name, old, new):
    """``files`` with ``old`` replaced by ``new`` in the one file called ``name`` (which must contain it)."""
    out = dict(files)
    path = [p for p in files if os.path.basename(p) == name][0]
    content, mode = files[path]
    assert old in content
    out[path] = (content.replace(old, new), mode)
    return out


def _without(files, path):
    out = dict(files)
    del out[path]
    return out


APPLIER = applier_files(params())
EVIDENCE = evidence_files(params(evidence=True))
MOUNTS = mount_files({"volumes": VOLUMES})
BROKEN = [
    # id, files, units, rc verify must give, diagnostic it must print
    ("ExecStart names a script that is not there", _without(APPLIER, "/usr/local/sbin/gpufabric-apply"),
     [persist.UNIT], 1, "Command /usr/local/sbin/gpufabric-apply is not executable"),
    ("a key systemd does not know", _edit(APPLIER, persist.UNIT, "TimeoutStartSec=", "TimeoutStartSecs="),
     [persist.UNIT], 0, "Unknown key 'TimeoutStartSecs' in section [Service], ignoring"),
    ("an unbalanced quote in ExecStart=",
     _edit(APPLIER, persist.TEMPLATE, "ExecStart=/usr/local/sbin/gpufabric-apply",
           'ExecStart="/usr/local/sbin/gpufabric-apply'),
     INSTANCES[:1], 1, "Service has no ExecStart=, ExecStop=, or SuccessAction=. Refusing"),
    ("a service type systemd does not know",
     _edit(EVIDENCE, persist_evidence.SERVICE, "Type=oneshot", "Type=one-shot"),
     [persist_evidence.SERVICE], 0, "Failed to parse service type, ignoring: one-shot"),
    ("a timer interval systemd cannot read", _edit(EVIDENCE, persist_evidence.TIMER, "OnUnitActiveSec=600s",
                                                   "OnUnitActiveSec=600 sec."),
     [persist_evidence.TIMER], 0, "Failed to parse timer value, ignoring: 600 sec."),
    ("a memory cap systemd cannot read", _edit(EVIDENCE, persist_evidence.SERVICE, "MemoryMax=", "MemoryMax=lots#"),
     [persist_evidence.SERVICE], 0, "Invalid memory limit 'lots#512M', ignoring"),
    ("a mount unit whose name is not its mount point",
     _edit(MOUNTS, MOUNT_UNITS[0], "Where=/mnt/nfs-rdma", "Where=/mnt/nfs_rdma"),
     MOUNT_UNITS[:1], 1, "Where= setting doesn't match unit name"),
    ("a mount point with ':' whose name is not its mount point", _edit(MOUNTS, MOUNT_UNITS[1], "Where=/data/vast@ai:1",
                                                                       "Where=/data/vast@ai:2"),
     MOUNT_UNITS[1:2], 1, "Where= setting doesn't match unit name"),
]


@pytest.mark.parametrize("case", BROKEN, ids=[c[0] for c in BROKEN])
def test_systemd_rejects_a_broken_unit(tmp_path, case):
    _id, files, units, want_rc, diagnostic = case
    root = lay_out(tmp_path, files)
    rc, diag = consumers.verify_units(root, units)
    assert rc == want_rc and diagnostic in diag, diag


SERVICES = dict((p, c) for case in GOOD[:4] for p, (c, _m) in case[1].items() if p.endswith(".service"))


@pytest.mark.parametrize("path", sorted(SERVICES))
def test_every_service_has_resource_limits(path):
    """Each service the collection installs runs as root: a memory, task and file cap, and a start timeout."""
    text = SERVICES[path]
    service = text.split("[Service]\n", 1)[1].split("\n[", 1)[0].splitlines()
    keys = dict(line.split("=", 1) for line in service if "=" in line and not line.startswith("#"))
    assert keys.get("MemoryMax") == persist.MEMORY_MAX and keys.get("MemorySwapMax") == "0"
    assert keys.get("TasksMax") == str(persist.TASKS_MAX) and keys.get("LimitNOFILE") == str(persist.NOFILE_MAX)
    assert int(keys["TimeoutStartSec"]) > 0
    if os.path.basename(path) == persist_evidence.SERVICE:
        assert keys.get("CPUQuota") == "%d%%" % persist_evidence.CPU_QUOTA
