#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_cmdline
short_description: Ensure kernel command line arguments for the next boot
version_added: "0.1.0"
description:
  - Adds kernel arguments to, and removes them from, the boot loader configuration so that the next boot
    gets them, and reports whether the running kernel (C(/proc/cmdline)) already has them.
  - "Conflicting values of the same parameter are replaced wherever they come from: C(iommu=off) becomes
    C(iommu=pt). C(pci=) is merged per sub-option, as the kernel's C(pci_setup) splits it on commas:
    C(pci=disable_acs_redir=X) merged into C(pci=realloc) gives C(pci=realloc,disable_acs_redir=X).
    C(console), C(memmap), C(hugepagesz), C(hugepages) and C(ip) add up instead of replacing each other."
  - On Debian and Ubuntu the collection owns one drop-in, C(/etc/default/grub.d/99-gpufabric.cfg). It assigns
    the complete effective C(GRUB_CMDLINE_LINUX) and C(GRUB_CMDLINE_LINUX_DEFAULT) computed by sourcing
    C(/etc/default/grub) and the other drop-ins with C(/bin/sh); then C(update-grub) (or C(grub-mkconfig)) runs.
    Requested arguments are placed in C(GRUB_CMDLINE_LINUX), so recovery entries get them too.
    The drop-in is removed again when the other files alone give the wanted result.
  - On EL (RHEL, CentOS, Rocky, Alma, Fedora) C(grubby --info=ALL) is read and only the difference is
    applied with C(grubby --update-kernel=ALL --args=... --remove-args=...).
  - Never reboots. Use the returned C(reboot_required) (the C(gpufabric.node.iommu) role reboots through a
    handler gated by a variable).
author:
  - gpufabric developers (@gpufabric)
options:
  present:
    description:
      - Arguments that must be on the command line, one per item, as C(key=value) or a flag (C(nosmt)).
      - Other values of the same key are removed (except for cumulative keys, see above).
      - C(iommu=) is checked against the x86 options of the kernel documentation.
        C(pci=disable_acs_redir=) takes C(;)-separated devices in path form
        (C(0000:00:01.0/00.0)) or id form (C(pci:15b3:1021)).
    type: list
    elements: str
    default: []
  absent:
    description:
      - Arguments that must not be on the command line. A bare key (C(iommu)) removes it with any value,
        C(key=value) removes only that exact argument. For C(pci=) the items are sub-options
        (C(pci=disable_acs_redir) removes that sub-option whatever its value).
      - The same key (or C(pci=) sub-option) cannot be both present and absent.
    type: list
    elements: str
    default: []
  bootloader:
    description:
      - Which tool persists the command line. V(auto) decides from C(/etc/os-release) C(ID)/C(ID_LIKE),
        then from the tools found in C(PATH).
    type: str
    choices: [auto, grub, grubby]
    default: auto
  update_bootloader:
    description:
      - On Debian/Ubuntu, run C(update-grub) (or C(grub-mkconfig -o)) after the drop-in changed.
        Set to V(false) when something else regenerates C(grub.cfg) later (e.g. a kernel package install
        in the same play). grubby changes the entries directly and ignores this option.
    type: bool
    default: true
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Nothing is written and neither update-grub nor a mutating grubby command runs.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: Shows the effective GRUB variables (Debian) or the default entry's args (EL) before and after.
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
    details: Linux with GRUB 2 (Debian/Ubuntu drop-in) or grubby (EL with Boot Loader Spec entries).
notes:
  - The drop-in assigns complete values. Edit C(/etc/default/grub) freely, then run this module again
    (every run recomputes the drop-in from the current files).
  - All paths go through C(GPUFABRIC_SYSROOT) when it is set (the simulated node).
seealso:
  - name: Kernel parameters
    description: The kernel's documentation of command line parameters.
    link: https://docs.kernel.org/admin-guide/kernel-parameters.html
"""

EXAMPLES = r"""
- name: IOMMU passthrough for GPUDirect RDMA and GDS
  gpufabric.node.kernel_cmdline:
    present:
      - iommu=pt
  register: gpufabric_cmdline

- name: Keep ACS redirection off on the GPU/NIC switch ports from boot on
  gpufabric.node.kernel_cmdline:
    present:
      - pci=disable_acs_redir=0000:16:01.0/00.0;0000:16:01.0/01.0

- name: Drop a left-over translated-mode setting and an exact debug flag
  gpufabric.node.kernel_cmdline:
    present:
      - iommu=pt
    absent:
      - intel_iommu=strict
      - iommu.strict

- name: Reboot only when the running kernel lacks the arguments
  ansible.builtin.reboot:
  when: gpufabric_cmdline.reboot_required
"""

RETURN = r"""
changed:
  description: Whether the boot loader configuration changed (or would change in check mode).
  returned: always
  type: bool
reboot_required:
  description: The running kernel (/proc/cmdline) lacks a present argument or still has an absent one.
  returned: always
  type: bool
  sample: true
bootloader:
  description: The backend used.
  returned: always
  type: str
  sample: grub
cmdline_current:
  description: The running kernel's command line (/proc/cmdline).
  returned: always
  type: str
  sample: BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=3f1a2c9e ro iommu=off
cmdline_next:
  description: >-
    The arguments the next boot gets from the configuration (Debian: GRUB_CMDLINE_LINUX followed by
    GRUB_CMDLINE_LINUX_DEFAULT; EL: root= and the default entry's args).
  returned: always
  type: str
  sample: iommu=pt quiet splash
args_added:
  description: Arguments added to the next boot's command line.
  returned: always
  type: list
  elements: str
  sample: [iommu=pt]
args_removed:
  description: Arguments removed from the next boot's command line.
  returned: always
  type: list
  elements: str
  sample: [iommu=off]
actions:
  description: What was (or in check mode would be) done.
  returned: always
  type: list
  elements: str
  sample: [write /etc/default/grub.d/99-gpufabric.cfg]
drift:
  description: >-
    One entry per deviation found before applying: object C(bootloader) for the next boot's configuration,
    object C(running) for /proc/cmdline.
  returned: always
  type: list
  elements: dict
  sample:
    - {concern: cmdline, object: bootloader, key: iommu, current: iommu=off, desired: iommu=pt}
    - {concern: cmdline, object: running, key: iommu, current: iommu=off, desired: iommu=pt}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.cmdline import (
    CmdlineError,
    CommandError,
    ensure,
)


def _runner(module):
    def run(argv):
        return module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})
    return run


def _bin_path(module):
    def which(name):
        if name == "env":
            return module.get_bin_path("env", required=True)
        return module.get_bin_path(name)
    return which


def main():
    module = AnsibleModule(
        argument_spec=dict(
            present=dict(type="list", elements="str", default=[]),
            absent=dict(type="list", elements="str", default=[]),
            bootloader=dict(type="str", choices=["auto", "grub", "grubby"], default="auto"),
            update_bootloader=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = ensure(
            present=p["present"],
            absent=p["absent"],
            run=_runner(module),
            bin_path=_bin_path(module),
            bootloader=p["bootloader"],
            update_bootloader=p["update_bootloader"],
            check_mode=module.check_mode,
            arch=os.uname()[4],
        )
    except CommandError as e:
        module.fail_json(msg=str(e), rc=e.rc, stdout=e.out, stderr=e.err, cmd=e.argv)
    except CmdlineError as e:
        module.fail_json(msg=str(e))
    diff = result.pop("diff")
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
