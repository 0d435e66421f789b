#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_hold
short_description: Hold the kernel the vendor NFS client was built for (apt-mark hold, dnf versionlock)
version_added: 0.1.0
description:
  - Keeps unattended upgrades from installing a kernel the vendor NFS client was not built for.
  - The OS profile of the node (from C(/etc/os-release), see RV(profile)) decides the mechanism. Debian and Ubuntu
    use C(apt-mark hold) on the installed kernel meta packages (C(linux-generic), C(linux-image-generic-hwe-24.04),
    C(linux-image-amd64) ...; a new version of one pulls a new kernel ABI in) and on the installed packages of the
    held kernel releases (C(linux-image-<k>), C(linux-modules-<k>), C(linux-modules-extra-<k>),
    C(linux-headers-<k>)). EL 9 uses C(dnf versionlock add) on C(kernel-<k>), C(kernel-core-<k>),
    C(kernel-modules-<k>) ... for every kernel package name that is installed; C(dnf upgrade) then installs no
    other kernel. EL needs the versionlock plugin (package C(python3-dnf-plugin-versionlock)).
  - With O(state=held) the holds of other kernel releases are released, so the hold moves to the given releases.
  - With O(state=unheld) the holds of the given releases (of every kernel release when none is given) and of the
    meta packages are released.
  - The holds are read again after the change; a change that did not take fails the task.
  - The held releases are recorded in C(/etc/gpufabric/vendor_nfs.json) (key C(hold)); the one-call drift check
    (M(gpufabric.node.fabric_check)) reads the hold back for the C(vendor_client) concern, and a hold released by
    hand or a kernel installed newer than the held one is drift there.
author:
  - gpufabric developers (@gpufabric)
options:
  kernel_releases:
    description:
      - Kernel releases (C(uname -r) form, e.g. C(6.8.0-45-generic), C(5.14.0-427.13.1.el9_4.x86_64)) to hold.
      - Required with O(state=held).
    type: list
    elements: str
    default: []
  state:
    description: Whether the kernel is held.
    type: str
    choices: [held, unheld]
    default: held
attributes:
  check_mode:
    support: full
    description: Reads the holds and reports what would change; changes nothing.
  diff_mode:
    support: full
    description: The held kernel packages (apt) or versionlock entries (dnf) before and after.
  platform:
    support: full
    platforms: posix
    description: Debian 12/13, Ubuntu 22.04/24.04, EL 9.
notes:
  - On Debian and Ubuntu a release whose packages are not installed yet is held once they are (run the task again
    after installing the kernel); RV(not_installed) names such releases.
seealso:
  - module: gpufabric.node.gpufabric_facts
"""

EXAMPLES = r"""
- name: Hold the running kernel
  gpufabric.node.kernel_hold:
    kernel_releases: ["{{ ansible_facts['kernel'] }}"]

- name: Release every kernel hold
  gpufabric.node.kernel_hold:
    state: unheld
"""

RETURN = r"""
profile:
  description: The OS profile of the node.
  returned: always
  type: str
  sample: ubuntu2404
mechanism:
  description: C(apt-mark) or C(versionlock).
  returned: always
  type: str
held:
  description: Packages (apt) or versionlock entries (dnf) of the kernel held after the task (would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [linux-image-6.8.0-45-generic, linux-generic]
added:
  description: Holds added (would be, in check mode).
  returned: always
  type: list
  elements: str
released:
  description: Holds released (would be, in check mode).
  returned: always
  type: list
  elements: str
not_installed:
  description: Requested kernel releases with no installed package yet.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs, os_profiles
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.vendor_client import hold as kernel_hold
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernel_releases=dict(type="list", elements="str", default=[]),
            state=dict(type="str", choices=["held", "unheld"], default="held"),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module)
    p = module.params
    sysroot = Sysroot()
    profile, why = os_profiles.detect(sysroot)
    if profile is None:
        module.fail_json(msg="kernel hold: %s" % why)
    run = CommandRunner(module, required=True)

    recorded = False
    try:
        # bad input is refused before the node lock (a file) is taken or anything is read
        kernel_hold.check(profile, p["kernel_releases"], p["state"])
        if module.check_mode:
            res = kernel_hold.plan(profile, p["kernel_releases"], p["state"], run)
            recorded = kernel_hold.record(sysroot, p["kernel_releases"], p["state"], check_mode=True)
        else:
            # the held releases go into the vendor client's record, which the drift check reads the hold against
            with nodelock.for_module(module, sysroot, "kernel_hold"):
                res = kernel_hold.apply(profile, p["kernel_releases"], p["state"], run)
                recorded = kernel_hold.record(sysroot, p["kernel_releases"], p["state"])
    except (kernel_hold.HoldError, os_profiles.ProfileError) as e:
        module.fail_json(msg="kernel hold of %s: %s" % (", ".join(p["kernel_releases"]) or "all kernels", e),
                         profile=profile["name"])
    changed = bool(res["hold"] or res["release"] or recorded)
    out = dict(changed=changed, profile=profile["name"], mechanism=profile["hold"], held=res["after"],
               added=res["hold"], released=res["release"], not_installed=res["not_installed"])
    if module._diff:
        out["diff"] = dict(before="\n".join(res["before"]) + "\n", after="\n".join(res["after"]) + "\n",
                           before_header="kernel hold", after_header="kernel hold")
    module.exit_json(**out)


if __name__ == "__main__":
    main()
