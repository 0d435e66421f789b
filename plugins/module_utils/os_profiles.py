# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""OS profiles as data, one per supported release: Debian 12 and 13, Ubuntu 22.04 and 24.04, EL 9 (RHEL, Rocky,
AlmaLinux, CentOS Stream).

Each profile gives the boot loader, the package manager, the kernel packages that install a given kernel release
(ABI), the meta packages that pull new ABIs in, the compression of the distribution's kernel modules, the builder's
base packages for the vendor client and the kernel hold mechanism. :func:`detect` picks the profile from the node's
``/etc/os-release`` (``ID`` and the major of ``VERSION_ID``, ``ID_LIKE`` as fallback), or says why none fits.

Facts on the releases (what the distributions ship, not what the simulator shows):

* Debian 12 ships uncompressed ``.ko``; Debian 13 (linux 6.12) ``CONFIG_MODULE_COMPRESS_XZ``: ``.ko.xz``.
* Ubuntu 22.04 ships uncompressed ``.ko``; Ubuntu 24.04 ``CONFIG_MODULE_COMPRESS_ZSTD``: ``.ko.zst``.
* EL 9 ships ``.ko.xz``; its kernel is split in kernel, kernel-core, kernel-modules, kernel-modules-core (9.2+),
  kernel-modules-extra; kernel-install writes new BLS entries from ``/etc/kernel/cmdline``.
