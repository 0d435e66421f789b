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
  - "In the configuration the collection owns (its GRUB drop-in, grubby's entries) conflicting values of the
    same parameter are replaced: C(iommu=off) becomes C(iommu=pt). C(pci=) is handled per sub-option, as the
    kernel's C(pci_setup) splits it on commas: C(pci=disable_acs_redir=X) merged into C(pci=realloc) gives
    C(pci=realloc,disable_acs_redir=X). C(console), C(memmap), C(hugepagesz), C(hugepages) and C(ip) add up
    instead of replacing each other."
  - "On Debian and Ubuntu the collection owns one drop-in, C(/etc/default/grub.d/99-gpufabric.cfg). It appends
    the requested arguments to C(GRUB_CMDLINE_LINUX) as C(/etc/default/grub) and the drop-ins sorting before it
    set it (C(GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }iommu=pt\")), so arguments an admin
    adds to C(/etc/default/grub) later still boot; then C(update-grub) (or C(grub-mkconfig)) runs. What those
    files already carry is not appended again (for C(pci=) only the missing sub-options). The drop-in is
    removed when nothing is left to append. Drop-ins of earlier versions, which assigned the whole variables,
    are rewritten once into this form."
  - "The module never rewrites C(/etc/default/grub) or another drop-in. An argument there that conflicts with
    the request (C(iommu=off) against C(iommu=pt), an argument in O(absent), a C(pci=) sub-option with another
    value), or a drop-in sorting after ours that drops our arguments, is reported as drift naming the file
    (C(concerns.cmdline) is V(drift) with the operator's fix as reason), not overridden."
  - On EL (RHEL, CentOS, Rocky, Alma, Fedora) C(grubby --info=ALL) is read and only the difference is
    applied with C(grubby --update-kernel=ALL --args=... --remove-args=...).
  - "On a host whose boot loader the collection does not drive (a microVM or cloud VM whose command line comes
    from the hypervisor, systemd-boot, a UKI) nothing is written and the module does not fail, in check mode or
    a real run: C(changed) and C(reboot_required) are false, and C(concerns.cmdline) is V(not_applicable) when
    C(/proc/cmdline) already has what is wanted, else V(drift) with items against the running command line; the
    reason says what to do instead (the VM definition; C(/etc/kernel/cmdline) and C(kernel-install add))."
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
      - An absent argument in an admin's GRUB file is reported as a conflict, not removed.
    type: list
    elements: str
    default: []
  bootloader:
    description:
      - Which boot loader sets the command line. V(auto) detects it from the host's layout; the EFI variables
        of the running boot first (C(StubInfo) of systemd-stub means V(uki), C(LoaderInfo) C(systemd-boot ...)
        means V(systemd-boot)), then GRUB (C(update-grub)/C(grub-mkconfig)/C(grub2-mkconfig) in C(PATH) and
        C(/etc/default/grub) or a C(grub.cfg)) or grubby (EL, C(grubby) and C(/boot/loader/entries)), then the
        files of systemd-boot (C(EFI/systemd/), C(loader/loader.conf), C(loader/entries.srel)) and of UKIs
        (C(EFI/Linux/*.efi), C(layout=uki) in C(/etc/kernel/install.conf)) below C(/efi), C(/boot),
        C(/boot/efi); else V(none).
      - V(grub) and V(grubby) are driven; V(systemd-boot), V(uki) and V(none) are only checked against
        C(/proc/cmdline) (see above). V(none) also serves a VM whose GRUB files exist but are not what boots it.
      - An explicitly requested V(grub), V(grubby), V(systemd-boot) or V(uki) that the host lacks is an error.
    type: str
    choices: [auto, grub, grubby, systemd-boot, uki, none]
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
    details: Shows the collection's GRUB drop-in (Debian) or the default entry's args (EL) before and after.
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
    details: >-
      Linux with GRUB 2 (Debian/Ubuntu drop-in) or grubby (EL with Boot Loader Spec entries); checked only on
      systemd-boot, UKIs and hosts without a boot loader.
notes:
  - "Edit C(/etc/default/grub) freely: the drop-in only appends. Requested arguments an admin's file already
    carries (in C(GRUB_CMDLINE_LINUX) or C(GRUB_CMDLINE_LINUX_DEFAULT)) are not appended again; recovery
    entries (C(GRUB_CMDLINE_LINUX) only) then lack the ones carried by C(GRUB_CMDLINE_LINUX_DEFAULT)."
  - "Several callers share the drop-in (the iommu and pcie_acs roles): arguments of earlier calls stay until a
    call lists them in O(absent)."
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

- name: A VM whose command line the hypervisor sets (GRUB installed but unused) is only checked
  gpufabric.node.kernel_cmdline:
    present:
      - iommu=pt
    bootloader: none
  register: gpufabric_vm_cmdline

- name: Show what the operator must set in the VM definition
  ansible.builtin.debug:
    msg: "{{ gpufabric_vm_cmdline.concerns.cmdline.reason }}"
  when: gpufabric_vm_cmdline.concerns.cmdline.status != 'not_applicable'
"""

RETURN = r"""
changed:
  description: Whether the boot loader configuration changed (or would change in check mode).
  returned: always
  type: bool
reboot_required:
  description: >-
    The running kernel (/proc/cmdline) lacks a present argument or still has an absent one, and the next boot
    fixes at least one of them (false when a conflicting argument of the admin's would stay, and always false
    on a boot loader the collection does not drive).
  returned: always
  type: bool
  sample: true
bootloader:
  description: The boot loader found (or requested).
  returned: always
  type: str
  choices: [grub, grubby, systemd-boot, uki, none]
  sample: grub
bootloader_evidence:
  description: What the detection saw (tools, files, EFI variables).
  returned: always
  type: list
  elements: str
  sample: [/usr/sbin/update-grub, /etc/default/grub, /boot/grub/grub.cfg]
concerns:
  description: >-
    The status of the C(cmdline) concern (see docs/concerns.md). V(ok) when the next boot's configuration has
    what is wanted (in a real run after the change, with C(corrected) true when something was changed); V(drift)
    in check mode when it lacks something, in both modes when an admin's file conflicts (items with the file as
    C(object), the argument as C(current)), and on a boot loader the collection does not drive when
    /proc/cmdline lacks something (items with object C(running)); V(not_applicable) on such a boot loader when
    /proc/cmdline already has everything. A pending reboot is C(reboot_required), not part of this status.
  returned: always
  type: dict
  contains:
    cmdline:
      description: "C({status, reason, items})"
      type: dict
  sample:
    cmdline:
      status: drift
      reason: >-
        /etc/default/grub has iommu=off in GRUB_CMDLINE_LINUX_DEFAULT, which conflicts with iommu=pt: remove it
        there; then run update-grub (the collection never rewrites the admin's GRUB files)
      items:
        - {concern: cmdline, object: /etc/default/grub, key: iommu, current: iommu=off, desired: iommu=pt}
cmdline_current:
  description: The running kernel's command line (/proc/cmdline).
  returned: always
  type: str
  sample: BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=3f1a2c9e ro iommu=off
cmdline_next:
  description: >-
    The arguments the next boot gets from the configuration (Debian: GRUB_CMDLINE_LINUX followed by
    GRUB_CMDLINE_LINUX_DEFAULT; EL: root= and the default entry's args); null on a boot loader the collection
    does not drive.
  returned: always
  type: str
  sample: iommu=pt quiet splash
kernel_cmdline_file:
  description:
    - EL (grubby) only, else null. C(/etc/kernel/cmdline), from which kernel-install writes the BLS entry of a kernel
      installed later, kept in step with the entries (created from the default entry when missing). C(path),
      C(before) (its arguments, null when missing), C(after), C(action) (C(unchanged), C(would change), C(written),
      C(created)).
  returned: always
  type: dict
  sample: {"path": "/etc/kernel/cmdline", "before": ["root=UUID=1", "ro"], "after": ["root=UUID=1", "ro", "iommu=pt"],
           "action": "written"}
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
  sample: [write /etc/default/grub.d/99-gpufabric.cfg, run /usr/sbin/update-grub]
drift:
  description: >-
    One entry per deviation found before applying: object C(bootloader) for the next boot's configuration,
    the file's path for a conflicting argument of the admin's (GRUB), object C(running) for /proc/cmdline.
  returned: always
  type: list
  elements: dict
  sample:
    - {concern: cmdline, object: bootloader, key: iommu, current: iommu=off, desired: iommu=pt}
    - {concern: cmdline, object: running, key: iommu, current: iommu=off, desired: iommu=pt}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import task as cmdline_task
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=cmdline_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**cmdline_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
