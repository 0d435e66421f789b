# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``nvidia_fs`` section of the boot-time record: nvidia-fs ``rw_stats_enabled`` (the GDS counters the proofs
read), set again at boot.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import boot_record as br


NVFS_PARAM = "/sys/module/nvidia_fs/parameters/rw_stats_enabled"


def _validate_nvidia_fs(data):
    br.only_keys(data, "nvidia_fs", ("rw_stats_enabled",))
    if "rw_stats_enabled" not in data:
        raise ValueError("nvidia_fs: rw_stats_enabled is required")
    v = data["rw_stats_enabled"]
    if isinstance(v, bool):
        v = int(v)
    return {"rw_stats_enabled": br.integer(v, "nvidia_fs.rw_stats_enabled", 0, 1)}


def _apply_nvidia_fs(ctx, section):
    want = section["rw_stats_enabled"]
    raw = ctx.sysroot.read(NVFS_PARAM)
    if raw is None:
        ctx.skip("nvidia_fs", "%s does not exist (nvidia_fs not loaded): nothing to set" % NVFS_PARAM)
        return
    try:
        cur = int(raw)
    except ValueError:
        ctx.error("nvidia_fs", "unexpected content %r in %s" % (raw, NVFS_PARAM))
        return
    changed = cur != want
    if changed and not ctx.check_mode:
        try:
            ctx.sysroot.write_attr(NVFS_PARAM, "%d\n" % want)
        except (OSError, IOError) as e:
            ctx.error("nvidia_fs", "cannot write %s: %s" % (NVFS_PARAM, e))
            return
        after = ctx.sysroot.read(NVFS_PARAM)
        if after is None or after.strip() != str(want):
            ctx.error("nvidia_fs", "wrote %d to %s but it reads back %r" % (want, NVFS_PARAM, after))
            return
    ctx.concerns["nvidia_fs"] = {"changed": changed}
    if changed:
        ctx.change("nvidia_fs", "rw_stats_enabled %d -> %d" % (cur, want))


SECTION = br.Section("nvidia_fs", "gds", _validate_nvidia_fs,
                     lambda ctx, section, device: _apply_nvidia_fs(ctx, section), order=60)
