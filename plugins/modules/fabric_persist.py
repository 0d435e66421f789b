#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_persist
short_description: Install the boot-time applier that re-applies runtime-only fabric settings
version_added: 0.1.0
description:
  - Installs C(gpufabric-apply), which re-applies what the collection's modules recorded in
    C(/etc/gpufabric/state.json) (DCB, rdma_cm default RoCE ToS, ACS, nvidia-fs C(rw_stats_enabled), per-rail
    routing), the settings the kernel forgets at reboot and, for ToS and DCB, whenever an RDMA device registers again.
  - The applier runs the very module_utils this module was shipped with. The module writes their source, taken from
    its own payload, below O(lib_dir) (C(ansible_collections/gpufabric/node/plugins/module_utils/)), so the node
    always runs the same code as the modules. Files of that directory that are no longer part of the collection are
    removed.
  - Writes a oneshot unit C(gpufabric-apply.service) (enabled, C(WantedBy=multi-user.target)), ordered after
    C(network-online.target) (routing needs the rail addresses) and before remote file systems (NFS over RDMA),
    C(kubelet.service) and C(slurmd.service), so workloads start with the fabric configured.
  - Writes a template unit C(gpufabric-apply@.service) and a udev rule that starts it with
    C(systemctl --no-block restart gpufabric-apply@<ibdev>.service) on every C(add) event of an RDMA device.
    The work runs in a service, not in udev's C(RUN) (which udev kills when the event is done and runs in a
    sandbox that forbids mounting configfs); C(restart) rather than C(start) guarantees a fresh run after a
    registration that happens while an earlier run of the same device is still going.
  - Runs C(systemctl daemon-reload) when a unit changed, C(systemctl enable) when the boot unit is not enabled
    and C(udevadm control --reload) when the rule changed.
  - Every file is written atomically and only when its content differs.
author:
  - gpufabric developers (@gpufabric)
