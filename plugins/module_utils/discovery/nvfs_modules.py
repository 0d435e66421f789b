# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What nvidia-fs lists in ``/proc/driver/nvidia-fs/modules``, read while a ``/dev/nvidia-fs<N>`` device is held open.

nvidia-fs registers the storage modules (the vendor NFS client's ``rpcrdma``, ``nvme``, ...) only while some process
holds one of its devices open, and unregisters all of them when the last holder closes. From the driver source
(github.com/NVIDIA/gds-nvidia-fs, read at 2.28.4):

* ``src/nvfs-core.c`` ``nvfs_open()``: under ``nvfs_module_mutex``, ``nvfs_get_ops()`` then
  ``nvfs_blk_register_dma_ops()`` (``src/nvfs-dma.c``), which is ``probe_module_list()`` (``src/nvfs-mod.c``): for
  every entry of ``modules_list[]`` (``src/nvfs-dma.c``) not registered yet, ``__symbol_get()`` of its register and
  unregister pair (rpcrdma: ``rpcrdma_register_nvfs_dma_ops`` / ``rpcrdma_unregister_nvfs_dma_ops``) and a call of the
  register function with nvidia-fs's DMA ops. An entry whose module does not export the pair, or whose register call
  fails (dmesg ``nvfs registration failed for module sym``), stays unregistered; the open succeeds anyway. The open
  checks neither the access mode nor the minor (it fails only with EINVAL while nvidia-fs unloads), and the device
  nodes are mode 0666 (``nvfs_devnode()``), so a read-only open of the lowest minor is enough.
* ``nvfs_close()``: ``nvfs_put_ops()``; when ``nvfs_count_ops()`` reaches 0, ``nvfs_blk_unregister_dma_ops()`` ->
  ``cleanup_module_list()`` unregisters every entry (in-flight I/O and mapped GPU buffers hold the count too:
  ``nvfs_free_gpu_info()`` unregisters when they drop it to 0).
* ``src/nvfs-proc.c`` ``nvfs_modules_show()``: one ``<name>: <version>`` line per registered entry, in
  ``modules_list[]`` order. Since nvidia-fs 2.7 a probed entry's version is never set, so the kernel prints
  ``(null)`` (``rpcrdma: (null)``); the WekaFS pseudo entry (``wekafsio``, version ``1``, no registration symbols)
  is registered statically and always listed (since 2.12; 2.7 had it only with CONFIG_MOFED).

So an idle, healthy node shows exactly ``wekafsio: 1`` and nothing about rpcrdma: reading the file idle proves
nothing. ``read_held`` opens the lowest ``/dev/nvidia-fs<N>`` read-only (that open probes and registers), reads the
file, and closes the device again (the last close unregisters; another holder keeps the registration).

Public API (every path through a ``Sysroot``):

``parse_modules(text) -> {name: version}``; ``storage(modules) -> {name: version}`` without pseudo entries;
``devices(sysroot) -> ['/dev/nvidia-fs0', ...]`` by minor;
``read_held(sysroot) -> {device, held, error, text, modules}``;
``storage_check(held, module) -> (ok, reason)``: one sentence naming ``module`` and the device held.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

MODULES = "/proc/driver/nvidia-fs/modules"
DEV_DIR = "/dev"
_DEVICE = re.compile(r"^nvidia-fs(\d+)\Z")
# entries of modules_list[] without registration symbols: listed whether or not a device is held
PSEUDO = ("wekafsio",)
# modules_list[] (src/nvfs-dma.c): the name nvidia-fs lists -> the symbol the storage module must export
REGISTER_SYMBOLS = {
    "nvme": "nvme_v1_register_nvfs_dma_ops (nvme_v2_register_nvfs_dma_ops on kernels with blk_rq_dma_map_iter_start)",
    "nvme_rdma": "nvme_rdma_v1_register_nvfs_dma_ops",
    "sfxvdriver": "sfxv_v1_register_nvfs_dma_ops",
    "nvmeib_common": "nvmesh_v1_register_nvfs_dma_ops",
    "lnet": "lustre_v1_register_nvfs_dma_ops",
    "beegfs": "beegfs_v1_register_nvfs_dma_ops",
    "mmfslinux": "ibm_scale_v1_register_nvfs_dma_ops",
    "rpcrdma": "rpcrdma_register_nvfs_dma_ops",
    "scatefs": "scatefs_register_nvfs_dma_ops",
    "scsi_mod": "scsi_v1_register_dma_scsi_ops",
}


def parse_modules(text):
    """``rpcrdma: (null)`` lines of /proc/driver/nvidia-fs/modules -> {name: version} (the version as printed)."""
    out = {}
    for line in (text or "").splitlines():
        name, sep, ver = line.partition(":")
        if sep and name.strip():
            out[name.strip()] = ver.strip()
    return out


def storage(modules):
    """The registered storage modules of a parsed modules file (pseudo entries left out)."""
    return dict((k, v) for k, v in (modules or {}).items() if k not in PSEUDO)


def devices(sysroot):
    """``/dev/nvidia-fs<N>`` paths that exist, lowest minor first."""
    found = []
    for name in sysroot.listdir(DEV_DIR):
        m = _DEVICE.match(name)
        if m:
            found.append((int(m.group(1)), name))
    return ["%s/%s" % (DEV_DIR, name) for _minor, name in sorted(found)]


def read_held(sysroot=None):
    """Read the modules file while holding the lowest nvidia-fs device open (read-only); the device is closed again.

    Returns ``{device, held, error, text, modules}``: ``held`` is true when the device was open during the read;
    ``error`` says why the read proves nothing (no device, the open failed, the file cannot be read).
    """
    sr = sysroot if sysroot is not None else Sysroot()
    out = {"device": None, "held": False, "error": None, "text": None, "modules": {}}
    devs = devices(sr)
    if not devs:
        out["error"] = "no /dev/nvidia-fs<N> device exists to hold open (nvidia-fs creates them when it loads)"
        return out
    out["device"] = devs[0]
    try:
        fd = os.open(sr.path(devs[0]), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        out["error"] = "%s cannot be opened: %s" % (devs[0], e.strerror or e)
        return out
    try:
        out["held"] = True
        text = sr.read_raw(MODULES)
    finally:
        os.close(fd)
    if text is None:
        out["error"] = "%s cannot be read" % MODULES
        return out
    out["text"] = text
    out["modules"] = parse_modules(text)
    return out


def storage_check(held, module):
    """(ok, reason): whether nvidia-fs registered ``module`` while ``held["device"]`` was open."""
    if held.get("error"):
        return False, "%s: whether nvidia-fs registers %s is unknown (it lists storage modules only while one of " \
            "its devices is held open)" % (held["error"], module)
    listed = sorted(held.get("modules") or {})
    if module in (held.get("modules") or {}):
        return True, "%s is listed in %s while %s is held open (%s: %s)" % (
            module, MODULES, held["device"], module, held["modules"][module])
    return False, "%s is not listed in %s while %s is held open (listed: %s): the loaded %s does not register with " \
        "nvidia-fs (it does not export %s - in-tree module or a client built without the nvidia-fs hook - or the " \
        "registration failed, see dmesg 'nvfs registration failed'), so GDS cannot use it" % (
            module, MODULES, held["device"], ", ".join(listed) or "none", module,
            REGISTER_SYMBOLS.get(module, "its nvidia-fs registration function"))
