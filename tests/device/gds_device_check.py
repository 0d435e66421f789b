# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run gds_verify's logic on a real GPU host and record what it reports (run there, not in CI).

    python3 tests/device/gds_device_check.py OUT_JSON [TEST_DIR [EXTRA_DIR...]]

Lays the repository out as ``ansible_collections/gpufabric/node`` in a temp dir (a symlink), runs
``nvfs.verify`` against TEST_DIR with the shipped cuFile program (compat mode off), then runs the program on its
own with compat mode ON and OFF (driver open only, and a full transfer) so the record shows what
cuFileDriverOpen returns in both cases; each EXTRA_DIR (a tmpfs, say, which cuFile's file system probe treats
differently from a virtio disk) gets the two full transfers too. It copies the host files the verdict reads
(NVIDIA driver version, IOMMU group types, mountinfo, nvidia-fs proc files when present) so the unit test
``tests/unit/plugins/modules/test_gds_verify.py`` can replay the record without a GPU.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import sys
import tempfile

__metaclass__ = type

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _layout():
    base = tempfile.mkdtemp(prefix="gf-coll-")
    os.makedirs(os.path.join(base, "ansible_collections", "gpufabric"))
    os.symlink(REPO, os.path.join(base, "ansible_collections", "gpufabric", "node"))
    sys.path.insert(0, base)
    return base


def _runner(timeout=120):
    def run(argv, env=None):
        full = dict(os.environ)
        full.update(env or {})
        try:
            p = subprocess.run(argv, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                               check=False)
        except subprocess.TimeoutExpired as e:
            return 124, (e.stdout or b"").decode("utf-8", "replace"), "timeout after %ds" % timeout
        except OSError as e:
            return 127, "", str(e)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    return run


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def host_files(test_dir):
    """The files the verdict reads, keyed by host path (mountinfo cut to the mounts on the test path)."""
    from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs
    files = {}
    for p in ("/proc/driver/nvidia/version", "/sys/module/nvidia/version", "/sys/module/nvidia/taint",
              "/proc/cmdline", "/proc/sys/kernel/osrelease", nvfs.STATS, nvfs.MODULES, nvfs.VERSION,
              nvfs.RW_STATS_PARAM, nvfs.BUNDLE_PARAM, "/sys/module/rpcrdma/srcversion", nvfs.CUFILE_JSON):
        text = _read(p)
        if text is not None:
            files[p] = text
    groups = {}
    base = "/sys/kernel/iommu_groups"
    for g in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        t = _read(os.path.join(base, g, "type"))
        groups[g] = t.strip() if t else None
    mi = _read("/proc/self/mountinfo") or ""
    real = os.path.realpath(test_dir)
    keep = [ln for ln in mi.splitlines()
            if " - " in ln and len(ln.split()) > 4 and (real + "/").startswith(ln.split()[4].rstrip("/") + "/")]
    files["/proc/self/mountinfo"] = "\n".join(keep) + "\n"
    return files, groups


def run_probe(run, python, test_dir, compat, mode):
    from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs
    work = tempfile.mkdtemp(prefix="gf-probe-")
    try:
        cfg = os.path.join(work, "cufile.json")
        with open(cfg, "w") as f:
            f.write(nvfs.render_cufile_json(nvfs.cufile_config({}, allow_compat_mode=compat, log_dir=work)))
        env = nvfs.probe_env(cfg, os.path.join(work, "cufile.log"))
        env["CUFILE_ALLOW_COMPAT_MODE"] = "true" if compat else "false"
        script = os.path.join(work, nvfs.PROBE_FILE)
        with open(script, "w") as f:
            f.write(nvfs.probe_source())
        rc, out, err = run([python, script, "--dir", test_dir, "--size", str(16 << 20), "--mode", mode], env)
        rep = nvfs.parse_probe_output(rc, out, err)
        rep["cufile_log_tail"] = nvfs._log_tail(work)
        return {"compat": compat, "mode": mode, "rc": rc, "stdout": out, "stderr": err[-4000:], "report": rep}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv):
    out_path = argv[1]
    test_dir = argv[2] if len(argv) > 2 else tempfile.mkdtemp(prefix="gds-verify-")
    _layout()
    from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs
    from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
    run = _runner()
    files, groups = host_files(test_dir)
    record = {"test_dir": test_dir, "python": sys.executable, "files": files, "iommu_groups": groups,
              "tools": dict((t, shutil.which(t)) for t in ("modinfo", "gdsio", "gdscheck", "nvidia-smi")),
              "gds_tools_dir": sorted(os.listdir("/usr/local/cuda/gds/tools"))
              if os.path.isdir("/usr/local/cuda/gds/tools") else None}
    rc, so, se = run(["nvidia-smi", "--query-gpu=name,driver_version,pci.bus_id", "--format=csv,noheader"])
    record["nvidia_smi"] = {"rc": rc, "out": so.strip(), "err": se.strip()[-500:]}
    runs = []

    def recording_run(a, env=None):
        r = run(a, env)
        runs.append({"argv": a, "env": env, "rc": r[0], "stdout": r[1], "stderr": r[2][-4000:]})
        return r

    res = nvfs.verify(Sysroot("/"), test_dir, size_mib=16, gpu=0, run=recording_run, python=sys.executable,
                      modinfo=shutil.which("modinfo"), method="probe")
    res.pop("facts", None)
    record["verify"] = res
    record["verify_runs"] = runs
    record["probe_runs"] = [run_probe(run, sys.executable, test_dir, c, m)
                            for c in (True, False) for m in ("open", "transfer")]
    record["probe_runs_extra"] = []
    for extra in argv[3:]:
        for c in (True, False):
            r = run_probe(run, sys.executable, extra, c, "transfer")
            r["dir"] = extra
            record["probe_runs_extra"].append(r)
    with open(out_path, "w") as f:
        json.dump(record, f, indent=2, sort_keys=True)
        f.write("\n")
    summary = {"gds_active": res["gds_active"], "reasons": res["reasons"], "warnings": res["warnings"],
               "preconditions": [(p["name"], p["status"]) for p in res["preconditions"]],
               "probe": [(r["compat"], r["mode"], (r["report"].get("driver_open") or {}).get("name"),
                          r["report"].get("data_matched"), r["report"].get("error"))
                         for r in record["probe_runs"] + record["probe_runs_extra"]]}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
