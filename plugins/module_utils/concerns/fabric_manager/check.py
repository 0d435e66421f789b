# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``fabric_manager`` concern: on a node with NVSwitches, nvidia-fabricmanager running and every NVLink up.

On HGX/DGX boards the GPUs reach each other through NVSwitches, which NVIDIA Fabric Manager configures: without
it CUDA fails with error 802 (system not yet initialized) and NVLink carries no traffic. Fabric Manager runs as
the process ``nv-fabricmanager`` (the ``nvidia-fabricmanager`` service); discovery's ``fabric_manager`` facts say
whether NVSwitches are present (``needed``) and whether that process runs (``running``, ``pids``), from
``/proc/<pid>/comm`` (no systemd needed).

Where ``nvidia-smi`` is installed, ``nvidia-smi nvlink --status`` gives each GPU's links: ``Link <n>: <speed>
GB/s`` for an active link, ``Link <n>: <inactive>`` for one that is down. A GPU with an inactive link is drift, as
is a GPU on an NVSwitch board with no link at all; both are read-only findings (a link does not come up by a
setting: reset the GPU or the board, check the NVSwitch and Fabric Manager logs).

The status: ``not_applicable`` without NVSwitches; ``drift`` when Fabric Manager is not running or a link is down;
``error`` when nvidia-smi fails; ``ok`` otherwise, saying when the links were not read (no nvidia-smi) and how to
read them. Plain Python, no I/O here (the task reads). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model

NAME = "fabric_manager"
SERVICE = "nvidia-fabricmanager"
NVLINK_ARGS = ("nvlink", "--status")
HOW_TO_READ = "nvidia-smi nvlink --status"
NOT_RUNNING = ("NVSwitches are present but %s is not running: CUDA fails with error 802 and NVLink carries no "
               "traffic (systemctl enable --now %s)" % (SERVICE, SERVICE))

_GPU = re.compile(r"GPU (\d{1,4}): (.*?)(?: \(UUID: ([^)]*)\))?")
_LINK = re.compile(r"Link (\d{1,3}): (.*?)")
_SPEED = re.compile(r"(\d{1,6}(?:\.\d{1,6})?) ?GB/s")


def parse_nvlink_status(text):
    """``[{"gpu", "name", "uuid", "links": [{"link", "state", "gbps", "raw"}]}]`` from ``nvidia-smi nvlink
    --status``. A link's state is ``active`` (a speed), ``inactive`` (``<inactive>``) or ``unknown`` (anything
    else, kept as ``raw``). Lines of neither form (headers, blank lines) are skipped."""
    gpus = []
    for line in (text or "").splitlines():
        line = line.strip()
        m = _GPU.fullmatch(line)
        if m:
            gpus.append({"gpu": int(m.group(1)), "name": m.group(2), "uuid": m.group(3), "links": []})
            continue
        m = _LINK.fullmatch(line)
        if m and gpus:
            raw = m.group(2).strip()
            speed = _SPEED.fullmatch(raw)
            if speed:
                state, gbps = "active", float(speed.group(1))
            elif raw.lower() == "<inactive>":
                state, gbps = "inactive", None
            else:
                state, gbps = "unknown", None
            gpus[-1]["links"].append({"link": int(m.group(1)), "state": state, "gbps": gbps, "raw": raw})
    return gpus


def _link_items(nvlink):
    if not nvlink:
        # nvidia-smi nvlink --status prints nothing, rc 0, for GPUs without NVLink (recorded on an H200 host,
        # tests/fixtures/validate/h200-microvm): on an NVSwitch node that is no NVLink at all, not "all up"
        return [{"concern": NAME, "object": "nvidia-smi", "key": "nvlink", "current": "no GPU reported",
                 "desired": "NVLink of every GPU"}]
    items = []
    for g in nvlink:
        obj = "GPU %d" % g["gpu"]
        down = [lk["link"] for lk in g["links"] if lk["state"] != "active"]
        if not g["links"]:
            items.append({"concern": NAME, "object": obj, "key": "nvlink", "current": "no link reported",
                          "desired": "links active"})
        elif down:
            items.append({"concern": NAME, "object": obj, "key": "nvlink_down", "current": down, "desired": []})
    return items


def status(fm, nvlink=None, nvsmi=None):
    """The concern's status from the ``fabric_manager`` facts ``fm`` ({needed, running, pids}), the parsed NVLink
    state (None when it was not read) and what happened to nvidia-smi: None (ran), ``"missing"``, or an error
    text."""
    fm = fm or {}
    if not fm.get("needed"):
        return model.status(model.NOT_APPLICABLE, "no NVSwitch on this node: Fabric Manager and NVSwitch NVLink "
                                                  "do not apply")
    if nvsmi not in (None, "missing"):
        return model.status(model.ERROR, "%s failed: %s" % (HOW_TO_READ, nvsmi))
    items, reasons = [], []
    if not fm.get("running"):
        items.append({"concern": NAME, "object": SERVICE, "key": "running", "current": False, "desired": True})
        reasons.append(NOT_RUNNING)
    if nvlink is not None:
        link_items = _link_items(nvlink)
        items.extend(link_items)
        for i in link_items:
            what = (("no NVLink reported" if i["object"] != "nvidia-smi" else "no GPU with NVLink reported")
                    if i["key"] == "nvlink"
                    else "NVLink link(s) %s down" % ", ".join(str(n) for n in i["current"]))
            reasons.append("%s: %s (read-only: reset the GPU or the board, see the Fabric Manager log)"
                           % (i["object"], what))
    if items:
        return model.status(model.DRIFT, "; ".join(reasons), items)
    pids = ", ".join(str(p) for p in fm.get("pids") or [])
    if nvlink is None:
        return model.status(model.OK, "%s running (pid %s); NVLink state not read: nvidia-smi is not installed "
                                      "(read it with %s)" % (SERVICE, pids, HOW_TO_READ))
    links = sum(len(g["links"]) for g in nvlink)
    return model.status(model.OK, "%s running (pid %s); NVLink: %d GPU(s), %d link(s) active"
                        % (SERVICE, pids, len(nvlink), links))
