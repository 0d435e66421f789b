# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Builder stage of the vendor NFS client: the podman configuration and ``podman run`` of one build, the build
itself and its cache. The builder image comes from ``kmod_image`` (debootstrap, a user-named image) or
``kmod_containerfile`` (podman build), its apt sources from ``kmod_apt``.

The build container has no network (``--network none``), no capabilities (``--cap-drop all``,
``no-new-privileges``), a read-only source mount, and runs as a non-root user: with rootful podman (the module runs
as root) as ``nobody`` (65534), the output and key directories handed to that uid and the outputs given back to root
afterwards; with rootless podman as the invoking user itself (``--userns keep-id``), so every file stays that user's.

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

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import (
    CACHE_FORMAT, MANIFEST_MODULE_KEYS, PROFILES, KmodBuildError, sha256_file, validate_sha256)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage4_image import builder_identity, image_identity
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.compress import Codecs, is_module_path
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.inspect import inspect_module, verify_modules
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage6_package import (
    extract_package, package_contents, verify_package_lists)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage1_source import extract_source, verify_source

# the uid:gid the build runs as under rootful podman
BUILD_UID = 65534


def cache_key(source_sha256, profile, kver, builder_id, cert_fingerprint=None):
    """Stable key of one build: same source, profile, kernel, builder image and signing certificate = same artifacts.

    ``builder_id`` is the builder image's ID as ``podman image inspect`` reports it (:func:`image_identity`): the
    compiler and headers live in the image, so a rebuilt or re-pulled image is a new build, never the old one's.
    """
    if not isinstance(builder_id, str) or not re.fullmatch(r"(?:sha256:)?[0-9a-fA-F]{64}", builder_id):
        raise KmodBuildError("builder image ID %s is not a sha256 image ID" % ascii(builder_id))
    image_id = validate_sha256(builder_id)
    doc = {"format": CACHE_FORMAT, "source_sha256": validate_sha256(source_sha256), "profile": profile,
           "kver": kver, "cert": cert_fingerprint or "", "builder_id": image_id}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


def find_cached(cache_dir, source_sha256, profile, kver, cert_fingerprint=None):
    """On a host that cannot read the builder image (no podman: a cache entry copied here to install without
    building), the newest verified entry built from these inputs in any builder image, else None.

    An entry counts only when its name is the key of its own manifest's inputs (its builder's ID included).
    """
    found = []
    try:
        names = os.listdir(cache_dir)
    except OSError:
        return None
    want = (validate_sha256(source_sha256), profile, kver, cert_fingerprint)
    for name in names:
        man = load_cached(cache_dir, name) if re.fullmatch(r"[0-9a-f]{64}", name) else None
        if not isinstance(man, dict) or not isinstance(man.get("builder"), dict):
            continue
        have = (man.get("source_sha256"), man.get("profile"), man.get("kver"), man.get("cert_sha256"))
        try:
            own = cache_key(have[0], have[1], have[2], man["builder"].get("id"), have[3])
        except (KmodBuildError, ValueError, TypeError):
            continue
        if have == want and own == name and man.get("key") == name:
            found.append((man.get("built_at") or 0, name, man))
    return max(found, key=lambda x: (x[0], x[1]))[2] if found else None


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


def podman_env(conf_dir, write_storage=True, write=True):
    """Write containers.conf (+ storage.conf) into ``conf_dir``; returns the environment to pass to podman.

    An existing storage.conf there is kept (another tool may own that storage, e.g. the VM lab's). With ``write``
    false (check mode) nothing is written: the environment names the files that exist.
    """
    if not conf_dir:
        return {}
    if not write:
        env = {}
        for var, name in (("CONTAINERS_CONF", "containers.conf"), ("CONTAINERS_STORAGE_CONF", "storage.conf")):
            if os.path.isfile(os.path.join(conf_dir, name)):
                env[var] = os.path.join(conf_dir, name)
        return env
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
            '[ -n "$S" ] && [ -x "$S" ] || S=/lib/modules/$KVER/build/scripts/sign-file',
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


def rootless(euid=None):
    """Whether podman runs rootless here (the module runs as a user other than root)."""
    return (os.geteuid() if euid is None else euid) != 0


def run_user_args(is_rootless):
    """The non-root user of the build container: the invoking user mapped as itself (rootless), else nobody."""
    if is_rootless:
        return ["--userns", "keep-id"]
    return ["--user", "%d:%d" % (BUILD_UID, BUILD_UID)]


