#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_capture
short_description: Capture what GPU fabric discovery reads from a node into one shareable tarball
version_added: 0.1.0
description:
  - Runs one discovery pass (as M(gpufabric.node.gpufabric_facts)) and records every path it reads - the sysfs PCI,
    net, infiniband and IOMMU entries with their symbolic links kept as links, the PCI config spaces as their bytes,
    the C(/proc) files and the few files under C(/etc) - into C(<dest>.tar.gz), and the facts of that pass into
    C(<dest>.facts.json). Nothing else is copied; directories discovery lists keep their entry names (files it did
    not read are empty). Discovery runs no tools, so the capture holds no command output.
  - Unpacked, the tarball is a sysroot; discovery run over it with C(GPUFABRIC_SYSROOT) gives exactly the facts
    in C(<dest>.facts.json). Attach both to a bug report; tests replay captures kept as fixtures.
  - The tarball holds regular files, directories and relative symlinks that stay inside it, and is deterministic
    (sorted, mtime 0, owner root); the same node state gives the same bytes, so a second run reports no change.
    Device nodes that discovery opens (C(/dev/nvidia-fs0)) become empty files.
  - Only the output files are written (atomically); the node is not changed. Run with C(become) so the full PCI
    config spaces (ACS) are captured; without root the kernel gives 64 bytes of each.
author:
  - gpufabric developers (@gpufabric)
options:
  dest:
    description:
      - Output prefix; the module writes C(<dest>.tar.gz) and C(<dest>.facts.json). Its directory must exist.
      - A normalized path of letters, digits and C(._+,:=@-) (no C(..), quotes or shell characters).
    type: path
    required: true
  mask:
    description:
      - Replace addresses and the host name, consistently within the capture (the same value always gets the same
        mask) and in the facts alike, so the capture replays to the masked facts - MAC and IPoIB addresses, GUIDs
        (one made from a MAC stays derived from the masked MAC), GIDs and the IPv4 addresses they carry, the host
        name, and the PCIe Device Serial Number of config spaces. Process names stay (the Fabric Manager check reads
        them).
      - C(/proc/cmdline) is masked by an allow-list - only the values of the IOMMU parameters discovery reads and of
        C(pci=) stay; every other parameter keeps its name with the value C(masked), bare words and the init's
        arguments become C(masked).
    type: bool
    default: true
  gather_subset:
    description:
      - What discovery gathers, as O(gpufabric.node.gpufabric_facts#module:gather_subset) of
        M(gpufabric.node.gpufabric_facts).
    type: list
    elements: str
    default: [all]
attributes:
  check_mode:
    support: full
    description: Captures in memory and reports whether the files would change; writes nothing.
  diff_mode:
    support: none
    description: The output is binary.
  platform:
    support: full
    platforms: posix
    description: Linux with sysfs and procfs.
"""

EXAMPLES = r"""
- name: Capture the node's fabric shape for a bug report
  gpufabric.node.fabric_capture:
    dest: /tmp/{{ inventory_hostname }}-fabric
  become: true

- name: Fetch it
  ansible.builtin.fetch:
    src: /tmp/{{ inventory_hostname }}-fabric.tar.gz
    dest: captures/
"""

RETURN = r"""
tarball:
  description: Path of the capture tarball.
  returned: success
  type: str
  sample: /tmp/gpu01-fabric.tar.gz
facts_file:
  description: Path of the facts of the captured discovery pass (JSON, masked like the tarball).
  returned: success
  type: str
  sample: /tmp/gpu01-fabric.facts.json
entries:
  description: Number of entries (files, directories, links) in the tarball.
  returned: success
  type: int
  sample: 5120
manifest:
  description: What the tarball's C(gpufabric-capture.json) says - C(format), C(architecture), C(gather_subset),
    C(masked), C(mask_counts) (how many distinct values of each kind were masked), C(unreadable) (paths left out,
    with why), C(device_nodes_as_files).
  returned: success
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.report import capture
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def _differs(path, data):
    try:
        with open(path, "rb") as f:
            return f.read() != data
    except (IOError, OSError):
        return True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            mask=dict(type="bool", default=True),
            gather_subset=dict(type="list", elements="str", default=["all"]),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module)
    p = module.params
    try:
        # a relative prefix is taken from the working directory, then checked as it is (no '..' normalised away)
        dest = inputs.safe_path(p["dest"] if p["dest"].startswith("/") else os.path.join(os.getcwd(), p["dest"]),
                                "dest")
    except inputs.InputError as e:
        module.fail_json(msg=str(e))
    if not os.path.isdir(os.path.dirname(dest)):
        module.fail_json(msg="dest %s: directory %s does not exist" % (dest, os.path.dirname(dest)))
    try:
        topology.normalize_subset(p["gather_subset"])
    except ValueError as e:
        module.fail_json(msg=str(e))
    try:
        cap = capture.capture(Sysroot(), p["gather_subset"], mask=p["mask"])
    except (capture.CaptureError, OSError, IOError, ValueError) as e:
        module.fail_json(msg="capturing the fabric discovery failed: %s" % e)
    out = dict(tarball=dest + ".tar.gz", facts_file=dest + ".facts.json", entries=len(cap["entries"]),
               manifest=cap["manifest"])
    if module.check_mode:
        changed = _differs(out["tarball"], capture.tarball(cap)) or \
            _differs(out["facts_file"], capture.facts_json(cap).encode("utf-8"))
        module.exit_json(changed=changed, **out)
    try:
        written = capture.write_capture(dest, cap)
    except (OSError, IOError) as e:
        module.fail_json(msg="writing the capture %s failed: %s" % (dest, e), **out)
    module.exit_json(changed=any(c for _p, c in written), **out)


if __name__ == "__main__":
    main()
