#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vendor_nfs_build
short_description: Build, verify and install the storage vendor's NFS client for one target kernel
version_added: 0.1.0
description:
  - Builds the out-of-tree NFS client of the storage vendor (VAST C(vastnfs) as the reference) from a pinned source
    tarball for a B(target) kernel release, which need not be the running one, so a kernel upgrade can install the
    client before the reboot.
  - The tarball's sha256 is verified before anything else. It is extracted on a case-sensitive directory (the vendor
    tarball ships C(Makefile) and C(makefile); on a case-insensitive mount the build silently produces nothing) and
    case-colliding names are reported in RV(collisions).
  - Extraction is safe against a hostile tarball. A member with an absolute path, a C(..) component, a control
    character, a device node or a FIFO is refused before anything is written. Every member's path and link target is
    resolved against what is already extracted, so a chain of symbolic links cannot lead out of the tree, a hard link
    must name a file already extracted, and a member never replaces an entry (a directory may repeat). Setuid, setgid
    and sticky bits and group/other write are stripped, and files belong to the user that runs the module. Python's
    tarfile C(data) filter (PEP 706, Python 3.12 and the 3.8.17/3.9.17/3.10.12/3.11.4 backports) runs as well where
    the Python has it. The tree is extracted into a fresh private directory and moved into place only when the
    whole extraction succeeded, so a refused tarball leaves nothing behind. The message names the member.
  - The build runs in a podman container that is not privileged, has no network (C(--network none)), no
    capabilities (C(--cap-drop all), C(no-new-privileges)), a read-only source mount and a separate output
    directory, and runs as a non-root user. With rootful podman (the module runs as root) that is C(nobody)
    (65534), the output directory handed to it and the outputs given back to root afterwards. With rootless podman
    it is the invoking user itself (C(--userns keep-id)).
  - The builder image holds the target kernel's headers and comes from one of three places (O(builder_mode)).
    C(debootstrap) creates it from Debian packages (C(debootstrap --variant=minbase --force-check-gpg) with
    C(build-essential), then C(linux-headers-<kernel>) with apt, then C(podman import)), from the mirror the
    host's apt sources already use. C(containerfile) builds it with C(podman build) from the Containerfile the
    collection ships for the family (O(builder_family), Ubuntu/Debian or EL) on a base image the user names
    (O(builder_base_image)). C(image) uses an image the user names (O(builder_image), from their own registry,
    ideally pinned by C(@sha256:) digest), pulled when missing.
  - Supply chain. apt in the builder runs with the distribution's keyring and signature checks forced on; a
    builder source with C(trusted=yes), C(allow-insecure=yes), C(allow-weak=yes) or
    C(allow-downgrade-to-insecure=yes) is refused unless O(builder_allow_unauthenticated). The image's id and
    digest and every package version inside it (C(dpkg-query) or C(rpm -qa), read in a container without
    network) are recorded in the build's C(manifest.json) (C(builder)) and in C(builder-packages.txt) beside
    C(dist/).
  - Every artifact is verified and the module fails loudly otherwise. Every C(.ko) has the target kernel as the first
    field of its vermagic, the RDMA transport C(rpcrdma) exports C(rpcrdma_register_nvfs_dma_ops) (the hook
    nvidia-fs needs), the package lists the modules below C(/lib/modules/<kernel>/), and with signing every module
    carries a signature. A build that produced no module fails.
  - Compressed modules are handled everywhere they are read, verified, signed and installed. A package or a build
    may hold C(.ko.gz), C(.ko.xz) or C(.ko.zst) modules (what DKMS and vendor build scripts produce for a kernel
    built with C(CONFIG_MODULE_COMPRESS_*), such as C(.ko.zst) on Ubuntu 24.04 and C(.ko.xz) on RHEL 9), and a
    Debian package's data may be C(data.tar.zst) (dpkg's default on Ubuntu). The format is told by the magic
    bytes, as libkmod does. gzip and xz are read with the Python standard library. zstd is read with the standard library's
    C(compression.zstd) (Python 3.14+), else the C(zstandard) Python package, else the C(zstd) or C(unzstd) tool.
    Without any of them the module fails saying what to install. RV(compression) (its C(codecs)) tells which was used.
  - Signing (O(signing_key)) signs compressed modules too. The container decompresses them, runs C(sign-file) and
    compresses them again the way the kernel's C(modules_install) does. The builder image created by the module
    carries C(xz-utils) and C(zstd) for that.
  - Builds are cached by (source sha256, profile, kernel, builder image ID from C(podman image inspect), signing
    certificate); the same key is a no-op, a rebuilt or re-pulled builder image builds again.
  - With O(install=true) the verified modules are installed for the target kernel without loading anything (the
    package, or a copy to C(/lib/modules/<kernel>/updates/bundle/)), C(depmod <kernel>) runs, the initramfs of that
    kernel is regenerated when it carries the NFS stack, and the installation is recorded in
    C(/etc/gpufabric/vendor_nfs.json) for the pre-reboot gate (M(gpufabric.node.vendor_nfs_proof)). Loading the
    client in place would unmount every NFS filesystem of the node, so the new client takes effect at the next boot.
  - The modules of a package are installed as the package has them (what dpkg or rpm would install). Bare modules
    (O(profile=kbuild)) are copied in the compression of the target kernel. That compression is read from the
    kernel's own C(/lib/modules/<kernel>/kernel/**) files, else from C(CONFIG_MODULE_COMPRESS_*) in
    C(/boot/config-<kernel>) (or C(/lib/modules/<kernel>/config), the headers' C(.config)), else uncompressed, and it is
    returned in RV(install) (its C(compression)). Installed files are compared by their decompressed content. Another
    variant of the same module in the same directory (C(sunrpc.ko) beside C(sunrpc.ko.zst), which depmod could
    pick instead) is drift and is removed.
author:
  - gpufabric developers (@gpufabric)
options:
  src:
    description:
      - The source tarball, a local path on the host that runs the module or an C(http://), C(https://) or
        C(file://) URL (downloaded into O(cache_dir)/sources/).
    type: str
    required: true
  sha256:
    description:
      - The expected sha256 of the tarball (64 hex characters, optionally prefixed C(sha256:)). Mandatory, a
        tarball with another digest is never extracted.
    type: str
    required: true
  version:
    description: The vendor client's version (recorded with the installation and used in messages).
    type: str
    required: true
  kernel_release:
    description: The kernel release to build for, as C(uname -r) prints it on that kernel (C(6.1.0-50-amd64)).
    type: str
    required: true
  profile:
    description:
      - C(vastnfs) runs C(./build.sh bin) with C(KVER=<kernel>) and takes C(dist/*.deb) or C(dist/*.rpm).
      - C(kbuild) runs C(make -C /lib/modules/<kernel>/build M=<tree> modules) and takes every C(.ko).
    type: str
    choices: [vastnfs, kbuild]
    default: vastnfs
  required_modules:
    description: Modules that must be in the build (besides the RDMA transport check).
    type: list
    elements: str
    default: [sunrpc, rpcrdma]
  cache_dir:
    description: Build cache and scratch directory; must be on a case-sensitive filesystem.
    type: path
    default: /var/cache/gpufabric/vendor_nfs
  builder_mode:
    description:
      - Where the builder image comes from. C(debootstrap) creates it from Debian packages (Debian targets).
      - C(containerfile) builds it with podman from the Containerfile of O(builder_family) on O(builder_base_image)
        (targets debootstrap cannot make, such as Ubuntu 24.04 or EL 9).
      - C(image) uses O(builder_image) as it is (pulled when missing and O(builder_create)).
    type: str
    choices: [debootstrap, containerfile, image]
    default: debootstrap
  builder_image:
    description:
      - The podman image holding the target kernel's headers, an image reference
        C([REGISTRY/]PATH[:TAG][@sha256:DIGEST]). Default C(localhost/gpufabric-kbuild:<kernel>).
      - Required with O(builder_mode=image).
    type: str
  builder_create:
    description: Create (C(debootstrap), C(containerfile)) or pull (C(image)) the builder image when it does not
      exist.
    type: bool
    default: true
  builder_family:
    description: The family of the collection's Containerfile for O(builder_mode=containerfile). C(ubuntu) (apt,
      also for Debian base images) installs C(linux-headers-<kernel>), C(el) (dnf) C(kernel-devel-<kernel>).
    type: str
    choices: [el, ubuntu]
    default: ubuntu
  builder_base_image:
    description: The base image (the family's distribution release, from the user's registry) the Containerfile
      builds on, an image reference; ideally pinned by digest. Required to build with O(builder_mode=containerfile).
    type: str
  builder_containerfile:
    description: A Containerfile of your own instead of the collection's for O(builder_family), with the same
      contract (build arguments C(BASE_IMAGE), C(KVER), C(BASE_PACKAGES), C(EXTRA_PACKAGES), C(PKG_OPTIONS); the
      context holds C(builder.list), the apt lines of O(builder_sources); the image has C(/lib/modules/<kernel>/build)).
    type: path
  builder_allow_unauthenticated:
    description:
      - Allow builder sources that turn apt's signature checks off (C(trusted=yes), C(allow-insecure=yes),
        C(allow-weak=yes), C(allow-downgrade-to-insecure=yes)), and let debootstrap go on without a keyring
        (no C(--force-check-gpg)). For a local test repository only.
    type: bool
    default: false
  builder_suite:
    description: The Debian suite whose C(linux-headers-<kernel>) the builder image installs. Default the
      C(VERSION_CODENAME) of the host's C(/etc/os-release).
    type: str
  builder_mirror:
    description: The Debian mirror URI for the builder image. Default the host's apt source serving the suite.
    type: str
  builder_sources:
    description:
      - apt source lines (C(deb [OPTIONS] URI SUITE COMPONENT...), or C(deb [OPTIONS] URI PATH/) for a flat
        repository) from which the builder image installs C(linux-headers-<kernel>) after debootstrapping its base
        system from O(builder_suite) (or, with O(builder_mode=containerfile) and the C(ubuntu) family, in addition
        to the base image's own sources).
      - Each item is one line of type C(deb) with an http, https or file URI and the options of sources.list(5);
        anything else (a second line, a control character, an unknown option) is refused, and so is a source
        without signature checks unless O(builder_allow_unauthenticated).
      - Default the suite itself (O(builder_mirror) or the host's apt source) plus the host's C(<suite>-updates) and
        C(<suite>-security) sources, where Debian publishes new kernel ABIs first.
    type: list
    elements: str
    default: []
  builder_extra_packages:
    description: More packages for the builder image (Debian or, with the C(el) family, RPM names).
    type: list
    elements: str
    default: []
  podman_conf_dir:
    description:
      - A scratch directory for C(containers.conf) (runtime runc, explicit ulimits, cgroupfs, no network) and
        C(storage.conf) (graphroot/runroot inside it unless a storage.conf is already there), passed to podman as
        C(CONTAINERS_CONF) and C(CONTAINERS_STORAGE_CONF). Without it podman's own configuration is used.
    type: path
  signing_key:
    description: Private key to sign the modules with (C(sign-file sha256) from the kernel headers). Keeps Secure Boot
      usable when the certificate is enrolled (MOK). Requires O(signing_cert).
    type: path
  signing_cert:
    description: The X.509 certificate matching O(signing_key).
    type: path
  install:
    description: Install the verified build for O(kernel_release) on this host (never loads it).
    type: bool
    default: false
  install_method:
    description:
      - C(package) installs the built package with dpkg or rpm; C(copy) copies the modules to their package paths.
      - C(auto) is C(package) on a real root with a package build, C(copy) otherwise.
    type: str
    choices: [auto, package, copy]
    default: auto
  initramfs:
    description: Regenerate the target kernel's initramfs (update-initramfs or dracut) after installing; C(auto) only
      when the initramfs exists and carries one of the client's modules.
    type: str
    choices: [auto, always, never]
    default: auto
  keep_failed:
    description: Keep the scratch tree of a failed build in O(cache_dir) for inspection.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Verifies the tarball, reports whether a build and an installation would happen; builds nothing and
      installs nothing.
  diff_mode:
    support: none
    description: No diff is produced; RV(drift) lists the deviations.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with podman (build) and kmod (install).
notes:
  - Needs podman (rootful or rootless) where a build happens; debootstrap, the distribution's keyring package
    (C(debian-archive-keyring)) and tar to create a C(debootstrap) builder image.
  - Reading C(.ko.zst) modules or C(data.tar.zst) packages needs the C(zstd) tool or the C(zstandard) Python package
    on the host that runs the module (Python 3.14+ has zstd in its standard library).
  - Copy a cache entry and the tarball to a node to install there without building (the cache is hit). On a host
    without podman, where the builder image cannot be read, the newest verified entry built from the same source,
    profile, kernel and certificate is used, whatever image built it.
"""

EXAMPLES = r"""
- name: Build and install the vendor NFS client for the kernel installed for the next boot
  gpufabric.node.vendor_nfs_build:
    src: /srv/vendor/vastnfs-4.0.35.tar.xz
    sha256: "5d592fa37b658414511e59bded24e6372906b0195b0191ad8a69caeb85d701fe"
    version: "4.0.35"
    kernel_release: 6.1.0-50-amd64
    install: true

- name: Build signed modules with a scratch podman configuration
  gpufabric.node.vendor_nfs_build:
    src: https://artifacts.example.com/vastnfs-4.0.35.tar.xz
    sha256: "5d592fa37b658414511e59bded24e6372906b0195b0191ad8a69caeb85d701fe"
    version: "4.0.35"
    kernel_release: 6.1.0-50-amd64
    podman_conf_dir: /var/tmp/gpufabric-podman
    signing_key: /etc/gpufabric/mok/signing.key
    signing_cert: /etc/gpufabric/mok/signing.crt
"""

RETURN = r"""
key:
  description: The cache key (sha256 of source sha256, profile, kernel, builder image ID, certificate).
  returned: success
  type: str
cache_hit:
  description: Whether the verified build came from the cache.
  returned: success
  type: bool
built:
  description: Whether a container build ran.
  returned: success
  type: bool
kernel_release:
  description: The target kernel.
  returned: always
  type: str
collisions:
  description: Groups of source paths that are one path on a case-insensitive filesystem.
  returned: when a build ran or was cached
  type: list
  elements: list
  sample: [["vastnfs-4.0.35/Makefile", "vastnfs-4.0.35/makefile"]]
artifacts:
  description: Verified artifacts (C(file) relative to the cache entry, C(kind), C(sha256), C(modules)).
  returned: success
  type: list
  elements: dict
artifact_dir:
  description: The cache entry holding C(dist/), C(manifest.json) and C(build.log).
  returned: success
  type: str
modules:
  description:
    - Per module C(name), C(installed_path), C(vermagic), C(srcversion), C(sha256) (of the decompressed module),
      C(file_sha256) (of the file as built), C(compression), C(signed), C(signer).
  returned: success
  type: list
  elements: dict
builder:
  description:
    - C(mode), C(image), whether it was C(created) (or pulled), and the C(seconds) that took.
    - C(id) and C(digest) of the image, C(packages) (how many package versions were recorded),
      C(packages_sha256) and C(packages_file) (the C(builder-packages.txt) of the cache entry).
  returned: when a build ran
  type: dict
install:
  description:
    - C(method), C(actions) (package/copy, depmod, record), whether the C(initramfs) was regenerated.
    - C(paths) maps each module to the file it is installed as; C(compression) is the target kernel's module
      compression (C(compression) one of V(none), V(gzip), V(xz), V(zstd), and the C(source) it was read from).
  returned: when O(install=true)
  type: dict
  sample: {"method": "copy", "actions": ["copy", "depmod", "record"], "initramfs": false,
           "paths": {"rpcrdma": "/lib/modules/6.8.0-45-generic/updates/bundle/rpcrdma.ko.zst"},
           "compression": {"compression": "zstd", "source": "/lib/modules/6.8.0-45-generic/kernel (64 of 64 modules)"}}
compression:
  description:
    - C(modules) lists the compressions of the built modules, C(target) (with O(install=true)) the target kernel's
      module compression, and C(codecs) which decompressor or compressor served each format (V(python:gzip),
      V(python:lzma), V(python:compression.zstd), V(python:zstandard) or V(binary:/usr/bin/zstd)).
  returned: success
  type: dict
  sample: {"modules": ["zstd"], "codecs": {"zstd": "binary:/usr/bin/zstd"},
           "target": {"compression": "zstd", "source": "/lib/modules/6.8.0-45-generic/kernel (64 of 64 modules)"}}
drift:
  description:
    - Modules of the target kernel whose installed content differed from the verified build before installing
      (C(current) and C(desired) sha256 of the decompressed module, C(path), and C(stale) variants of the same
      module beside it).
  returned: always
  type: list
  elements: dict
timings:
  description: Seconds per stage (C(builder), C(build), C(total)).
  returned: success
  type: dict
"""

import os
import shutil
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

OPTIONAL_TOOLS = ("dpkg-deb", "modinfo", "nm", "rpm", "rpm2archive", "debootstrap", "chroot", "tar", "depmod",
                  "dpkg", "update-initramfs", "dracut", "lsinitramfs", "zstd", "unzstd")


def make_runner(module):
    return CommandRunner(module)


def find_tools(module):
    tools = {}
    for name in OPTIONAL_TOOLS:
        tools[name] = module.get_bin_path(name)
    tools["podman"] = module.get_bin_path("podman")
    return tools


def os_codename(sysroot):
    raw = sysroot.read_raw("/etc/os-release") or ""
    for line in raw.splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"') or None
    return None


def fetch_source(module, src, sha256, cache_dir):
    """Local path of the tarball; URLs are downloaded once into the cache (verified before use)."""
    if "://" not in src:
        return src
    if src.startswith("file://"):
        return src[len("file://"):]
    name = os.path.basename(src.split("?", 1)[0]) or "source.tar"
    dest_dir = os.path.join(cache_dir, "sources", sha256)
    dest = os.path.join(dest_dir, name)
    if os.path.isfile(dest) and kb.sha256_file(dest) == sha256:
        return dest
    if module.check_mode:
        return None
    resp, info = fetch_url(module, src, timeout=120)
    if info.get("status") != 200 or resp is None:
        raise kb.KmodBuildError("downloading %s failed: HTTP %s %s" % (src, info.get("status"), info.get("msg")))
    os.makedirs(dest_dir, exist_ok=True)
    tmp = dest + ".part"
    with open(tmp, "wb") as f:
        shutil.copyfileobj(resp, f)
    os.rename(tmp, dest)
    return dest


def builder_image(module, run, tools, kver, env, sysroot):
    """The builder image of ``builder_mode``, created or pulled when missing and ``builder_create``."""
    p = module.params
    image = p["builder_image"] or kb.builder_image_name(kver)
    if not p["builder_create"]:
        rc, _o, _e = run([tools["podman"], "image", "exists", image], env=env)
        if rc != 0:
            raise kb.KmodBuildError("builder image %s does not exist and builder_create is false" % image)
        return image, False, 0.0
    if p["builder_mode"] == "image":
        return kb.ensure_named_image(run, tools, image, env)
    if p["builder_mode"] == "containerfile":
        return kb.ensure_containerfile_image(
            run, tools, kver, env, p["cache_dir"], image, p["builder_family"], p["builder_base_image"],
            containerfile=p["builder_containerfile"], sources=p["builder_sources"],
            extra_packages=p["builder_extra_packages"], allow_unauthenticated=p["builder_allow_unauthenticated"])
    return kb.ensure_builder_image(
        run, tools, kver, env, p["cache_dir"], suite=p["builder_suite"] or os_codename(sysroot),
        mirror=p["builder_mirror"], sysroot=sysroot, image=image, extra_packages=p["builder_extra_packages"],
        deb_cache=os.path.join(p["cache_dir"], "debs"), sources=p["builder_sources"],
        allow_unauthenticated=p["builder_allow_unauthenticated"])


def run_module(module):
    p = module.params
    result = {"changed": False, "kernel_release": p["kernel_release"], "drift": [], "built": False,
              "cache_hit": False}
    try:
        kver = kb.validate_kver(p["kernel_release"])
        sha = kb.validate_sha256(p["sha256"])
        kb.validate_version(p["version"])
        kb.validate_profile(p["profile"])
        for line in p["builder_sources"]:
            kb.validate_source_line(line, p["builder_allow_unauthenticated"])
        for name in p["builder_extra_packages"]:
            kb.validate_package_name(name)
        for opt in ("builder_image", "builder_base_image"):
            if p[opt]:
                kb.validate_image_ref(p[opt])
        if p["builder_mirror"]:
            kb.validate_mirror(p["builder_mirror"])
        if p["builder_suite"]:
            kb.validate_suite(p["builder_suite"])
        for name in p["required_modules"]:
            if not kb.MODULE_NAME_RE.fullmatch(name):
                raise ValueError("required_modules: %s is not a kernel module name" % ascii(name))
        # paths the build writes, reads or hands to podman: portable characters, normalized
        for opt in ("cache_dir", "podman_conf_dir", "builder_containerfile", "signing_key", "signing_cert"):
            if p[opt]:
                inputs.safe_path(p[opt].rstrip("/") or "/", opt)
    except ValueError as e:
        module.fail_json(msg=str(e), **result)
    if p["builder_mode"] == "image" and not p["builder_image"]:
        module.fail_json(msg="builder_mode=image needs builder_image (the image that holds the kernel's headers)",
                         **result)
    if p["builder_containerfile"] and not os.path.isfile(p["builder_containerfile"]):
        module.fail_json(msg="builder_containerfile %s does not exist" % p["builder_containerfile"], **result)
    if bool(p["signing_key"]) != bool(p["signing_cert"]):
        module.fail_json(msg="signing_key and signing_cert go together", **result)
    signing = {"key": p["signing_key"], "cert": p["signing_cert"]} if p["signing_key"] else None
    for path in (p["signing_key"], p["signing_cert"]):
        if path and not os.path.isfile(path):
            module.fail_json(msg="signing file %s does not exist" % path, **result)

    run = make_runner(module)
    tools = find_tools(module)
    codecs = kb.Codecs(run, tools)
    sysroot = Sysroot()
    cache_dir = p["cache_dir"]
    t0 = time.time()
    timings = {}

    source = fetch_source(module, p["src"], sha, cache_dir)
    if source is None:
        result.update(changed=True, msg="check mode: would download %s, build for %s" % (p["src"], kver))
        return result
    kb.verify_source(source, sha)
    cert_fp = kb.sha256_file(signing["cert"]) if signing else None
    # The cache key holds the builder image's ID: the image is read (made when missing) before the cache is.
    manifest, image, env, present = None, None, {}, False
    if tools.get("podman"):
        env = kb.podman_env(p["podman_conf_dir"], write=not module.check_mode)
        image = p["builder_image"] or kb.builder_image_name(kver)
        if module.check_mode or not p["builder_create"]:
            present = kb.image_exists(run, tools["podman"], image, env)
        else:  # a no-op when the image is there
            os.makedirs(cache_dir, exist_ok=True)
            image, created, secs = builder_image(module, run, tools, kver, env, sysroot)
            result["builder"] = {"mode": p["builder_mode"], "image": image, "created": created,
                                 "seconds": round(secs, 2)}
            timings["builder"] = round(secs, 2)
            present = True
        if present:
            identity = kb.image_identity(run, tools["podman"], image, env)
            result["key"] = kb.cache_key(sha, p["profile"], kver, identity["id"], cert_fp)
            manifest = kb.load_cached(cache_dir, result["key"])
    if not present and not (tools.get("podman") and p["builder_create"]):
        # no builder image to read here, and none may be made (no podman, or builder_create=false): a cache entry
        # copied to this host, built from the same inputs in whatever image
        manifest = kb.find_cached(cache_dir, sha, p["profile"], kver, cert_fp)
        result["key"] = manifest["key"] if manifest else None

    if manifest is None:
        result["changed"] = True
        if module.check_mode:
            result["msg"] = "check mode: would build %s %s for %s" % (p["profile"], p["version"], kver)
            if p["install"]:
                result["install"] = {"method": p["install_method"], "actions": ["build", "install"]}
            return result
        if not tools.get("podman"):
            raise kb.KmodBuildError("podman is not installed on this host: the build runs in a container "
                                    "(or copy a built cache entry and the tarball here)")
        if not present:
            raise kb.KmodBuildError("builder image %s does not exist and builder_create is false" % image)
        result.setdefault("builder", {"mode": p["builder_mode"], "image": image, "created": False, "seconds": 0.0})
        os.makedirs(cache_dir, exist_ok=True)
        manifest = kb.build(run, tools, source, sha, kver, p["version"], p["profile"], cache_dir, image, env=env,
                            signing=signing, required_modules=p["required_modules"], keep_failed=p["keep_failed"],
                            codecs=codecs, builder_mode=p["builder_mode"])
        record = manifest.get("builder") or {}
        result["builder"].update(id=record.get("id"), digest=record.get("digest"),
                                 packages=len(record.get("packages") or []),
                                 packages_sha256=record.get("packages_sha256"),
                                 packages_file=os.path.join(cache_dir, manifest["key"], "builder-packages.txt"))
        timings["build"] = manifest["timings"].get("build")
        result["built"] = True
    else:
        result["cache_hit"] = True
    key = result["key"] = manifest["key"]

    result.update(collisions=manifest["collisions"], artifacts=manifest["artifacts"],
                  modules=manifest["modules"], artifact_dir=os.path.join(cache_dir, key))
    if manifest["kver"] != kver or manifest["source_sha256"] != sha:
        raise kb.KmodBuildError("cache entry %s does not describe this build" % key)
    missing = [r for r in p["required_modules"] if r not in [m["name"] for m in manifest["modules"]]]
    if missing:
        raise kb.KmodBuildError("the cached build lacks required modules %s" % ", ".join(missing))

    result["compression"] = {"modules": sorted(set(m.get("compression") or "none" for m in manifest["modules"]))}
    if p["install"]:
        # one writer of node state at a time (nodelock.py): from the read of the installed modules through the install
        with nodelock.for_module(module, sysroot, "vendor_nfs_build"):
            target = kb.target_compression(sysroot, kver)
            method = kb.resolve_method(sysroot, manifest, p["install_method"])
            places = kb.placements(manifest, method, target["compression"])
            result["drift"] = kb.install_drift(sysroot, manifest, places, codecs)
            inst = kb.install(run, tools, sysroot, cache_dir, manifest, method=method, initramfs=p["initramfs"],
                              check_mode=module.check_mode, codecs=codecs, compression=target["compression"])
            inst["compression"] = target
            result["install"] = inst
            result["compression"]["target"] = target
        if inst["actions"]:
            result["changed"] = True
    result["compression"]["codecs"] = dict(codecs.used)
    timings["total"] = round(time.time() - t0, 3)
    result["timings"] = timings
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="str", required=True),
            sha256=dict(type="str", required=True),
            version=dict(type="str", required=True),
            kernel_release=dict(type="str", required=True),
            profile=dict(type="str", default="vastnfs", choices=sorted(kb.PROFILES)),
            required_modules=dict(type="list", elements="str", default=["sunrpc", "rpcrdma"]),
            cache_dir=dict(type="path", default="/var/cache/gpufabric/vendor_nfs"),
            builder_mode=dict(type="str", default="debootstrap", choices=list(kb.BUILDER_MODES)),
            builder_image=dict(type="str"),
            builder_create=dict(type="bool", default=True),
            builder_family=dict(type="str", default="ubuntu", choices=sorted(kb.FAMILIES)),
            builder_base_image=dict(type="str"),
            builder_containerfile=dict(type="path"),
            builder_allow_unauthenticated=dict(type="bool", default=False),
            builder_suite=dict(type="str"),
            builder_mirror=dict(type="str"),
            builder_sources=dict(type="list", elements="str", default=[]),
            builder_extra_packages=dict(type="list", elements="str", default=[]),
            podman_conf_dir=dict(type="path"),
            signing_key=dict(type="path", no_log=False),
            signing_cert=dict(type="path"),
            install=dict(type="bool", default=False),
            install_method=dict(type="str", default="auto", choices=["auto", "package", "copy"]),
            initramfs=dict(type="str", default="auto", choices=["auto", "always", "never"]),
            keep_failed=dict(type="bool", default=False),
        ),
        required_together=[("signing_key", "signing_cert")],
        supports_check_mode=True,
    )
    inputs.guard(module)
    try:
        result = run_module(module)
    except kb.KmodBuildError as e:
        keep = ("rc", "stdout", "stderr", "problems", "collisions", "actual", "expected")
        details = dict((k, v) for k, v in e.details.items() if k in keep)
        module.fail_json(msg=str(e), kernel_release=module.params["kernel_release"], **details)
    except (OSError, IOError) as e:
        module.fail_json(msg="vendor NFS client build for %s failed: %s" % (module.params["kernel_release"], e))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
