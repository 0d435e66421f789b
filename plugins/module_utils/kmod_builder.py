# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Builder stage of the vendor NFS client: the podman configuration and ``podman run`` of one build,
the builder image (debootstrap + the target kernel's headers), the build itself and its cache.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import re
import shutil
import tempfile
import time

from ansible_collections.gpufabric.node.plugins.module_utils.kmod_common import (
    BUILDER_IMAGE, BUILDER_PACKAGES, CACHE_FORMAT, MANIFEST_MODULE_KEYS, PROFILES, KmodBuildError, sha256_file,
    validate_sha256)
from ansible_collections.gpufabric.node.plugins.module_utils.kmod_compress import Codecs, is_module_path
from ansible_collections.gpufabric.node.plugins.module_utils.kmod_inspect import inspect_module, verify_modules
from ansible_collections.gpufabric.node.plugins.module_utils.kmod_package import (
    extract_package, package_contents, verify_package_lists)
from ansible_collections.gpufabric.node.plugins.module_utils.kmod_source import extract_source, verify_source
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot


def cache_key(source_sha256, profile, kver, cert_fingerprint=None):
    """Stable key of one build: same source, profile, kernel and signing certificate = same artifacts."""
    doc = {"format": CACHE_FORMAT, "source_sha256": validate_sha256(source_sha256), "profile": profile,
           "kver": kver, "cert": cert_fingerprint or ""}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- podman

def containers_conf_text():
    """containers.conf with the quirks of these hosts (runc, explicit ulimits, cgroupfs, no network)."""
    return "\n".join([
        "[containers]",
        'default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]',
        'netns = "none"',
        "",
        "[engine]",
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        "",
    ])


def storage_conf_text(base):
    return "\n".join([
        "[storage]",
        'driver = "overlay"',
        'graphroot = "%s"' % os.path.join(base, "graph"),
        'runroot = "%s"' % os.path.join(base, "run"),
        "",
    ])


def podman_env(conf_dir, write_storage=True):
    """Write containers.conf (+ storage.conf) into ``conf_dir``; returns the environment to pass to podman.

    An existing storage.conf there is kept (another tool may own that storage, e.g. the VM lab's).
    """
    if not conf_dir:
        return {}
    os.makedirs(conf_dir, exist_ok=True)
    env = {}
    conf = os.path.join(conf_dir, "containers.conf")
    if not os.path.exists(conf):
        with open(conf, "w") as f:
            f.write(containers_conf_text())
    env["CONTAINERS_CONF"] = conf
    storage = os.path.join(conf_dir, "storage.conf")
    if write_storage and not os.path.exists(storage):
        with open(storage, "w") as f:
            f.write(storage_conf_text(conf_dir))
    if os.path.exists(storage):
        env["CONTAINERS_STORAGE_CONF"] = storage
    return env


def builder_image_name(kver, base=BUILDER_IMAGE):
    return "%s:%s" % (base, kver)


# Signing a compressed module: decompress, sign-file, compress again the way the kernel's modules_install does
# (scripts/Makefile.modinst signs the .ko, then runs gzip -n / xz --check=crc32 --lzma2=dict=1MiB / zstd on it).
SIGN_FUNCTION = [
    "gf_need() { command -v \"$1\" >/dev/null 2>&1 || { echo \"gpufabric: signing $2 needs $1 in the builder "
    "image (builder_extra_packages)\" >&2; exit 6; }; }",
    "gf_sign() {",
    "  f=$1; k=$f",
    "  case \"$f\" in",
    "    *.ko.gz) gf_need gzip \"$f\"; gzip -d -f \"$f\"; k=${f%.gz} ;;",
    "    *.ko.xz) gf_need xz \"$f\"; xz -d -f \"$f\"; k=${f%.xz} ;;",
    "    *.ko.zst) gf_need zstd \"$f\"; zstd -d -q --rm -f \"$f\"; k=${f%.zst} ;;",
    "  esac",
    "  \"$S\" sha256 /keys/signing.key /keys/signing.crt \"$k\"",
    "  case \"$f\" in",
    "    *.ko.gz) gzip -n -f \"$k\" ;;",
    "    *.ko.xz) xz --check=crc32 --lzma2=dict=1MiB -f \"$k\" ;;",
    "    *.ko.zst) zstd -q --rm -f \"$k\" ;;",
    "  esac",
    "}",
]


def container_script(profile, sign=False):
    """The POSIX shell script run *inside* the builder container (inputs through environment variables)."""
    p = PROFILES[profile]
    cmd = " ".join('"%s"' % a.replace("{kver}", "$KVER") if "{kver}" in a else "'%s'" % a for a in p["argv"])
    lines = [
        "set -eu",
        "B=/tmp/gpufabric-build",
        'rm -rf "$B"; mkdir -p "$B"',
        'cp -R /src/. "$B/"',
        'cd "$B"',
        'echo "gpufabric: building profile %s for $KVER"' % profile,
        cmd,
        "mkdir -p /out/dist",
        "found=0",
    ]
    if p["package"]:
        lines += [
            "for f in dist/*.deb dist/*.rpm; do [ -f \"$f\" ] || continue; cp \"$f\" /out/dist/; found=1; done",
        ]
    else:
        lines += [
            "for f in $(find . -name '*.ko' -type f); do cp \"$f\" /out/dist/; found=1; done",
        ]
    lines.append('[ "$found" = 1 ] || { echo "gpufabric: the build left no outputs" >&2; exit 3; }')
    if sign:
        lines += [
            'S=/usr/src/linux-headers-$KVER/scripts/sign-file',
            '[ -x "$S" ] || S=$(ls /usr/lib/linux-kbuild-*/scripts/sign-file 2>/dev/null | head -n 1)',
            '[ -n "$S" ] && [ -x "$S" ] || { echo "gpufabric: sign-file not found in the builder image" >&2; exit 4; }',
            "cd /out/dist",
        ] + SIGN_FUNCTION + [
            "for ko in *.ko *.ko.gz *.ko.xz *.ko.zst; do [ -f \"$ko\" ] || continue; gf_sign \"$ko\"; done",
            "for deb in *.deb; do [ -f \"$deb\" ] || continue; rm -rf /tmp/gpufabric-pkg;",
            "  dpkg-deb -R \"$deb\" /tmp/gpufabric-pkg;",
            "  for ko in $(find /tmp/gpufabric-pkg -type f \\( -name '*.ko' -o -name '*.ko.gz' -o -name '*.ko.xz' "
            "-o -name '*.ko.zst' \\)); do gf_sign \"$ko\"; done;",
            "  dpkg-deb --root-owner-group -b /tmp/gpufabric-pkg \"$deb\" >/dev/null; done",
            "for rpm in *.rpm; do [ -f \"$rpm\" ] || continue; echo \"gpufabric: signing inside rpm packages is not "
            "supported, sign in the vendor build\" >&2; exit 5; done",
        ]
    return "\n".join(lines) + "\n"


def podman_run_argv(podman, image, src_dir, out_dir, kver, profile, sign_dir=None, name=None):
    """``podman run`` of one build: not privileged, no network, no capabilities, read-only source."""
    argv = [podman, "run", "--rm", "--network", "none", "--cap-drop", "all",
            "--security-opt", "no-new-privileges", "--pids-limit", "4096",
            "-v", "%s:/src:ro" % src_dir, "-v", "%s:/out:rw" % out_dir,
            "-e", "KVER=%s" % kver, "-w", "/"]
    if name:
        argv += ["--name", name]
    if sign_dir:
        argv += ["-v", "%s:/keys:ro" % sign_dir]
    argv += [image, "/bin/sh", "-c", container_script(profile, sign=bool(sign_dir))]
    return argv


# --------------------------------------------------------------------------- builder image

def parse_apt_sources(files_text):
    """[(uri, suite, components)] from deb822 ``.sources`` and one-line ``sources.list`` texts."""
    entries = []
    for text in files_text:
        if re.search(r"^\s*Types:", text, re.M):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line:
                        continue
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
                if "deb" not in fields.get("types", "").split():
                    continue
                if fields.get("enabled", "yes").lower() == "no":
                    continue
                for uri in fields.get("uris", "").split():
                    for suite in fields.get("suites", "").split():
                        entries.append((uri, suite, fields.get("components", "").split()))
        else:
            for line in text.splitlines():
                line = re.sub(r"\[[^\]]*\]", "", line.split("#", 1)[0]).split()
                if len(line) >= 3 and line[0] == "deb":
                    entries.append((line[1], line[2], line[3:]))
    return entries


def _host_apt_texts(sysroot):
    texts = []
    for pattern in ("/etc/apt/sources.list.d/*.sources", "/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list"):
        for p in sorted(glob.glob(sysroot.path(pattern))):
            try:
                with open(p) as f:
                    texts.append(f.read())
            except (OSError, IOError):
                continue
    return texts


def host_mirror(sysroot, suite):
    """The mirror URI the host's apt already uses for ``suite`` ``main`` (never a hard-coded host)."""
    for uri, s, comps in parse_apt_sources(_host_apt_texts(sysroot)):
        if s == suite and "main" in comps:
            return uri
    raise KmodBuildError("no apt source of the host serves %s main: pass the builder mirror explicitly" % suite)


# Debian publishes new kernel ABIs (linux-headers-6.1.0-<abi>-amd64) in <suite>-security and <suite>-updates long
# before a point release moves them to <suite>: a builder for a target kernel needs those suites too.
COMPANION_SUITES = ("-updates", "-security")


def builder_sources(sysroot, suite, mirror=None):
    """apt source lines of the builder image: ``suite`` main (from ``mirror`` or the host's apt) and the host's
    ``<suite>-updates`` / ``<suite>-security`` main sources when it has them. Returns a list of
    ``deb URI SUITE main`` lines, the base suite first."""
    entries = parse_apt_sources(_host_apt_texts(sysroot))
    lines = ["deb %s %s main" % (mirror or host_mirror(sysroot, suite), suite)]
    for tail in COMPANION_SUITES:
        for uri, s, comps in entries:
            if s == suite + tail and "main" in comps:
                line = "deb %s %s main" % (uri, s)
                if line not in lines:
                    lines.append(line)
                break
    return lines


def validate_source_line(line):
    """One-line apt source ``deb URI SUITE COMPONENT...`` (options in brackets allowed); raises ValueError."""
    words = re.sub(r"\[[^\]]*\]", "", line).split()
    if len(words) < 4 or words[0] != "deb" or not re.match(r"^(https?|file):", words[1]):
        raise ValueError("builder source %r is not an apt line 'deb URI SUITE COMPONENT...'" % line)
    return line.strip()


def debootstrap_argv(debootstrap, root, suite, mirror, extra_packages=None, cache_dir=None):
    """debootstrap of the builder's base system (compiler, kmod); the kernel headers come afterwards through apt
    from every builder source, so a target kernel of ``<suite>-security`` works too."""
    pkgs = list(BUILDER_PACKAGES) + list(extra_packages or [])
    argv = [debootstrap, "--variant=minbase", "--include=%s" % ",".join(pkgs)]
    if cache_dir:
        argv.append("--cache-dir=%s" % cache_dir)
    return argv + [suite, root, mirror]


def headers_install_argvs(chroot, root, kver):
    """The apt commands run in the builder rootfs (chroot) to add the target kernel's headers."""
    apt = [chroot, root, "/usr/bin/apt-get", "-q", "-o", "Acquire::Retries=3", "-o", "APT::Sandbox::User=root"]
    return [
        apt + ["update"],
        apt + ["install", "-y", "--no-install-recommends", "linux-headers-%s" % kver],
        apt + ["clean"],
    ]


def ensure_builder_image(run, tools, kver, env, scratch, suite=None, mirror=None, sysroot=None,
                         image=None, extra_packages=None, deb_cache=None, sources=None):
    """Make sure the builder image exists; create it from Debian packages when missing.

    The base system is debootstrapped from ``suite``; ``linux-headers-<kver>`` is then installed with apt from
    ``sources`` (default: :func:`builder_sources`, i.e. the suite plus the host's -updates and -security).
    Returns (image name, created: bool, seconds spent).
    """
    image = image or builder_image_name(kver)
    podman = tools["podman"]
    rc, _o, _e = run([podman, "image", "exists", image], env=env)
    if rc == 0:
        return image, False, 0.0
    if not suite:
        raise KmodBuildError("builder image %s does not exist and no Debian suite was given to create it" % image)
    for tool in ("debootstrap", "chroot"):
        if not tools.get(tool):
            raise KmodBuildError("builder image %s does not exist and %s is not installed to create it"
                                 % (image, tool))
    sysroot = sysroot or Sysroot()
    if sources:
        lines = [validate_source_line(s) for s in sources]
        base_mirror = mirror or host_mirror(sysroot, suite)
    else:
        lines = builder_sources(sysroot, suite, mirror)
        base_mirror = lines[0].split()[1]
    start = time.time()
    work = tempfile.mkdtemp(prefix="gpufabric-kbuild-", dir=scratch)
    try:
        root = os.path.join(work, "root")
        if deb_cache:
            os.makedirs(deb_cache, exist_ok=True)
        rc, out, err = run(debootstrap_argv(tools["debootstrap"], root, suite, base_mirror, extra_packages,
                                            deb_cache))
        if rc != 0:
            raise KmodBuildError("debootstrap of the builder image's base system (%s from %s) failed"
                                 % (suite, base_mirror), rc=rc, stdout=out[-3000:], stderr=err[-3000:])
        apt_dir = os.path.join(root, "etc", "apt")
        with open(os.path.join(apt_dir, "sources.list"), "w") as f:
            f.write("# gpufabric builder image for %s\n%s\n" % (kver, "\n".join(lines)))
        for argv in headers_install_argvs(tools["chroot"], root, kver):
            rc, out, err = run(argv)
            if rc != 0:
                raise KmodBuildError("installing linux-headers-%s in the builder image failed (%s): is that kernel "
                                     "in one of these apt sources? %s" % (kver, " ".join(argv[2:4]), "; ".join(lines)),
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


# --------------------------------------------------------------------------- build with cache

def _manifest_path(cache_dir, key):
    return os.path.join(cache_dir, key, "manifest.json")


def load_cached(cache_dir, key):
    """The cached manifest when every artifact is still there with its recorded sha256, else None."""
    p = _manifest_path(cache_dir, key)
    try:
        with open(p) as f:
            man = json.load(f)
    except (OSError, IOError, ValueError):
        return None
    for a in man.get("artifacts", []):
        ap = os.path.join(cache_dir, key, a["file"])
        if not os.path.isfile(ap) or sha256_file(ap) != a["sha256"]:
            return None
    return man


def artifact_path(cache_dir, manifest, artifact):
    return os.path.join(cache_dir, manifest["key"], artifact["file"])


def verify_outputs(dist_dir, kver, profile, run=None, tools=None, require_signature=False, required=None,
                   codecs=None):
    """Inspect what the build left in ``dist_dir``: packages, their modules (``.ko`` or compressed), vermagic,
    symbol, signature.

    Returns (artifacts, modules, problems).
    """
    codecs = codecs or Codecs(run, tools)
    artifacts, modules, problems = [], [], []
    files = sorted(os.listdir(dist_dir)) if os.path.isdir(dist_dir) else []
    pkgs = [f for f in files if f.endswith((".deb", ".rpm"))]
    kos = [f for f in files if is_module_path(f)]
    if PROFILES[profile]["package"] and not pkgs:
        return [], [], ["the build produced no package (dist/*.deb or dist/*.rpm)"]
    unpack = tempfile.mkdtemp(prefix=".unpack-", dir=dist_dir)
    try:
        for pkg in pkgs:
            path = os.path.join(dist_dir, pkg)
            listed = package_contents(path, run, tools, codecs)
            rels = [p for p in listed if is_module_path(p)]
            problems += verify_package_lists(listed, rels, kver)
            sub = os.path.join(unpack, pkg)
            extract_package(path, sub, run, tools, codecs=codecs)
            pkg_mods = []
            for rel in rels:
                facts = inspect_module(os.path.join(sub, rel.lstrip("/")), run, tools, codecs)
                facts["installed_path"] = rel
                facts["package"] = pkg
                facts["path"] = "%s:%s" % (pkg, rel)
                pkg_mods.append(facts)
            if not pkg_mods:
                problems.append("package %s contains no kernel modules" % pkg)
            modules += pkg_mods
            artifacts.append({"file": "dist/" + pkg, "kind": pkg.rsplit(".", 1)[1], "sha256": sha256_file(path),
                              "modules": [m["installed_path"] for m in pkg_mods]})
        for ko in kos:
            path = os.path.join(dist_dir, ko)
            facts = inspect_module(path, run, tools, codecs)
            facts["installed_path"] = "/lib/modules/%s/updates/bundle/%s" % (kver, ko)
            facts["package"] = None
            facts["path"] = ko
            modules.append(facts)
            artifacts.append({"file": "dist/" + ko, "kind": "ko", "sha256": facts["file_sha256"],
                              "modules": [facts["installed_path"]]})
    finally:
        shutil.rmtree(unpack, ignore_errors=True)
    problems += verify_modules(modules, kver, require_signature=require_signature, required=required)
    return artifacts, modules, problems


def build(run, tools, source, source_sha256, kver, version, profile, cache_dir, image, env=None,
          signing=None, required_modules=None, keep_failed=False, codecs=None):
    """Build (or find in the cache) the vendor client for ``kver``.

    ``signing`` is None or {"key": path, "cert": path}. Returns the manifest plus ``cache_hit`` and ``timings``.
    Raises KmodBuildError with the evidence when any check fails; nothing lands in the cache then.
    """
    t0 = time.time()
    source_sha256 = verify_source(source, source_sha256)
    cert_fp = sha256_file(signing["cert"]) if signing else None
    key = cache_key(source_sha256, profile, kver, cert_fp)
    cached = load_cached(cache_dir, key)
    if cached is not None:
        cached["cache_hit"] = True
        cached["timings"] = {"total": round(time.time() - t0, 3)}
        return cached
    os.makedirs(cache_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".build-%s-" % key[:12], dir=cache_dir)
    try:
        src_root = os.path.join(work, "src")
        top, collisions = extract_source(source, src_root)
        out_dir = os.path.join(work, "out")
        os.makedirs(out_dir)
        sign_dir = None
        if signing:
            sign_dir = os.path.join(work, "keys")
            os.makedirs(sign_dir, 0o700)
            shutil.copy2(signing["key"], os.path.join(sign_dir, "signing.key"))
            shutil.copy2(signing["cert"], os.path.join(sign_dir, "signing.crt"))
        t1 = time.time()
        argv = podman_run_argv(tools["podman"], image, top, out_dir, kver, profile, sign_dir=sign_dir)
        rc, out, err = run(argv, env=env)
        build_s = time.time() - t1
        log = "$ podman run ... %s\n%s\n--- stderr ---\n%s" % (image, out, err)
        with open(os.path.join(work, "build.log"), "w") as f:
            f.write(log)
        if rc != 0:
            first = first_error_line(err) or first_error_line(out)
            # the case-collision hint unless the compiler names an error of its own ("make: *** No rule to make
            # target" is what a lost Makefile looks like, so make's errors keep the hint)
            hint = "" if re.search(r"\berror:", first) else collisions_hint(collisions)
            raise KmodBuildError("the container build failed (rc=%d) for kernel %s%s%s" % (
                rc, kver, ": " + first if first else "", hint), rc=rc, stdout=out[-4000:], stderr=err[-4000:],
                collisions=collisions)
        dist = os.path.join(out_dir, "dist")
        artifacts, modules, problems = verify_outputs(dist, kver, profile, run, tools,
                                                      require_signature=bool(signing), required=required_modules,
                                                      codecs=codecs)
        if problems:
            raise KmodBuildError("the build for kernel %s is not usable: %s%s" % (
                kver, "; ".join(problems), collisions_hint(collisions)), problems=problems,
                collisions=collisions, stdout=out[-4000:], stderr=err[-4000:])
        final = os.path.join(cache_dir, key)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.makedirs(final)
        shutil.move(dist, os.path.join(final, "dist"))
        shutil.move(os.path.join(work, "build.log"), os.path.join(final, "build.log"))
        manifest = {
            "format": CACHE_FORMAT, "key": key, "source_sha256": source_sha256, "profile": profile,
            "kver": kver, "version": version, "image": image, "signed": bool(signing),
            "cert_sha256": cert_fp, "collisions": collisions, "artifacts": artifacts,
            "modules": [dict((k, m[k]) for k in MANIFEST_MODULE_KEYS) for m in modules],
            "rdma_exports_nvfs": True, "built_at": int(time.time()), "build_seconds": round(build_s, 2),
        }
        with open(os.path.join(final, "manifest.json.tmp"), "w") as f:
            json.dump(manifest, f, indent=2, sort_keys=True)
        os.rename(os.path.join(final, "manifest.json.tmp"), os.path.join(final, "manifest.json"))
    finally:
        if not keep_failed:
            shutil.rmtree(work, ignore_errors=True)
    manifest["cache_hit"] = False
    manifest["timings"] = {"build": round(build_s, 2), "total": round(time.time() - t0, 2)}
    return manifest


def first_error_line(text):
    """The first compiler/make error of a build log (``file:line:col: error: ...`` or ``make: *** ...``)."""
    lines = (text or "").splitlines()
    for pattern in (r"\berror:", r"\*\*\*"):
        for line in lines:
            if re.search(pattern, line):
                return line.strip()[:300]
    return ""


def collisions_hint(collisions):
    if not collisions:
        return ""
    return " (the source has case-colliding names %s: a case-insensitive mount keeps only one of each)" % (
        ", ".join("/".join(g) for g in collisions))
