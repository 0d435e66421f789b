# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Builder image of the vendor NFS client (``kmod_build``): where the image holding the target kernel's headers
comes from, and what is in it.

Three modes:

* ``debootstrap``: created here from Debian packages (``debootstrap --variant=minbase --force-check-gpg``, then
  ``apt-get install linux-headers-<kernel>`` in the rootfs with apt's signature checks forced on, then
  ``podman import``);
* ``containerfile``: built with ``podman build`` from a Containerfile of the family (Ubuntu/Debian images with
  apt, EL images with dnf; see ``kmod_containerfile``) on a base image the user names;
* ``image``: an image the user names (from their own registry, ideally pinned by ``@sha256:`` digest); it is pulled
  when missing and used as it is.

Whatever the mode, :func:`builder_identity` records the image's id and digest and the package versions inside it
(dpkg or rpm database, read in a container without network or capabilities) for the build's manifest.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import shutil
import tempfile
import time

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage2_apt import (
    builder_sources, host_mirror, signed_by_paths, validate_source_line)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import (
    BUILDER_IMAGE, BUILDER_PACKAGES, KmodBuildError)
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

BUILDER_MODES = ("debootstrap", "containerfile", "image")

# docker/OCI reference: [domain[:port]/]path[:tag][@sha256:digest] (distribution/reference grammar)
_LABEL = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_RE = re.compile(
    r"(?:(?P<domain>{label}(?:\.{label})*(?::[0-9]{{1,5}})?)/)?(?P<path>{path}(?:/{path})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}))?(?:@(?P<digest>sha256:[0-9a-f]{{64}}))?".format(
        label=_LABEL, path=_PATH))

# apt inside the builder: signature checks forced on whatever the base system's configuration says
APT_SECURE_OPTIONS = ["-o", "Acquire::AllowInsecureRepositories=false",
                      "-o", "Acquire::AllowDowngradeToInsecureRepositories=false",
                      "-o", "APT::Get::AllowUnauthenticated=false"]


def validate_image_ref(value, require_digest=False):
    """An image reference (``registry.example:5000/team/kbuild:6.8.0-45@sha256:...``); raises ValueError."""
    if not isinstance(value, str) or len(value) > 512 or not _IMAGE_RE.fullmatch(value):
        raise ValueError("builder image %s is not an image reference [REGISTRY/]PATH[:TAG][@sha256:DIGEST]"
                         % ascii(value))
    if require_digest and not _IMAGE_RE.fullmatch(value).group("digest"):
        raise ValueError("builder image %s is not pinned by digest (@sha256:...)" % ascii(value))
    return value


def builder_image_name(kver, base=BUILDER_IMAGE):
    return "%s:%s" % (base, kver)


def image_exists(run, podman, image, env):
    rc, _o, _e = run([podman, "image", "exists", image], env=env)
    return rc == 0


# --------------------------------------------------------------------------- debootstrap

def debootstrap_argv(debootstrap, root, suite, mirror, extra_packages=None, cache_dir=None,
                     allow_unauthenticated=False, base_packages=None):
    """debootstrap of the builder's base system (compiler, kmod); the kernel headers come afterwards through apt
    from every builder source, so a target kernel of ``<suite>-security`` works too.

    ``--force-check-gpg``: the Release files are checked against the suite's keyring (debootstrap's default for the
    suite, from the distribution's keyring package on the build host) and a missing keyring aborts instead of going
    on unchecked; ``allow_unauthenticated`` drops that.
    """
    pkgs = list(base_packages or BUILDER_PACKAGES) + list(extra_packages or [])
    argv = [debootstrap, "--variant=minbase", "--include=%s" % ",".join(pkgs)]
    if cache_dir:
        argv.append("--cache-dir=%s" % cache_dir)
    if not allow_unauthenticated:
        argv.append("--force-check-gpg")
    return argv + [suite, root, mirror]


def headers_install_argvs(chroot, root, kver, allow_unauthenticated=False):
    """The apt commands run in the builder rootfs (chroot) to add the target kernel's headers."""
    apt = [chroot, root, "/usr/bin/apt-get", "-q", "-o", "Acquire::Retries=3", "-o", "APT::Sandbox::User=root"]
    if not allow_unauthenticated:
        apt += APT_SECURE_OPTIONS
    return [
        apt + ["update"],
        apt + ["install", "-y", "--no-install-recommends", "linux-headers-%s" % kver],
        apt + ["clean"],
    ]


