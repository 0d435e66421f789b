# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``rdma_cm`` section of the boot-time record: the default RoCE ToS per group of rails or RDMA devices,
re-applied at boot and whenever a device registers (its ToS is 0 again).

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import boot_record as br
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm


def _validate_rdma_cm_group(data, what):
    br.only_keys(data, what, ("rails", "devices", "tos"))
    has_rails = data.get("rails") is not None
    has_devices = data.get("devices") is not None
    if has_rails == has_devices:
        raise ValueError("%s: give exactly one of rails and devices" % what)
    try:
        out = {"tos": rdma_cm.validate_tos(data.get("tos"))}
    except ValueError as e:
        raise ValueError("%s: %s" % (what, e))
    if has_rails:
        out["rails"] = br.names(data["rails"], "%s.rails" % what, br.ifname)
    else:
        out["devices"] = br.names(data["devices"], "%s.devices" % what, br.ibdev)
    return out


def _validate_rdma_cm(data):
    return br.grouped("rdma_cm", data, _validate_rdma_cm_group)


def _tos_pairs(ctx, section, only_device, by_dev, by_rail):
    """(ibdev, port) pairs to configure, and messages naming the recorded objects still missing."""
    if "devices" in section:
        wanted = section["devices"] if only_device is None else [d for d in section["devices"] if d == only_device]
        gone = [d for d in wanted if not ctx.sysroot.isdir("%s/%s" % (rdma_cm.IB_CLASS, d))]
        return ([(d, None) for d in wanted if d not in gone],
                ["RDMA device %s did not appear (no %s/%s)" % (d, rdma_cm.IB_CLASS, d) for d in gone])
    rails = section["rails"]
    if only_device is not None:
        rails = [r for r in rails if r in by_dev.get(only_device, [])]
    present = [r for r in rails if r in by_rail]
    missing = ["rail %s has no registered RDMA device (none of %s/*/ports/* names it)" % (r, rdma_cm.IB_CLASS)
               for r in rails if r not in by_rail]
    pairs = []
    if present:
        for _rail, ibdev, port in rdma_cm.rail_devices(ctx.sysroot, present):
            if only_device is None or ibdev == only_device:
                pairs.append((ibdev, port))
    return pairs, missing


def _apply_tos(ctx, section, only_device):
    """Each recorded group (rails or devices with their ToS; a failed one may keep an earlier ToS)."""
    done = {"changed": False, "ports": [], "results": []}
    found = [_apply_tos_group(ctx, group, only_device, done) for group in br.groups_of(section)]
    if only_device is not None and not any(found) and not ctx.errors:
        ctx.skip("rdma_cm", "device %s is not in the recorded ToS set" % only_device)
    if done["ports"]:
        ctx.concerns["rdma_cm"] = done


def _apply_tos_group(ctx, section, only_device, done):
    holder = {"pairs": []}

    def missing_now():
        try:
            holder["pairs"], missing = _tos_pairs(ctx, section, only_device, *br.rails_by_ibdev(ctx.sysroot))
        except (ValueError, rdma_cm.RdmaCmError) as e:
            holder["pairs"], missing = [], [str(e)]
        return missing

    for m in ctx.wait(missing_now):
        ctx.error("rdma_cm", m)
    pairs = holder["pairs"]
    if not pairs:
        return False
    try:
        res = rdma_cm.apply_tos(ctx.sysroot, pairs, section["tos"], ctx.check_mode, run=ctx.run)
    except (ValueError, rdma_cm.RdmaCmError, OSError, IOError) as e:
        ctx.error("rdma_cm", "default_roce_tos: %s" % e)
        return True
    if res["configfs"] in ("loaded", "would load"):
        ctx.change("rdma_cm", "configfs/rdma_cm %s" % res["configfs"])
    done["changed"] = done["changed"] or res["changed"]
    done["ports"].extend("%s/%d" % (p["device"], p["port"]) for p in res["ports"])
    done["results"].extend(res["results"])
    ctx.log_results("rdma_cm", res["results"])
    return True


SECTION = br.Section("rdma_cm", "rdma_cm", _validate_rdma_cm,
                     lambda ctx, section, device: _apply_tos(ctx, section, None if device is None else device.ibdev),
                     order=40, device_run=True)