def podman_run_argv(podman, image, src_dir, out_dir, kver, profile, sign_dir=None, name=None, is_rootless=None):
    """``podman run`` of one build: not privileged, no network, no capabilities, non-root, read-only source."""
    is_rootless = rootless() if is_rootless is None else is_rootless
    argv = [podman, "run", "--rm", "--pull=never", "--network", "none", "--cap-drop", "all",
            "--security-opt", "no-new-privileges", "--pids-limit", "4096"] + run_user_args(is_rootless)
    argv += ["-v", "%s:/src:ro" % src_dir, "-v", "%s:/out:rw" % out_dir,
             "-e", "KVER=%s" % kver, "-e", "HOME=/tmp", "-w", "/"]
    if name:
        argv += ["--name", name]
    if sign_dir:
        argv += ["-v", "%s:/keys:ro" % sign_dir]
    argv += [image, "/bin/sh", "-c", container_script(profile, sign=bool(sign_dir))]
    return argv


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


def _readable_tree(top):
    """Let the build user (another uid under rootful podman) read the source tree: o+r, o+x where u+x."""
    for d, dirs, files in os.walk(top):
        for name in [None] + files:
            p = d if name is None else os.path.join(d, name)
            if os.path.islink(p):
                continue
            mode = os.stat(p).st_mode & 0o7777
            want = mode | 0o004 | (0o001 if mode & 0o100 else 0)
            if want != mode:
                os.chmod(p, want)


def _hand_over(path, uid):
    """chown ``path`` (recursively) to ``uid``:``uid``; links themselves, never their targets."""
    for d, dirs, files in os.walk(path):
        os.lchown(d, uid, uid)
        for name in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            os.lchown(os.path.join(d, name), uid, uid)


def builder_record_text(record):
    """The ``builder-packages.txt`` beside a build: the image identity, then one ``name=version arch`` a line."""
    head = ["# builder mode: %s" % record.get("mode"), "# image: %s" % record.get("image"),
            "# id: %s" % record.get("id"), "# digest: %s" % record.get("digest")]
    head += ["# repo digest: %s" % d for d in record.get("repo_digests") or []]
    return "\n".join(head + list(record.get("packages") or [])) + "\n"


def build(run, tools, source, source_sha256, kver, version, profile, cache_dir, image, env=None,
          signing=None, required_modules=None, keep_failed=False, codecs=None, builder_mode=None, is_rootless=None):
    """Build (or find in the cache) the vendor client for ``kver``.

    ``signing`` is None or {"key": path, "cert": path}. Returns the manifest plus ``cache_hit`` and ``timings``.
    The manifest's ``builder`` records the image identity and its package versions (also written as
    ``builder-packages.txt`` beside ``dist/``). Raises KmodBuildError with the evidence when any check fails;
    nothing lands in the cache then.
    """
    t0 = time.time()
    source_sha256 = verify_source(source, source_sha256)
    cert_fp = sha256_file(signing["cert"]) if signing else None
    identity = image_identity(run, tools["podman"], image, env)
    key = cache_key(source_sha256, profile, kver, identity["id"], cert_fp)
    cached = load_cached(cache_dir, key)
    if cached is not None:
        cached["cache_hit"] = True
        cached["timings"] = {"total": round(time.time() - t0, 3)}
        return cached
    os.makedirs(cache_dir, exist_ok=True)
    is_rootless = rootless() if is_rootless is None else is_rootless
    work = tempfile.mkdtemp(prefix=".build-%s-" % key[:12], dir=cache_dir)  # 0700: no other host user gets in
    try:
        src_root = os.path.join(work, "src")
        top, collisions = extract_source(source, src_root)
        record = builder_identity(run, tools["podman"], image, kver, env, run_user_args(is_rootless), builder_mode,
                                  identity=identity)
        out_dir = os.path.join(work, "out")
        os.makedirs(out_dir)
        sign_dir = None
        if signing:
            sign_dir = os.path.join(work, "keys")
            os.makedirs(sign_dir, 0o700)
            for src, name in ((signing["key"], "signing.key"), (signing["cert"], "signing.crt")):
                shutil.copyfile(src, os.path.join(sign_dir, name))
                os.chmod(os.path.join(sign_dir, name), 0o400)
        if not is_rootless:
            _readable_tree(top)
            _hand_over(out_dir, BUILD_UID)
            if sign_dir:
                _hand_over(sign_dir, BUILD_UID)
        t1 = time.time()
        argv = podman_run_argv(tools["podman"], image, top, out_dir, kver, profile, sign_dir=sign_dir,
                               is_rootless=is_rootless)
        rc, out, err = run(argv, env=env)
        build_s = time.time() - t1
        if not is_rootless:
            _hand_over(out_dir, 0)
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
        with open(os.path.join(final, "builder-packages.txt"), "w") as f:
            f.write(builder_record_text(record))
        manifest = {
            "format": CACHE_FORMAT, "key": key, "source_sha256": source_sha256, "profile": profile,
            "kver": kver, "version": version, "image": image, "signed": bool(signing),
            "cert_sha256": cert_fp, "collisions": collisions, "artifacts": artifacts,
            "modules": [dict((k, m[k]) for k in MANIFEST_MODULE_KEYS) for m in modules],
            "rdma_exports_nvfs": True, "built_at": int(time.time()), "build_seconds": round(build_s, 2),
            "builder": record,
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