def _source_lines(sysroot, suite, mirror, sources, allow_unauthenticated):
    try:
        if sources:
            lines = [validate_source_line(s, allow_unauthenticated) for s in sources]
            return lines, mirror or host_mirror(sysroot, suite)
        lines = builder_sources(sysroot, suite, mirror)
        return lines, lines[0].split()[1]
    except ValueError as e:
        raise KmodBuildError(str(e))


def ensure_builder_image(run, tools, kver, env, scratch, suite=None, mirror=None, sysroot=None,
                         image=None, extra_packages=None, deb_cache=None, sources=None,
                         allow_unauthenticated=False, base_packages=None):
    """Make sure the builder image exists; create it from Debian packages when missing.

    The base system is debootstrapped from ``suite``; ``linux-headers-<kver>`` is then installed with apt from
    ``sources`` (default: :func:`builder_sources`, i.e. the suite plus the host's -updates and -security).
    Returns (image name, created: bool, seconds spent).
    """
    image = image or builder_image_name(kver)
    podman = tools["podman"]
    if image_exists(run, podman, image, env):
        return image, False, 0.0
    if not suite:
        raise KmodBuildError("builder image %s does not exist and no Debian suite was given to create it" % image)
    for tool in ("debootstrap", "chroot"):
        if not tools.get(tool):
            raise KmodBuildError("builder image %s does not exist and %s is not installed to create it"
                                 % (image, tool))
    sysroot = sysroot or Sysroot()
    lines, base_mirror = _source_lines(sysroot, suite, mirror, sources, allow_unauthenticated)
    start = time.time()
    work = tempfile.mkdtemp(prefix="gpufabric-kbuild-", dir=scratch)
    try:
        root = os.path.join(work, "root")
        if deb_cache:
            os.makedirs(deb_cache, exist_ok=True)
        rc, out, err = run(debootstrap_argv(tools["debootstrap"], root, suite, base_mirror, extra_packages,
                                            deb_cache, allow_unauthenticated, base_packages))
        if rc != 0:
            raise KmodBuildError("debootstrap of the builder image's base system (%s from %s) failed"
                                 % (suite, base_mirror), rc=rc, stdout=out[-3000:], stderr=err[-3000:])
        missing = [k for k in signed_by_paths(lines) if not os.path.isfile(os.path.join(root, k.lstrip("/")))]
        if missing:
            raise KmodBuildError("the builder sources name signed-by keyrings the builder rootfs does not have: %s"
                                 % ", ".join(missing))
        apt_dir = os.path.join(root, "etc", "apt")
        with open(os.path.join(apt_dir, "sources.list"), "w") as f:
            f.write("# gpufabric builder image for %s\n%s\n" % (kver, "\n".join(lines)))
        for argv in headers_install_argvs(tools["chroot"], root, kver, allow_unauthenticated):
            rc, out, err = run(argv)
            if rc != 0:
                raise KmodBuildError("installing linux-headers-%s in the builder image failed (apt-get %s): is that "
                                     "kernel in one of these apt sources, signed by the distribution's keyring? %s"
                                     % (kver, argv[-1] if argv[-1] == "update" else "install", "; ".join(lines)),
                                     rc=rc, stdout=out[-3000:], stderr=err[-3000:])
        shutil.rmtree(os.path.join(root, "var", "lib", "apt", "lists"), ignore_errors=True)
        if not os.path.isdir(os.path.join(root, "usr", "src", "linux-headers-%s" % kver)):
            raise KmodBuildError("apt installed no /usr/src/linux-headers-%s in the builder image" % kver)
        tarball = os.path.join(work, "rootfs.tar")
        rc, out, err = run([tools["tar"], "-C", root, "--numeric-owner", "-cf", tarball, "."])
        if rc != 0:
            raise KmodBuildError("packing the builder rootfs failed", rc=rc, stderr=err[-3000:])
        rc, out, err = run([podman, "import", "-q", tarball, image], env=env)
        if rc != 0:
            raise KmodBuildError("podman import of %s failed" % image, rc=rc, stderr=err[-3000:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return image, True, time.time() - start


# --------------------------------------------------------------------------- user-named image

def ensure_named_image(run, tools, image, env):
    """The user's image (``image`` mode): used when present, else ``podman pull`` of exactly that reference (a
    digest-pinned reference is verified by podman). Returns (image, pulled: bool, seconds)."""
    validate_image_ref(image)
    podman = tools["podman"]
    if image_exists(run, podman, image, env):
        return image, False, 0.0
    start = time.time()
    rc, out, err = run([podman, "pull", "-q", image], env=env)
    if rc != 0:
        raise KmodBuildError("builder image %s is not here and podman pull of it failed" % image, rc=rc,
                             stdout=out[-2000:], stderr=err[-2000:])
    return image, True, time.time() - start


# --------------------------------------------------------------------------- what is in the image

PACKAGES_QUERY = "\n".join([
    "set -eu",
    "if command -v dpkg-query >/dev/null 2>&1; then",
    "  dpkg-query -W -f '${db:Status-Status}\\t${Package}\\t${Version}\\t${Architecture}\\n'",
    "elif command -v rpm >/dev/null 2>&1; then",
    "  rpm -qa --qf 'installed\\t%{NAME}\\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\t%{ARCH}\\n'",
    "else",
    "  echo 'gpufabric: the builder image has neither dpkg-query nor rpm' >&2; exit 7",
    "fi",
    "if [ -d \"/lib/modules/$KVER/build\" ]; then printf 'gpufabric-headers\\tyes\\n'; fi",
    "",
])


def parse_package_list(text):
    """(sorted ["name=version arch"], headers_present) from the output of :data:`PACKAGES_QUERY`."""
    pkgs, headers = set(), False
    for line in (text or "").splitlines():
        f = line.split("\t")
        if f[:2] == ["gpufabric-headers", "yes"]:
            headers = True
        elif len(f) == 4 and f[0] == "installed" and f[1]:
            pkgs.add("%s=%s %s" % (f[1], f[2], f[3]))
    return sorted(pkgs), headers


def image_identity(run, podman, image, env):
    """The image's identity as ``podman image inspect`` reports it: ``id`` (the image ID, a sha256 of its config,
    so a rebuilt or re-pulled image gets a new one), ``digest`` and ``repo_digests``."""
    rc, out, err = run([podman, "image", "inspect", image], env=env)
    if rc != 0:
        raise KmodBuildError("podman image inspect %s failed" % image, rc=rc, stderr=err[-2000:])
    try:
        doc = json.loads(out)
        doc = doc[0] if isinstance(doc, list) else doc
        image_id = doc.get("Id")
    except (ValueError, IndexError, KeyError, AttributeError):
        raise KmodBuildError("podman image inspect %s printed no image description" % image, stdout=out[-2000:])
    if not isinstance(image_id, str) or not image_id:
        raise KmodBuildError("podman image inspect %s printed no image Id" % image, stdout=out[-2000:])
    return {"id": image_id, "digest": doc.get("Digest"), "repo_digests": sorted(doc.get("RepoDigests") or [])}


def builder_identity(run, podman, image, kver, env, user_args, mode=None, identity=None):
    """What the build ran in: the image's identity (:func:`image_identity`, or ``identity`` when already read) and
    its package versions.

    Fails when the image has no ``/lib/modules/<kver>/build`` (the headers of the target kernel).
    """
    identity = identity or image_identity(run, podman, image, env)
    argv = [podman, "run", "--rm", "--pull=never", "--network", "none", "--cap-drop", "all", "--security-opt",
            "no-new-privileges"] + list(user_args) + ["-e", "KVER=%s" % kver, image, "/bin/sh", "-c"]
    argv.append(PACKAGES_QUERY)
    rc, out, err = run(argv, env=env)
    if rc != 0:
        last = (err or "").strip().splitlines()[-1:] or [""]
        raise KmodBuildError("listing the packages of builder image %s failed (rc=%d) %s" % (image, rc, last[0][:300]),
                             rc=rc, stderr=err[-2000:])
    packages, headers = parse_package_list(out)
    if not headers:
        raise KmodBuildError("builder image %s has no /lib/modules/%s/build: it holds no headers of the target "
                             "kernel" % (image, kver))
    text = "".join(p + "\n" for p in packages)
    return {"mode": mode, "image": image, "id": identity["id"], "digest": identity["digest"],
            "repo_digests": identity["repo_digests"], "packages": packages,
            "packages_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


_PACKAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9+._-]*(?:=[A-Za-z0-9.+~:_-]+)?")


def validate_package_name(value):
    """A package name for the builder image (``name`` or apt's ``name=version``); raises ValueError."""
    if not isinstance(value, str) or not _PACKAGE_RE.fullmatch(value):
        raise ValueError("builder package %s is not a package name (letters, digits, + . _ -, optionally "
                         "=VERSION)" % ascii(value))
    return value
