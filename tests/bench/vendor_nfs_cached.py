# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time vendor_nfs_build's cached path: a rebuild request for an unchanged (source, kernel).

usage: python vendor_nfs_cached.py [REPS]
The first run builds through a podman stand-in (the fixture of tests/unit/plugins/modules/test_vendor_nfs_build.py:
synthetic sunrpc/rpcrdma modules in a .deb) and installs into a scratch sysroot; the next REPS runs are timed,
each in a fresh interpreter (tests/bench/module_timer.py), with install=true (verifies the installed modules too).
Prints JSON {"first_s", "cached_run_s": [...], "median_s", "import_s", "changed", "tarball_bytes",
"sha256_s_per_mib"} (the last: hashing cost to add for a real vendor tarball of that many MiB).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "vendor_nfs")
KVER = "6.1.0-50-amd64"

FAKE_PODMAN = r'''#!%(python)s
import os, sys
sys.path.insert(0, %(fixtures)r)
import vendor_fixture as vf
args = sys.argv[1:]
if args[:2] == ["image", "exists"]:
    sys.exit(0)
answer = vf.builder_image_answer(["podman"] + args)
if answer:
    sys.stdout.write(answer[1])
    sys.exit(answer[0])
if args[0] == "run":
    out = [a.split(":")[0] for a in args if a.endswith(":/out:rw")][0]
    kver = [a.split("=", 1)[1] for a in args if a.startswith("KVER=")][0]
    base = "/lib/modules/%%s/updates/bundle/" %% kver
    os.makedirs(os.path.join(out, "dist"))
    vf.make_deb(os.path.join(out, "dist", "vastnfs-modules_1_amd64.deb"), {
        base + "sunrpc.ko": vf.make_module_elf("sunrpc", kver + " SMP", srcversion="S1"),
        base + "rpcrdma.ko": vf.make_module_elf("rpcrdma", kver + " SMP", srcversion="R1",
                                                exports=["rpcrdma_register_nvfs_dma_ops"]),
    })
    sys.exit(0)
sys.exit(2)
'''


def main(argv):
    reps = int(argv[1]) if len(argv) > 1 else 5
    sys.path.insert(0, FIXTURES)
    import vendor_fixture as vf
    tmp = tempfile.mkdtemp(prefix="bench-vnfs-")
    try:
        bindir = os.path.join(tmp, "bin")
        os.makedirs(bindir)
        with open(os.path.join(bindir, "podman"), "w") as f:
            f.write(FAKE_PODMAN % {"python": sys.executable, "fixtures": FIXTURES})
        os.chmod(os.path.join(bindir, "podman"), 0o755)
        root = os.path.join(tmp, "root")
        os.makedirs(os.path.join(root, "lib", "modules", KVER, "kernel"))
        src, digest = vf.make_source_tarball(tmp)
        args = {"src": src, "sha256": digest, "version": "4.0.35", "kernel_release": KVER,
                "cache_dir": os.path.join(tmp, "cache"), "builder_create": False, "install": True}
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), GPUFABRIC_SYSROOT=root)
        cmd = [sys.executable, os.path.join(HERE, "module_timer.py"), "vendor_nfs_build", json.dumps(args)]
        runs = []
        for _rep in range(reps + 1):
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, check=False)
            runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
        bad = [r for r in runs if r["failed"]]
        if bad:
            print(json.dumps({"error": bad[0]["msg"]}))
            return 1
        cached = runs[1:]
        # the fixture tarball is tiny; a vendor tarball is megabytes and the cached path hashes it once
        big = os.path.join(tmp, "big.bin")
        with open(big, "wb") as f:
            f.write(os.urandom(16 << 20))
        import time
        from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kmod_build
        t0 = time.perf_counter()
        kmod_build.sha256_file(big)
        sha_mib = (time.perf_counter() - t0) / 16.0
        print(json.dumps({"first_s": runs[0]["run_s"], "first_changed": runs[0]["changed"],
                          "cached_run_s": [r["run_s"] for r in cached],
                          "median_s": round(statistics.median(r["run_s"] for r in cached), 4),
                          "import_s": round(statistics.median(r["import_s"] for r in cached), 4),
                          "changed": any(r["changed"] for r in cached), "tarball_bytes": os.path.getsize(src),
                          "sha256_s_per_mib": round(sha_mib, 5)}))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