options:
  state:
    description:
      - C(present) installs, C(absent) disables the boot unit and removes every file this module installs
        (the recorded state in C(/etc/gpufabric) is kept).
    type: str
    choices: [present, absent]
    default: present
  python:
    description:
      - Interpreter of the C(gpufabric-apply) script. Defaults to the interpreter that runs this module (the
        node's Python as Ansible discovered it). It needs C(pyroute2) only when per-rail routing is recorded.
    type: path
  lib_dir:
    description: Directory that receives the copy of the collection's module_utils.
    type: path
    default: /usr/local/lib/gpufabric
  script:
    description: Path of the C(gpufabric-apply) script.
    type: path
    default: /usr/local/sbin/gpufabric-apply
  unit_dir:
    description: Directory of the systemd units.
    type: path
    default: /etc/systemd/system
  rules_file:
    description: The udev rule file.
    type: path
    default: /etc/udev/rules.d/90-gpufabric-rdma.rules
  boot_wait:
    description: Seconds the boot run waits for recorded devices that have not appeared yet before it fails.
    type: int
    default: 60
  device_wait:
    description: Seconds a per-device run (udev) waits for the device's rails and configfs ports.
    type: int
    default: 10
  before_units:
    description:
      - Units the boot run is ordered before (C(Before=)). Units that do not exist on the node are harmless.
    type: list
    elements: str
    default: [remote-fs-pre.target, kubelet.service, slurmd.service]
  enabled:
    description: Enable C(gpufabric-apply.service) (C(state=present) only).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reports what would be written, removed, reloaded or enabled; changes nothing.
  diff_mode:
    support: full
    description: Diff of the unit files, the udev rule and the script (the module_utils copy is summarised).
  platform:
    support: full
    platforms: posix
    description: Linux with systemd and udev.
notes:
  - Needs root.
  - The modules record what they applied through C(module_utils/state.py); this module only installs the applier.
seealso:
  - module: gpufabric.node.rdma_cm_tos
  - module: gpufabric.node.dcb_qos
  - module: gpufabric.node.pcie_acs
"""

EXAMPLES = r"""
- name: Install the boot-time applier
  gpufabric.node.fabric_persist:

- name: Install it with the platform's Python and a longer boot wait
  gpufabric.node.fabric_persist:
    python: /usr/bin/python3
    boot_wait: 120

- name: Remove it
  gpufabric.node.fabric_persist:
    state: absent
"""

RETURN = r"""
files:
  description: Every file the module manages, with what happened to it.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Host path.
      type: str
      sample: /etc/systemd/system/gpufabric-apply.service
    action:
      description: C(created), C(updated), C(removed), C(unchanged) (with C(would ) in check mode).
      type: str
      sample: created
module_utils:
  description: Names of the module_utils installed for the applier.
  returned: always
  type: list
  elements: str
  sample: [acs, applier, dcb, pci, rdma_cm, routing, state, sysctl, sysroot, topology]
commands:
  description: The systemctl/udevadm commands run (or that would run in check mode).
  returned: always
  type: list
  elements: str
  sample: ["systemctl daemon-reload", "systemctl enable gpufabric-apply.service", "udevadm control --reload"]
"""

import os
import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import applier
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

PKG = "ansible_collections.gpufabric.node.plugins.module_utils"
PKG_PATH = PKG.replace(".", "/")
UNIT = "gpufabric-apply.service"
TEMPLATE = "gpufabric-apply@.service"
# The applier is imported so that Ansible ships it (and everything it imports) with this module.
APPLIER = applier.__name__.rsplit(".", 1)[-1]
HEADER = "Managed by gpufabric.node (fabric_persist): do not edit, rerun the persistence role."


def module_utils_sources():
    """{name: source} of the collection's module_utils loaded in this process (the applier's imports)."""
    out = {}
    for name, mod in sorted(sys.modules.items()):
        if mod is None or not name.startswith(PKG + ".") or "." in name[len(PKG) + 1:]:
            continue
        loader = getattr(mod, "__loader__", None)
        source = loader.get_source(name) if loader is not None and hasattr(loader, "get_source") else None
        if source is None:
            raise RuntimeError("cannot read the source of %s from %r" % (name, loader))
        out[name[len(PKG) + 1:]] = source
    if APPLIER not in out:
        raise RuntimeError("module_utils.%s is not loaded" % APPLIER)
    return out


def render_script(python, script, lib_dir):
    rel = os.path.relpath(lib_dir, os.path.dirname(script))
    return (
        "#!%s\n"
        "# %s\n"
        "\"\"\"gpufabric-apply: re-apply the runtime-only fabric settings recorded in /etc/gpufabric/state.json.\n\n"
        "Runs the copy of the gpufabric.node module_utils installed in %s (found relative to this\n"
        "script, so it also works below a simulated node's root). --help for the options.\n"
        "\"\"\"\n"
        "import os\n"
        "import sys\n\n"
        "sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), %r)))\n\n"
        "from ansible_collections.gpufabric.node.plugins.module_utils.applier import main  # noqa: E402\n\n"
        "raise SystemExit(main())\n" % (python, HEADER, lib_dir, rel))


def render_unit(script, boot_wait, before_units):
    return (
        "# %s\n"
        "[Unit]\n"
        "Description=Re-apply gpufabric runtime fabric settings (DCB, RoCE ToS, ACS, nvidia-fs, rail routing)\n"
        "Documentation=man:systemd.service(5)\n"
        "# Rail addresses must be configured before per-rail routes can be added with their source address.\n"
        "Wants=network-online.target\n"
        "After=network-online.target systemd-modules-load.service\n"
        "# Lossless class and ToS in place before NFS over RDMA mounts and before workloads start.\n"
        "Before=%s\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        "ExecStart=%s --wait %d\n"
        "TimeoutStartSec=%d\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n" % (HEADER, " ".join(before_units), script, boot_wait, boot_wait + 120))


def render_template(script, device_wait):
    return (
        "# %s\n"
        "[Unit]\n"
        "Description=Re-apply gpufabric DCB and RoCE ToS of RDMA device %%I\n"
        "# At boot, let the full run go first; both serialise on /run/gpufabric-apply.lock anyway.\n"
        "After=gpufabric-apply.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "ExecStart=%s --device %%I --wait %d\n"
        "TimeoutStartSec=%d\n" % (HEADER, script, device_wait, device_wait + 60))


def render_rule(systemctl):
    return (
        "# %s\n"
        "# An RDMA device registered (boot, driver reload, firmware reset): its ToS is 0 again and its rail's DCB\n"
        "# may be gone. Start the work as a service: udev kills RUN programs when the event is done.\n"
        "ACTION==\"add\", SUBSYSTEM==\"infiniband\", "
        "RUN+=\"%s --no-block restart gpufabric-apply@%%k.service\"\n" % (HEADER, systemctl))


class Installer(object):
    def __init__(self, module, sysroot):
        self.module = module
        self.sysroot = sysroot
        self.check = module.check_mode
        self.files = []
        self.diffs = []
        self.changed_paths = set()

    def _note(self, path, action):
        self.files.append({"path": path, "action": ("would be " + action) if self.check and action != "unchanged"
                           else action})
        if action != "unchanged":
            self.changed_paths.add(path)

    def put(self, path, content, mode=0o644, diff=True):
        before = self.sysroot.read_raw(path, None)
        real_mode = None
        if before is not None:
            real_mode = os.stat(self.sysroot.path(path)).st_mode & 0o7777
        if before == content and real_mode == mode:
            self._note(path, "unchanged")
            return False
        if diff:
            self.diffs.append({"before": before or "", "after": content, "before_header": path, "after_header": path})
        if not self.check:
            self.sysroot.write_file_atomic(path, content, mode)
        self._note(path, "created" if before is None else "updated")
        return True

    def drop(self, path, diff=True):
        before = self.sysroot.read_raw(path, None)
        if before is None and not self.sysroot.exists(path):
            return False
        if diff:
            self.diffs.append({"before": before or "", "after": "", "before_header": path, "after_header": path})
        if not self.check:
            self.sysroot.remove(path)
        self._note(path, "removed")
        return True


def lib_files(lib_dir, sources):
    """{path: content} of the module_utils copy, with empty __init__.py on every package level."""
    files = {}
    parts = PKG_PATH.split("/")
    for i in range(1, len(parts) + 1):
        files["%s/%s/__init__.py" % (lib_dir, "/".join(parts[:i]))] = ""
    for name, src in sources.items():
        files["%s/%s/%s.py" % (lib_dir, PKG_PATH, name)] = src
    return files


def existing_lib_files(sysroot, lib_dir):
    out = []
    parts = PKG_PATH.split("/")
    for i in range(1, len(parts) + 1):
        d = "%s/%s" % (lib_dir, "/".join(parts[:i]))
        for name in sysroot.listdir(d):
            p = "%s/%s" % (d, name)
            if name.endswith(".py") and not sysroot.isdir(p):
                out.append(p)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            python=dict(type="path"),
            lib_dir=dict(type="path", default="/usr/local/lib/gpufabric"),
            script=dict(type="path", default="/usr/local/sbin/gpufabric-apply"),
            unit_dir=dict(type="path", default="/etc/systemd/system"),
            rules_file=dict(type="path", default="/etc/udev/rules.d/90-gpufabric-rdma.rules"),
            boot_wait=dict(type="int", default=60),
            device_wait=dict(type="int", default=10),
            before_units=dict(type="list", elements="str", default=["remote-fs-pre.target", "kubelet.service",
                                                                    "slurmd.service"]),
            enabled=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for key in ("lib_dir", "script", "unit_dir", "rules_file"):
        if not os.path.isabs(p[key]):
            module.fail_json(msg="%s must be an absolute path on the node (got %r)" % (key, p[key]))
    for key in ("boot_wait", "device_wait"):
        if not 0 <= p[key] <= 3600:
            module.fail_json(msg="%s must be 0..3600 seconds (got %d)" % (key, p[key]))
    for unit in p["before_units"]:
        if not unit or any(c.isspace() for c in unit) or "/" in unit or "." not in unit:
            module.fail_json(msg="before_units: %r is not a systemd unit name (e.g. kubelet.service)" % (unit,))
    python = p["python"] or sys.executable
    if not os.path.isabs(python):
        module.fail_json(msg="python must be an absolute path (got %r)" % python)

    sysroot = Sysroot()
    inst = Installer(module, sysroot)
    unit_path = "%s/%s" % (p["unit_dir"], UNIT)
    template_path = "%s/%s" % (p["unit_dir"], TEMPLATE)
    commands = []
    systemctl = module.get_bin_path("systemctl", required=True)
    env = {"LC_ALL": "C", "LANG": "C"}

    def run(argv, must=True):
        commands.append(" ".join([os.path.basename(argv[0])] + argv[1:]))
        if module.check_mode:
            return 0, "", ""
        rc, out, err = module.run_command(argv, environ_update=env)
        if rc != 0 and must:
            module.fail_json(msg="%s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()), rc=rc,
                             stdout=out, stderr=err, files=inst.files, commands=commands)
        return rc, out, err

    try:
        sources = module_utils_sources()
    except RuntimeError as e:
        module.fail_json(msg="cannot collect the applier's module_utils: %s" % e)
    wanted_lib = lib_files(p["lib_dir"], sources) if p["state"] == "present" else {}

    try:
        if p["state"] == "present":
            for path in sorted(wanted_lib):
                inst.put(path, wanted_lib[path], 0o644, diff=False)
            for path in existing_lib_files(sysroot, p["lib_dir"]):
                if path not in wanted_lib:
                    inst.drop(path, diff=False)
            inst.put(p["script"], render_script(python, p["script"], p["lib_dir"]), 0o755)
            inst.put(unit_path, render_unit(p["script"], p["boot_wait"], p["before_units"]))
            inst.put(template_path, render_template(p["script"], p["device_wait"]))
            inst.put(p["rules_file"], render_rule(systemctl))
        else:
            if sysroot.exists(unit_path):
                _rc, out, _err = module.run_command([systemctl, "is-enabled", UNIT], environ_update=env)
                if out.strip() == "enabled":
                    run([systemctl, "disable", UNIT])
            for path in (p["rules_file"], template_path, unit_path, p["script"]):
                inst.drop(path)
            for path in existing_lib_files(sysroot, p["lib_dir"]):
                inst.drop(path, diff=False)
    except (IOError, OSError) as e:
        module.fail_json(msg="writing the applier files failed: %s" % e, files=inst.files)

    if unit_path in inst.changed_paths or template_path in inst.changed_paths:
        run([systemctl, "daemon-reload"])
    if p["state"] == "present" and p["enabled"]:
        _rc, out, _err = module.run_command([systemctl, "is-enabled", UNIT], environ_update=env)
        if out.strip() != "enabled":
            run([systemctl, "enable", UNIT])
    if p["rules_file"] in inst.changed_paths:
        udevadm = module.get_bin_path("udevadm", required=True)
        run([udevadm, "control", "--reload"])

    changed = bool(inst.changed_paths) or any(c.startswith(("systemctl enable", "systemctl disable"))
                                              for c in commands)
    result = dict(changed=changed, files=inst.files, commands=commands, module_utils=sorted(sources))
    if module._diff:
        result["diff"] = inst.diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
