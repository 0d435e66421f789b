#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nfs_mounts
short_description: NFS over RDMA storage volumes as systemd mount units, verified from mountinfo
version_added: 0.1.0
description:
  - Manages each volume as a systemd mount unit C(<systemd-escape --path PATH>.mount) in O(unit_dir) with
    C(Type=nfs) and C(Options=proto=rdma,port=20049,vers=...) plus C(nconnect), the vendor client's multipath
    C(remoteports)/C(localports) and the extra options; ordered C(After=) the boot-time applier
    (C(gpufabric-apply.service)) and C(Before=) O(before_units), C(WantedBy=remote-fs.target), enabled.
  - Verifies every volume from C(/proc/self/mountinfo) (C(/proc/mounts) when it cannot be read) - the file system
    type, the source C(server:/export), C(proto=rdma), C(port), C(vers), C(nconnect) - and, where the vendor NFS
    client is wanted, that the C(sunrpc) in memory is the vendor's bundle (C(nfs_bundle_version)) and the loaded
    C(rpcrdma) has the srcversion recorded for the running kernel in C(/etc/gpufabric/vendor_nfs.json).
  - A volume that is not mounted, mounted over TCP or from another source is drift; the fix mounts it
    (C(systemctl start)) or mounts it again (C(systemctl restart)) and reads mountinfo back, failing when the
    mount still differs. A volume with O(volumes[].state=absent) is unmounted, disabled and its unit removed when
    the unit is one this module wrote (its header); an admin's own unit, a masked one or a mount with no unit of the
    module's is left alone, and the volume says so (C(ownership=not_ours), C(ownership_reason)).
  - Every value is validated for the unit file before anything is touched; a mount point that C(/etc/fstab) also
    names is refused. Returns the concern C(nfs_mounts) (see C(docs/concerns.md)).
author:
  - gpufabric developers (@gpufabric)
options:
  volumes:
    description: The storage volumes. Empty makes the concern C(not_applicable).
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: The mount point (absolute, normalized, characters C([A-Za-z0-9._+,:=@-])); it names the unit.
        type: path
        required: true
      server:
        description: The NFS server - a host name, an IPv4 or an IPv6 address (no zone). Required when present.
        type: str
      export:
        description: The exported path on the server (absolute, characters C([A-Za-z0-9._+,:=@-])). Required when
          present.
        type: str
      vers:
        description:
          - The NFS version - C(3), C(4) (the kernel negotiates 4.x), C(4.0), C(4.1) or C(4.2); C(4.2) when neither
            this nor a version flag in O(volumes[].options) gives one.
          - The kernel's version flags in O(volumes[].options) (C(v3), C(v4), C(v4.0), C(v4.1), C(v4.2)) are folded
            into this one version; flags or a C(vers) that contradict each other are refused.
        type: str
      nconnect:
        description:
          - Transport connections per server - 1..16 with the kernel's client, 1..64 with the vendor client (its
            examples use 32). Not given when omitted.
          - The kernel's client before 6.9 ignores it for NFSv4 over RDMA and does not show it in mountinfo; the
            volume then lists it in C(not_effective) as C(not_applicable) with the reason, and it is not drift.
        type: int
      port:
        description: The server's NFS over RDMA port.
        type: int
        default: 20049
      options:
        description:
          - Further mount options, each C(name) or C(name=value) (no comma, white space, quote, backslash, C(%) or
            control character). C(proto), C(port), C(vers), C(nfsvers), C(nconnect), C(remoteports),
            C(localports) and the like are refused here - use the keys above.
          - The check reads each one back from the state the kernel shows in mountinfo (C(hard), C(soft),
            C(noatime), C(timeo=), C(retrans=), C(sec=), C(actimeo=), C(lookupcache=), C(nolock), ...; a C(rsize) or
            C(wsize) the server lowered is not drift, a larger one is); a mount that shows otherwise is drift on
            key C(option:<name>) and is mounted again by the fix.
        type: list
        elements: str
        default: []
      remoteports:
        description: The vendor client's server addresses (C(~)-separated IPv4 addresses or C(A-B) ranges, or
          C(dns) for every address the server name resolves to). Refused unless the vendor client is the one
          installed for the running kernel.
        type: str
      localports:
        description: The vendor client's local ports (C(~)-separated IPv4 addresses, C(A-B) ranges or interface
          names). Refused unless the vendor client is the one installed for the running kernel.
        type: str
      state:
        description: C(absent) unmounts the volume and removes its unit - only a unit this module wrote.
        type: str
        choices: [present, absent]
        default: present
  vendor_client:
    description:
      - C(auto) wants the vendor NFS client when it is recorded as installed for the running kernel, C(required)
        fails when it is not, C(in_tree) never wants it (the multipath options are then refused).
    type: str
    choices: [auto, required, in_tree]
    default: auto
  unit_dir:
    description: Where the mount units are written.
    type: path
    default: /etc/systemd/system
  after_units:
    description: Units the mounts start after (besides network-online.target).
    type: list
    elements: str
    default: [gpufabric-apply.service]
  before_units:
    description: Units that start after the mounts (what the workloads wait for).
    type: list
    elements: str
    default: [remote-fs.target]