* node_exporter's textfile collector directory (``textfile_dir``, where both metric writers put their files):
  Debian and Ubuntu's ``prometheus-node-exporter`` package reads ``/var/lib/prometheus/node-exporter`` (its default
  ``--collector.textfile.directory``); EL has no node_exporter in the distribution, and EPEL's and Fedora's
  ``golang-github-prometheus-node-exporter`` install upstream's ``examples/systemd/sysconfig.node_exporter`` as
  ``/etc/sysconfig/node_exporter`` (``OPTIONS="--collector.textfile.directory
  /var/lib/node_exporter/textfile_collector"``) and create that directory; upstream's example unit reads the same.
* A new Ubuntu/Debian kernel ABI is a new package name (linux-image-6.8.0-50-generic); unattended-upgrades gets
  it through a meta package (linux-generic, linux-image-generic-hwe-24.04, linux-image-amd64) whose new version
  depends on it. Holding the meta packages stops new ABIs; holding the ABI's own packages keeps them from being
  upgraded in place or removed as unused. EL kernels are install-only packages: ``dnf upgrade`` installs a newer
  kernel-core beside the old one unless a versionlock entry pins the name to a version.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

# The vendor client builder's base packages (the one list; kmod_image's debootstrap and kmod_containerfile's
# Containerfiles read it): compiler and make, kmod, the compressors of every module format, fakeroot for a vendor
# build that calls dpkg-buildpackage as a user. The target kernel's headers come on top (linux-headers-<k>,
# kernel-devel-<k>); the release's own libssl comes with them (libssl3 on bookworm/jammy, libssl3t64 on
# trixie/noble: naming it here would break debootstrap on one of the two).
_DEB_BUILDER = ["build-essential", "kmod", "ca-certificates", "xz-utils", "zstd", "fakeroot"]
_EL_BUILDER = ["gcc", "make", "kmod", "xz", "zstd", "elfutils-libelf-devel", "openssl", "rpm-build", "findutils"]

# Meta packages: no ABI in the name, a new version depends on the newest ABI.
_UBUNTU_FLAVOURS = r"(?:generic|lowlatency|virtual|nvidia|oem|aws|azure|gcp|oracle|kvm|ibm|intel-iotg)(?:-[a-z0-9.]+)*"
_UBUNTU_META = r"linux-(?:image-|headers-|modules-|modules-extra-|tools-|cloud-tools-)?" + _UBUNTU_FLAVOURS
_DEBIAN_META = r"linux-(?:image|headers)-(?:(?:cloud|rt)-)?(?:amd64|arm64)"

# node_exporter's textfile directory per family (see above); upstream's for a release without a profile
TEXTFILE_DIRS = {"debian": "/var/lib/prometheus/node-exporter", "el": "/var/lib/node_exporter/textfile_collector"}
UPSTREAM_TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"

PROFILES = {
    "debian12": dict(
        family="debian", pkg_mgr="apt", bootloader="grub", kernel_cmdline_file=None,
        kernel_packages=["linux-image-{kver}", "linux-headers-{kver}"],
        kernel_meta_re=_DEBIAN_META, module_compression="none",
        builder_base_packages=_DEB_BUILDER, hold="apt-mark",
        textfile_dir=TEXTFILE_DIRS["debian"]),
    "debian13": dict(
        family="debian", pkg_mgr="apt", bootloader="grub", kernel_cmdline_file=None,
        kernel_packages=["linux-image-{kver}", "linux-headers-{kver}"],
        kernel_meta_re=_DEBIAN_META, module_compression="xz",
        builder_base_packages=_DEB_BUILDER, hold="apt-mark",
        textfile_dir=TEXTFILE_DIRS["debian"]),
    "ubuntu2204": dict(
        family="debian", pkg_mgr="apt", bootloader="grub", kernel_cmdline_file=None,
        kernel_packages=["linux-image-{kver}", "linux-modules-{kver}", "linux-modules-extra-{kver}",
                         "linux-headers-{kver}"],
        kernel_meta_re=_UBUNTU_META, module_compression="none",
        builder_base_packages=_DEB_BUILDER, hold="apt-mark",
        textfile_dir=TEXTFILE_DIRS["debian"]),
    "ubuntu2404": dict(
        family="debian", pkg_mgr="apt", bootloader="grub", kernel_cmdline_file=None,
        kernel_packages=["linux-image-{kver}", "linux-modules-{kver}", "linux-modules-extra-{kver}",
                         "linux-headers-{kver}"],
        kernel_meta_re=_UBUNTU_META, module_compression="zstd",
        builder_base_packages=_DEB_BUILDER, hold="apt-mark",
        textfile_dir=TEXTFILE_DIRS["debian"]),
    "el9": dict(
        family="el", pkg_mgr="dnf", bootloader="grubby", kernel_cmdline_file="/etc/kernel/cmdline",
        kernel_packages=["kernel-{kver}", "kernel-core-{kver}", "kernel-modules-{kver}",
                         "kernel-modules-core-{kver}", "kernel-modules-extra-{kver}", "kernel-devel-{kver}"],
        kernel_meta_re=None, module_compression="xz",
        builder_base_packages=_EL_BUILDER, hold="versionlock",
        textfile_dir=TEXTFILE_DIRS["el"]),
}

# os-release ID -> profile prefix; EL rebuilds share one profile per major.
_ID_PREFIX = {"debian": "debian", "ubuntu": "ubuntu", "rhel": "el", "rocky": "el", "almalinux": "el",
              "centos": "el", "ol": "el"}
_ID_LIKE_PREFIX = (("rhel", "el"), ("ubuntu", "ubuntu"), ("debian", "debian"))


class ProfileError(Exception):
    """The release has no profile, or a profile value does not fit."""


def parse_os_release(text):
    """``/etc/os-release`` text -> dict (shell-quoted values unquoted; comments and bad lines skipped)."""
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if not re.fullmatch(r"[A-Z0-9_]+", key):
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        out[key] = words[0] if words else ""
    return out


def profile_name(os_release):
    """The profile name for parsed os-release data, or raise ProfileError naming the release."""
    osid = os_release.get("ID", "").lower()
    version = os_release.get("VERSION_ID", "")
    prefix = _ID_PREFIX.get(osid)
    if prefix is None:
        likes = os_release.get("ID_LIKE", "").lower().split()
        prefix = next((p for like, p in _ID_LIKE_PREFIX if like in likes), None)
    if prefix is None:
        raise ProfileError("unsupported release %s %s: no OS profile (supported: %s)"
                           % (osid or "(no ID)", version or "(no VERSION_ID)", ", ".join(sorted(PROFILES))))
    m = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not m:
        raise ProfileError("release %s has no usable VERSION_ID (%r)" % (osid, version))
    key = prefix + m.group(1) + ((m.group(2) or "").zfill(2) if prefix == "ubuntu" else "")
    if key not in PROFILES:
        raise ProfileError("unsupported release %s %s: no OS profile %s (supported: %s)"
                           % (osid, version, key, ", ".join(sorted(PROFILES))))
    return key


def get(name):
    """The profile ``name`` as a new dict with ``name`` set."""
    if name not in PROFILES:
        raise ProfileError("no OS profile %r (known: %s)" % (name, ", ".join(sorted(PROFILES))))
    prof = dict(PROFILES[name])
    prof["name"] = name
    prof["kernel_packages"] = list(prof["kernel_packages"])
    prof["builder_base_packages"] = list(prof["builder_base_packages"])
    return prof


def detect(sysroot):
    """(profile, None) for the node under ``sysroot`` (a :class:`sysroot.Sysroot`), or (None, reason)."""
    text = sysroot.read("/etc/os-release")
    if text is None:
        text = sysroot.read("/usr/lib/os-release")
    if text is None:
        return None, "neither /etc/os-release nor /usr/lib/os-release exists"
    try:
        return get(profile_name(parse_os_release(text))), None
    except ProfileError as e:
        return None, str(e)


def textfile_dir(sysroot):
    """(node_exporter's textfile directory for the node's release, None or why upstream's directory was chosen)."""
    profile, why = detect(sysroot)
    if profile is None:
        return UPSTREAM_TEXTFILE_DIR, "%s: node_exporter's textfile directory is upstream's %s" % (
            why, UPSTREAM_TEXTFILE_DIR)
    return profile["textfile_dir"], None


_KVER_RE = re.compile(r"[0-9]+\.[0-9]+[A-Za-z0-9._+~-]*")


def kernel_packages(profile, kver):
    """The package names (Debian/Ubuntu) or NVRA specs (EL) that install kernel release ``kver``."""
    if not _KVER_RE.fullmatch(kver or ""):
        raise ProfileError("kernel release %r is no kernel release (e.g. 6.8.0-45-generic)" % (kver,))
    return [t.format(kver=kver) for t in profile["kernel_packages"]]


def kernel_package_names(profile):
    """EL: the package names of the kernel (``kernel-core`` ...), the part before ``-{kver}``."""
    return [t[:-len("-{kver}")] for t in profile["kernel_packages"]]


def abi_of_package(profile, package):
    """Debian/Ubuntu: the kernel release a package such as ``linux-modules-6.8.0-45-generic`` installs, or None."""
    for t in profile["kernel_packages"]:
        prefix = t[:-len("{kver}")]
        if package.startswith(prefix):
            rest = package[len(prefix):]
            # linux-image-<kver> must not claim linux-image-unsigned-... or a meta package
            if _KVER_RE.fullmatch(rest) and re.match(r"\d+\.\d+\.\d+-", rest):
                return rest
    return None


def is_meta_package(profile, package):
    """Debian/Ubuntu: True for a kernel meta package of the profile (it pulls new ABIs in)."""
    return bool(profile.get("kernel_meta_re")) and re.fullmatch(profile["kernel_meta_re"], package) is not None


def module_suffix(profile):
    """The file suffix of the release's modules: ``.ko``, ``.ko.xz``, ``.ko.zst``, ``.ko.gz``."""
    return ".ko" + {"none": "", "gzip": ".gz", "xz": ".xz", "zstd": ".zst"}[profile["module_compression"]]


def facts(profile):
    """The profile as reported in facts (JSON-safe, without the regular expressions)."""
    return dict((k, v) for k, v in profile.items() if k != "kernel_meta_re")
