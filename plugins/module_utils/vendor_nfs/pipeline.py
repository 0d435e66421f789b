# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pinned source tarball -> container build for one target kernel -> verified, cached, installed artifacts.

The vendor NFS client (VAST ``vastnfs`` as the reference) replaces the node's NFS stack and is built for one
exact kernel. The chain is plain Python so the modules, the tests and the kernel-upgrade gate use one
implementation. It lives in one file per stage; this file re-exports their public names (``kmod_build.<name>`` is
what the modules, tests and playbooks use):

* ``kmod_common``: constants, :class:`KmodBuildError`, input validation, digests;
* ``kmod_source``: mandatory sha256, safe extraction on a case-sensitive directory, case-colliding names reported
  (the tarball ships ``Makefile`` *and* ``makefile``; on a case-insensitive mount the build produces nothing);
* ``kmod_compress``: ``.ko.gz``/``.ko.xz``/``.ko.zst`` modules (format by magic like libkmod; zstd through the
  standard library, the ``zstandard`` package or the ``zstd`` tool);
* ``kmod_inspect``: ELF / ``.modinfo`` / vermagic / exported symbols / signature of a module, and the verification
  of a build's modules for one kernel (every ``.ko`` has the target kernel as first vermagic field, ``rpcrdma``
  exports ``rpcrdma_register_nvfs_dma_ops``, optional signature present);
* ``kmod_package``: Debian / RPM contents and extraction, the package lists the modules;
* ``kmod_apt``: the builder's apt source lines, each validated (one line, known options, no signature-less
  source unless allowed explicitly);
* ``kmod_image`` / ``kmod_containerfile``: the builder image holding the target kernel's headers (debootstrap,
  a Containerfile per family built with podman, or a user-named image) and its identity and package versions;
* ``kmod_builder``: ``podman run`` (never privileged, ``--network none``, ``--cap-drop all``, a non-root user,
  read-only source mount, separate output directory) in the builder image; the cache keyed by
  (source sha256, profile, kernel, signing certificate);
* ``kmod_install``: install for the target kernel without loading anything (package or copy, ``depmod``,
  initramfs), recorded in ``/etc/gpufabric/vendor_nfs.json`` for the pre-reboot gate;
* ``kmod_proof``: the gate before the reboot and the proof after it.

Commands go through a runner ``run(argv, env=None) -> (rc, out, err)``; ``tools`` maps a tool name to its
resolved path or None (then the pure-Python fallback is used). These files are private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import (  # noqa: F401
    BUILDER_IMAGE, BUILDER_PACKAGES, BUNDLE_PARAM, CACHE_FORMAT, MANIFEST_MODULE_KEYS, MODULE_NAME_RE, NVFS_SYMBOL,
    PROFILES, RDMA_MODULE, SIGNATURE_MAGIC, STATE_FILE, KmodBuildError, sha256_file, validate_kver, validate_profile,
    validate_sha256, validate_version)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage1_source import (  # noqa: F401
    HAS_DATA_FILTER, case_collisions, check_tree, extract_source, is_case_sensitive, safe_extract, verify_source)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.compress import (  # noqa: F401
    Codecs, find_tool, is_module_path, module_kind, module_name, sniff, with_kind)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.inspect import (  # noqa: F401
    ElfFile, exported_symbols, inspect_module, modinfo_fields, parse_nm_exports, parse_vermagic, read_module,
    read_module_bytes, verify_modules)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage6_package import (  # noqa: F401
    extract_package, package_contents, parse_dpkg_contents, verify_package_lists)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage2_apt import (  # noqa: F401
    COMPANION_SUITES, builder_sources, host_mirror, insecure_options, parse_apt_sources, parse_source_line,
    validate_mirror, validate_source_line, validate_suite)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage4_image import (  # noqa: F401
    BUILDER_MODES, builder_identity, builder_image_name, debootstrap_argv, ensure_builder_image, ensure_named_image,
    headers_install_argvs, image_exists, image_identity, parse_package_list, validate_image_ref, validate_package_name)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage3_containerfile import (  # noqa: F401
    FAMILIES, build_args, containerfile_text, ensure_containerfile_image, podman_build_argv)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage5_builder import (  # noqa: F401
    artifact_path, build, builder_record_text, cache_key, collisions_hint, container_script, containers_conf_text,
    find_cached, first_error_line, load_cached, podman_env, podman_run_argv, rootless, run_user_args, storage_conf_text,
    verify_outputs)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage7_install import (  # noqa: F401
    initramfs_has_modules, install, install_drift, install_plan, installed_problems, modules_dep_paths, placements,
    read_state, resolve_method, target_compression, update_initramfs)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage8_proof import (  # noqa: F401
    other_modules_problems, parse_nvfs_modules, prove_installed, prove_running)

__all__ = [
    "BUILDER_IMAGE", "BUILDER_MODES", "BUILDER_PACKAGES", "BUNDLE_PARAM", "CACHE_FORMAT", "COMPANION_SUITES",
    "FAMILIES", "HAS_DATA_FILTER", "MANIFEST_MODULE_KEYS", "MODULE_NAME_RE", "NVFS_SYMBOL", "PROFILES", "RDMA_MODULE",
    "SIGNATURE_MAGIC", "STATE_FILE", "Codecs", "ElfFile", "KmodBuildError", "artifact_path", "build", "build_args",
    "builder_identity", "builder_image_name", "builder_record_text", "builder_sources", "cache_key", "case_collisions",
    "check_tree", "collisions_hint", "container_script", "containerfile_text", "containers_conf_text",
    "debootstrap_argv", "ensure_builder_image", "ensure_containerfile_image", "ensure_named_image", "exported_symbols",
    "extract_package", "extract_source", "find_cached", "find_tool", "first_error_line", "headers_install_argvs",
    "host_mirror", "image_exists", "image_identity", "initramfs_has_modules", "insecure_options", "inspect_module",
    "install", "install_drift", "install_plan", "installed_problems", "is_case_sensitive", "is_module_path",
    "load_cached", "modinfo_fields", "module_kind", "module_name", "modules_dep_paths", "other_modules_problems",
    "package_contents", "parse_apt_sources", "parse_dpkg_contents", "parse_nm_exports", "parse_nvfs_modules",
    "parse_package_list", "parse_source_line", "parse_vermagic", "placements", "podman_build_argv", "podman_env",
    "podman_run_argv", "prove_installed", "prove_running", "read_module", "read_module_bytes", "read_state",
    "resolve_method", "rootless", "run_user_args", "safe_extract", "sha256_file", "sniff", "storage_conf_text",
    "target_compression", "update_initramfs", "validate_image_ref", "validate_kver", "validate_mirror",
    "validate_package_name", "validate_profile", "validate_sha256", "validate_source_line", "validate_suite",
    "validate_version", "verify_modules", "verify_outputs", "verify_package_lists", "verify_source", "with_kind",
]