attributes:
  check_mode:
    support: full
    description: Reports what would change and the drift; writes nothing and runs only C(systemctl is-enabled).
  diff_mode:
    support: full
    description: Diff of the mount units.
  platform:
    support: full
    platforms: posix
    description: Linux booted with systemd.
"""

EXAMPLES = r"""
- name: Two volumes over RDMA, after the boot-time applier
  gpufabric.node.nfs_mounts:
    volumes:
      - path: /mnt/datasets
        server: 10.77.0.10
        export: /srv/datasets
        vers: "4.1"
        nconnect: 4
        options: [hard, noatime]
      - path: /mnt/old-scratch
        state: absent

- name: The vendor client's multipath across four storage addresses and two rails
  gpufabric.node.nfs_mounts:
    vendor_client: required
    volumes:
      - path: /mnt/vast
        server: 172.25.1.1
        export: /datasets
        vers: "3"
        nconnect: 8
        remoteports: 172.25.1.1-172.25.1.4
        localports: ens1np0~ens2np0
"""

RETURN = r"""
volumes:
  description: Per volume what mountinfo shows at its path (C(mounted), C(fstype), C(source), C(proto), C(port),
    C(vers), C(nconnect), C(remoteports), C(localports)), its C(unit), C(state), whether it is C(ok), and
    C(options_not_compared), the extra options the kernel keeps no record of (C(_netdev), C(x-systemd.*), ...) or
    that the check does not know; they are checked in the unit file only.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/mnt/nfs-rdma", "unit": "mnt-nfs\\x2drdma.mount", "mounted": true, "fstype": "nfs4",
            "source": "10.77.0.10:/srv/nfs", "proto": "rdma", "port": "20049", "vers": "4.1", "ok": true}]
client:
  description: The NFS client in use (C(in_use) vendor, in_tree or not_loaded), whether the vendor client is
    C(installed) for the running kernel, C(nfs_bundle_version) and the C(rpcrdma) srcversions.
  returned: always
  type: dict
vendor_wanted:
  description: Whether the vendor client is wanted on this node (O(vendor_client)).
  returned: always
  type: bool
actions:
  description: The systemctl commands run, with their exit status.
  returned: always
  type: list
  elements: dict
drift:
  description: The deviations found before anything was changed (concern C(nfs_mounts)).
  returned: always
  type: list
  elements: dict
concerns:
  description: The status of concern C(nfs_mounts) (see C(docs/concerns.md)), keyed by C(nfs_mounts).
  returned: always
  type: dict
  sample: {"nfs_mounts": {"status": "ok", "reason": null, "items": []}}
ansible_facts:
  description: C(gpufabric_nfs_mounts) - C(volumes), C(client) and C(nfs), every NFS mount of the node as
    mountinfo shows it.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import task as nfs_mounts_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=nfs_mounts_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**nfs_mounts_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
