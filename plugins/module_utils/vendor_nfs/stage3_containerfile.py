# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Builder image from a Containerfile (``kmod_build``, mode ``containerfile``): the Containerfiles the collection
ships per family, and the ``podman build`` that turns one into the builder image of a target kernel.

For targets that debootstrap cannot make (Ubuntu, EL). The base image is always named by the user (their registry or
mirror, ideally pinned by ``@sha256:`` digest): nothing here names a registry. The family's package manager runs with
the distribution's keyring the base image carries and signature checks forced on (apt: no insecure or
unauthenticated repositories; dnf: ``gpgcheck``). The Containerfile's contract, for a user's own one too:

* build arguments ``BASE_IMAGE``, ``KVER``, ``BASE_PACKAGES``, ``EXTRA_PACKAGES``, ``PKG_OPTIONS``;
* the build context holds ``builder.list`` (the validated apt source lines, possibly empty);
* the image has ``/lib/modules/$KVER/build`` (checked afterwards by ``builder_identity``).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import tempfile
import time

from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage2_apt import validate_source_line
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import KmodBuildError
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage4_image import (
    APT_SECURE_OPTIONS, image_exists, validate_image_ref)

CONTAINERFILE_UBUNTU = """\
# gpufabric builder image, Debian family (Ubuntu, Debian): the target kernel's headers and a compiler.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG KVER
ARG BASE_PACKAGES
ARG EXTRA_PACKAGES=
ARG PKG_OPTIONS
COPY builder.list /etc/apt/sources.list.d/gpufabric-builder.list
RUN set -eu; test -n "${KVER}"; export DEBIAN_FRONTEND=noninteractive; \\
    apt-get -q ${PKG_OPTIONS} update; \\
    apt-get -q ${PKG_OPTIONS} install -y --no-install-recommends ${BASE_PACKAGES} ${EXTRA_PACKAGES} \\
        "linux-headers-${KVER}"; \\
    apt-get clean; rm -rf /var/lib/apt/lists/*; \\
    test -d "/lib/modules/${KVER}/build"
"""

CONTAINERFILE_EL = """\
# gpufabric builder image, EL family (RHEL, Rocky, Alma, CentOS Stream): kernel-devel of the target kernel.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG KVER
ARG BASE_PACKAGES
ARG EXTRA_PACKAGES=
ARG PKG_OPTIONS
RUN set -eu; test -n "${KVER}"; \\
    dnf -y ${PKG_OPTIONS} --setopt=install_weak_deps=False install ${BASE_PACKAGES} ${EXTRA_PACKAGES} \\
        "kernel-devel-${KVER}"; \\
    dnf clean all; \\
    test -d "/usr/src/kernels/${KVER}"; \\
    mkdir -p "/lib/modules/${KVER}"; ln -sfn "/usr/src/kernels/${KVER}" "/lib/modules/${KVER}/build"
"""

# family -> Containerfile, base packages, package manager options enforcing signatures
FAMILIES = {
    "ubuntu": {"containerfile": CONTAINERFILE_UBUNTU,
               "packages": list(os_profiles.PROFILES["ubuntu2404"]["builder_base_packages"]),
               "secure": list(APT_SECURE_OPTIONS), "apt": True},
    "el": {"containerfile": CONTAINERFILE_EL, "packages": list(os_profiles.PROFILES["el9"]["builder_base_packages"]),
           "secure": ["--setopt=gpgcheck=True", "--setopt=*.gpgcheck=True", "--setopt=localpkg_gpgcheck=True"],
           "apt": False},
}


def containerfile_text(family):
    if family not in FAMILIES:
        raise ValueError("unknown builder family %s (known: %s)" % (ascii(family), ", ".join(sorted(FAMILIES))))
    return FAMILIES[family]["containerfile"]


def build_args(family, base_image, kver, extra_packages=None, allow_unauthenticated=False, base_packages=None):
    """The ``--build-arg`` values of one builder image build."""
    fam = FAMILIES[family]
    secure = [] if (allow_unauthenticated and fam["apt"]) else fam["secure"]
    return [("BASE_IMAGE", base_image), ("KVER", kver),
            ("BASE_PACKAGES", " ".join(base_packages or fam["packages"])),
            ("EXTRA_PACKAGES", " ".join(extra_packages or [])),
            ("PKG_OPTIONS", " ".join(secure))]


def podman_build_argv(podman, image, containerfile, context, args, kver):
    argv = [podman, "build", "--pull=missing", "-f", containerfile, "-t", image,
            "--label", "io.gpufabric.builder.kver=%s" % kver]
    for k, v in args:
        argv += ["--build-arg", "%s=%s" % (k, v)]
    return argv + [context]


def ensure_containerfile_image(run, tools, kver, env, scratch, image, family, base_image, containerfile=None,
                               sources=None, extra_packages=None, allow_unauthenticated=False, base_packages=None):
    """Make sure ``image`` exists; build it with podman from the family's Containerfile (or ``containerfile``, a
    user's own with the same contract) on ``base_image`` when missing. Returns (image, created, seconds)."""
    podman = tools["podman"]
    if image_exists(run, podman, image, env):
        return image, False, 0.0
    if family not in FAMILIES:
        raise KmodBuildError("unknown builder family %s (known: %s)" % (ascii(family), ", ".join(sorted(FAMILIES))))
    if not base_image:
        raise KmodBuildError("builder image %s does not exist and no base image was given to build it from "
                             "(builder_base_image)" % image)
    try:
        validate_image_ref(base_image)
        lines = [validate_source_line(s, allow_unauthenticated) for s in (sources or [])]
    except ValueError as e:
        raise KmodBuildError(str(e))
    if lines and not FAMILIES[family]["apt"]:
        raise KmodBuildError("builder sources are apt lines; the %s family installs with dnf from the base "
                             "image's repositories" % family)
    start = time.time()
    work = tempfile.mkdtemp(prefix="gpufabric-kbuild-", dir=scratch)
    try:
        cf = os.path.join(work, "Containerfile")
        if containerfile:
            shutil.copyfile(containerfile, cf)
        else:
            with open(cf, "w") as f:
                f.write(containerfile_text(family))
        context = os.path.join(work, "context")
        os.makedirs(context)
        with open(os.path.join(context, "builder.list"), "w") as f:
            f.write("".join(line + "\n" for line in lines))
        args = build_args(family, base_image, kver, extra_packages, allow_unauthenticated, base_packages)
        rc, out, err = run(podman_build_argv(podman, image, cf, context, args, kver), env=env)
        if rc != 0:
            raise KmodBuildError("podman build of builder image %s (%s family, from %s) failed: is the kernel's "
                                 "headers package in the base image's repositories?" % (image, family, base_image),
                                 rc=rc, stdout=out[-3000:], stderr=err[-3000:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return image, True, time.time() - start
