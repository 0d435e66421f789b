# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NFS over RDMA storage volumes as systemd mount units, verified from mountinfo: the body of the ``nfs_mounts``
module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import manage as nm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import check
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

VOLUME_SPEC = dict(
    path=dict(type="path", required=True),
    server=dict(type="str"),
    export=dict(type="str"),
    vers=dict(type="str"),
    nconnect=dict(type="int"),
    port=dict(type="int", default=nm.RDMA_PORT),
    options=dict(type="list", elements="str", default=[]),
    remoteports=dict(type="str"),
    localports=dict(type="str"),
    state=dict(type="str", choices=["present", "absent"], default="present"),
)

ARGUMENT_SPEC = dict(
    volumes=dict(type="list", elements="dict", required=True, options=VOLUME_SPEC),
    vendor_client=dict(type="str", choices=list(nm.VENDOR_CLIENT), default="auto"),
    unit_dir=dict(type="path", default=nm.UNIT_DIR),
    after_units=dict(type="list", elements="str", default=list(nm.DEFAULT_AFTER)),
    before_units=dict(type="list", elements="str", default=list(nm.DEFAULT_BEFORE)),
)


def run(module, sysroot=None):
    """Validate every volume, compare it with mountinfo and its unit and (unless check mode) fix it."""
    p = module.params
    desired = dict((k, p[k]) for k in ("volumes", "vendor_client", "unit_dir", "after_units", "before_units"))
    run_cmd = CommandRunner(module)
    systemctl = run_cmd.bin_path("systemctl")

    def fail(msg, **extra):
        module.fail_json(msg=msg, drift=[], concerns={nm.CONCERN: concerns.error(nm.CONCERN, msg)}, **extra)

    sysroot = sysroot or Sysroot()
    try:
        # every value checked before the node lock is taken or anything is read beyond the vendor client's record
        nm.plan(desired, check.client_state(sysroot)["installed"])
    except nm.MountInputError as e:
        fail(str(e))
    with nodelock.for_module(module, sysroot, "nfs_mounts", (nm.CONCERN,)):
        try:
            res = check.apply(sysroot, run_cmd, desired, module.check_mode, systemctl)
        except nm.MountInputError as e:
            fail(str(e))
        except check.MountError as e:
            # a fix that failed half way changed the node: say so, with the commands it ran
            fail(str(e), changed=bool(e.actions), actions=e.actions)
        except (OSError, IOError) as e:
            fail("the storage volumes could not be read or written: %s" % e)
    facts = {"volumes": res["volumes"], "client": res["client"], "nfs": res["nfs_mounts"]}
    out = dict(changed=res["changed"], volumes=res["volumes"], client=res["client"], actions=res["actions"],
               vendor_wanted=res["vendor_wanted"], drift=res["items"], concerns={nm.CONCERN: res["status"]},
               ansible_facts={"gpufabric_nfs_mounts": facts})
    if module._diff:
        out["diff"] = res["diff"]
    return out
