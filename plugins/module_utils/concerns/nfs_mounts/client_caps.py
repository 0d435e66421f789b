# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an NFS client does with the options ``nfs_mounts`` writes: the capability table, by client and kernel release.

Two clients are modelled, each with its own option set (``OPTION_SETS``):

- ``in_tree``, the kernel's own client. ``nconnect`` is 1..16 (``NFS_MAX_CONNECTIONS``, fs/nfs/internal.h;
  fs/nfs/fs_context.c refuses more); it knows no multipath option.
- ``vendor``, the vendor's NFS over RDMA bundle (``vendor_nfs_build``): its documentation adds ``remoteports``
  (``~``-separated addresses, ``A-B`` ranges, or ``dns``: every address the server name resolves to) and
  ``localports``. ``nconnect`` is 1..64: the bundle's own ``NFS_MAX_CONNECTIONS`` is 64 (``bundle/fs/nfs/
  internal.h`` and ``bundle/fs/nfs/fs_context.c``, whose ``Opt_nconnect`` case refuses a value outside
  ``1..NFS_MAX_CONNECTIONS``; read in the vastnfs source tree of release 4.0.33, and the same 64 in its 3.9.30
  trees for EL7, SLES 12 and EL 7.6). Its ``docs/src/usage/mount-params.md`` recommends 4 for RDMA mounts and 8 for
  TCP and shows ``remoteports=dns``.

Whether a given ``nconnect`` takes effect over RDMA depends on the kernel release (``CAPABILITIES``):

- NFSv4.x: ``nfs4_set_client`` (fs/nfs/nfs4client.c) hands ``nconnect`` to the client only for TCP (and TCP-TLS)
  before 6.9; "NFS: enable nconnect for RDMA" (Trond Myklebust, posted to linux-nfs on 2024-02-28, merged for 6.9)
  adds ``XPRT_TRANSPORT_RDMA`` to that switch. ``nfs_show_mount_options`` (fs/nfs/super.c) prints ``nconnect=``
  only when ``clp->cl_nconnect > 0``, so on Ubuntu 22.04 (5.15), EL 9 (5.14), Debian 12 (6.1) and Ubuntu 24.04 (6.8)
  an NFSv4 mount over RDMA never shows the ``nconnect`` it was given.
- NFSv3: ``nfs_init_server`` (fs/nfs/client.c) passes ``nconnect`` whatever the transport since 5.3
  (53c326307156 "NFS: Allow multiple connections to a NFSv2 or NFSv3 server").
- The vendor's bundle carries its own client and transport: ``nconnect`` over RDMA is its main use (its examples).

A kernel may carry the change before 6.9 (EL backports keep the 5.14 release; 6.6-stable took upstream commit
b326df4a8ec6 in its review series of 2025-11-21): a mount that shows the
``nconnect`` it was given is taken as effective whatever the release, so the table only decides what a mount that
does not show it means.

Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

IN_TREE = "in_tree"
VENDOR = "vendor"

# the option set of each client: nconnect's bound and the options only that client takes
OPTION_SETS = {
    IN_TREE: {"nconnect_max": 16, "options": frozenset(),
              "source": "NFS_MAX_CONNECTIONS (fs/nfs/internal.h), checked by fs/nfs/fs_context.c", "verified": True},
    VENDOR: {"nconnect_max": 64, "options": frozenset(("remoteports", "localports")),
             "source": "NFS_MAX_CONNECTIONS 64 (vastnfs 4.0.33 bundle/fs/nfs/internal.h, checked by "
                       "bundle/fs/nfs/fs_context.c Opt_nconnect); remoteports/localports: its fs_context.c "
                       "fsparam table and docs/src/usage/mount-params.md",
             "verified": True},
}

# kernel behaviour by release: (name, first release, source, what was verified)
CAPABILITIES = {
    "nconnect_rdma_nfs4": {
        "since": (6, 9),
        "source": "fs/nfs/nfs4client.c nfs4_set_client (nconnect passed for TCP only), fs/nfs/super.c "
                  "nfs_show_mount_options (nconnect= shown only when cl_nconnect > 0); 6.9: 'NFS: enable nconnect "
                  "for RDMA'",
        "verified": "the TCP-only test in nfs4_set_client and the cl_nconnect > 0 print read in the kernel source; "
                    "the patch adding XPRT_TRANSPORT_RDMA read on linux-nfs (2024-02-28), upstream commit "
                    "b326df4a8ec6; the 6.9 release is from the posting date, not read from a tagged tree. Backported: "
                    "the 6.6-stable review series of 2025-11-21 carries it (patch 431/529, 'NFS: enable nconnect for "
                    "RDMA', a Stable-dep-of 8ab523ce78d4), so a recent 6.6.y shows nconnect over RDMA and is taken "
                    "as effective by the shown-wins rule",
    },
    "nconnect_nfs3": {
        "since": (5, 3),
        "source": "fs/nfs/client.c nfs_init_server (.nconnect whatever the transport), 53c326307156",
        "verified": "the commit read (5.3 merge window)",
    },
}

_RELEASE = re.compile(r"(\d+)\.(\d+)(?:[.\-+_~].*)?")


def release(text):
    """(major, minor) of a kernel release (``6.1.0-28-amd64``, ``5.14.0-427.13.1.el9_4.x86_64``); None when it is
    not one."""
    m = _RELEASE.fullmatch((text or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def has(name, kernel_release):
    """True/False: the kernel release has capability ``name``; None: the release cannot be read."""
    rel = release(kernel_release)
    return None if rel is None else rel >= CAPABILITIES[name]["since"]


def nconnect_effect(kernel_release, vers, proto, client):
    """Whether an ``nconnect`` given to a mount of NFS version ``vers`` over ``proto`` (rdma, rdma6, tcp...) reaches
    the client: ``(True, None)``, ``(False, reason)`` (the client ignores it: not applicable) or ``(None, reason)``
    (the host cannot tell: not checked). ``client`` is the client in use (``vendor`` or anything else)."""
    if client == VENDOR:
        return True, None
    if not (proto or "").startswith("rdma"):
        return True, None
    name = "nconnect_nfs3" if str(vers) == "3" else "nconnect_rdma_nfs4"
    ok = has(name, kernel_release)
    cap = CAPABILITIES[name]
    if ok:
        return True, None
    since = "%d.%d" % cap["since"]
    if ok is None:
        return None, ("the kernel release %r cannot be read, so whether nconnect reaches the client over RDMA is "
                      "unknown (it does from %s: %s); check /proc/sys/kernel/osrelease"
                      % (kernel_release, since, cap["source"]))
    return False, ("kernel %s passes nconnect to an NFSv%s client over RDMA only from %s (%s): the mount runs with one "
                   "connection and does not show nconnect; it takes effect after an upgrade to %s or with the vendor "
                   "client" % (kernel_release, "3" if name == "nconnect_nfs3" else "4", since, cap["source"], since))


def nconnect_max(client):
    return OPTION_SETS[VENDOR if client == VENDOR else IN_TREE]["nconnect_max"]
