# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make collection`: the collection as a user installs it, from the built artifact.

Usage: check_artifact.py ARTIFACT_DIR
  ARTIFACT_DIR holds the built gpufabric-node-*.tar.gz and installed/ (the artifact installed with ansible-galaxy,
  as the Makefile leaves them). Every Ansible command below sees only that install: ANSIBLE_COLLECTIONS_PATH is
  installed/ and the collections the `ansible` package carries in site-packages are hidden
  (ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false), so kubernetes.core is not there, as for a user who installed only this
  collection. Checked, each step naming what failed:
  1. nothing but gpufabric.node (and ansible-core's own) is visible, kubernetes.core in particular;
  2. ansible-doc renders every module, filter, lookup and role of the installed copy;
  3. every playbook loads by its FQCN (`ansible-playbook --syntax-check`);
  4. kernel_upgrade.yml runs with Kubernetes off against localhost, the node's files in a throw-away sysroot: past
     its Kubernetes steps (not loaded) to the upgrade record and the vendor client's build, where a misspelled
     vendor client variable under gpufabric_strict_vars stops it before the role runs a module, and the rescue
     records the failure; nothing outside the sysroot is touched;
  5. the execution environment: `ansible-builder create` on execution-environment.yml with the artifact, then
     ansible-builder's own introspection (the script the Containerfile runs) on the collection from that context:
     an image installs the collection's runtime requirements (meta/ee-requirements.txt, meta/ee-bindep.txt) and
     nothing of the developers' requirements.txt; every collection in its requirements.yml is one the playbooks or
     roles use.
"""

from __future__ import absolute_import, division, print_function

import filecmp
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.path.dirname(os.path.abspath(sys.executable))
NAMESPACE, NAME = "gpufabric", "node"
FQ = "%s.%s" % (NAMESPACE, NAME)
# ansible-core's own collection, always visible
CORE_COLLECTIONS = {"ansible._protomatter"}


class Failed(Exception):
    pass


def env(installed, **extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") and k != "PYTHONPATH"}
    e.update(ANSIBLE_COLLECTIONS_PATH=installed, ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
             ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    e.update(extra)
    return e


def run(argv, e, cwd, ok=(0,)):
    p = subprocess.run(argv, env=e, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300, check=False)
    if p.returncode not in ok:
        raise Failed("%s: rc %d\n%s\n%s" % (" ".join(argv[:4]), p.returncode, p.stdout[-4000:], p.stderr[-4000:]))
    return p


def names(pattern, strip):
    return sorted(re.sub(strip, "", os.path.basename(p)) for p in glob.glob(os.path.join(REPO, pattern)))


def check_visible(installed, cwd):
    p = run([os.path.join(BIN, "ansible-galaxy"), "collection", "list", "--format", "json"], env(installed), cwd)
    seen = {c for per_path in json.loads(p.stdout).values() for c in per_path}
    if seen - CORE_COLLECTIONS != {FQ}:
        raise Failed("the install must see %s alone, it sees %s" % (FQ, sorted(seen)))
    return "only %s visible" % FQ


def check_docs(installed, cwd):
    plugins = {
        "module": names("plugins/modules/*.py", r"\.py$"),
        "filter": names("plugins/filter/*.yml", r"\.yml$"),
        "lookup": names("plugins/lookup/*.py", r"\.py$"),
        "role": sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
                       for p in glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml"))),
    }
    for kind, wanted in plugins.items():
        fq = ["%s.%s" % (FQ, n) for n in wanted]
        p = run([os.path.join(BIN, "ansible-doc"), "--json", "-t", kind] + fq, env(installed), cwd)
        missing = sorted(set(fq) - set(json.loads(p.stdout)))
        if not wanted or missing:
            raise Failed("ansible-doc -t %s does not render %s from the install\n%s" % (kind, missing, p.stderr))
    return "ansible-doc: " + ", ".join("%d %ss" % (len(v), k) for k, v in plugins.items())


def check_playbooks(installed, cwd):
    fq = ["%s.%s" % (FQ, n) for n in names("playbooks/*.yml", r"\.yml$")]
    run([os.path.join(BIN, "ansible-playbook"), "--syntax-check", "-i", "localhost,"] + fq, env(installed), cwd)
    return "%d playbooks load by FQCN" % len(fq)


def check_kernel_upgrade(installed, cwd):
    root = os.path.join(cwd, "node")
    os.makedirs(os.path.join(root, "proc", "sys", "kernel"))
    with open(os.path.join(root, "proc", "sys", "kernel", "osrelease"), "w") as f:
        f.write("6.1.0-1-amd64\n")
    # a misspelled vendor client variable with gpufabric_strict_vars: the vendor_nfs_client role stops at its first
    # task, so no module of the role runs on this host
    extra = {"kernel_upgrade_kernel_release": "6.1.0-99-amd64", "gpufabric_strict_vars": True,
             "vendor_nfs_client_sha265": "0" * 64, "kernel_upgrade_canary": False}
    p = run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", FQ + ".kernel_upgrade",
             "-e", "ansible_python_interpreter=" + sys.executable, "-e", json.dumps(extra)],
            env(installed, GPUFABRIC_SYSROOT=root), cwd, ok=(2,))
    out = p.stdout + p.stderr
    record_path = os.path.join(root, "etc", "gpufabric", "upgrade.json")
    if not os.path.exists(record_path):
        raise Failed("kernel_upgrade.yml wrote no upgrade record\n" + out[-4000:])
    with open(record_path) as f:
        record = json.load(f)
    # the run got past the Kubernetes steps (skipped, their files never loaded) to the vendor client's build
    want = {"phase": "failed", "kubernetes": False, "nothing_changed": False, "target": "6.1.0-99-amd64",
            "failed_task": "Check the vendor_nfs_client variables against the role's argument spec"}
    got = {k: record.get(k) for k in want}
    if got != want or "did you mean vendor_nfs_client_sha256?" not in record.get("error", "") \
            or "kubernetes.core" in out:
        raise Failed("kernel_upgrade.yml with Kubernetes off: record %s\n%s" % (record, out[-4000:]))
    return "kernel_upgrade.yml ran with Kubernetes off to the vendor client's build"


def requirement_names(path):
    """The distribution names of a pip requirements file, normalised (PEP 503)."""
    out = set()
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line.split("#", 1)[0])
            if m:
                out.add(re.sub(r"[-_.]+", "-", m.group(1)).lower())
    return out


def check_execution_environment(installed, cwd, tarball):
    ee = os.path.join(cwd, "ee")
    shutil.copytree(os.path.join(REPO, "execution-environment"), os.path.join(ee, "execution-environment"),
                    ignore=shutil.ignore_patterns("*.tar.gz"))
    shutil.copy(os.path.join(REPO, "execution-environment.yml"), ee)
    shutil.copy(tarball, os.path.join(ee, "execution-environment", "collections"))
    ctx = os.path.join(ee, "context")
    run([os.path.join(BIN, "ansible-builder"), "create", "-f", os.path.join(ee, "execution-environment.yml"),
         "-c", ctx], env(installed), ee)
    build = os.path.join(ctx, "_build")
    shipped = glob.glob(os.path.join(build, "collections", "*.tar.gz"))
    if len(shipped) != 1 or not filecmp.cmp(shipped[0], tarball, shallow=False):
        raise Failed("the build context does not carry the artifact: %s" % shipped)
    # what the builder stage runs on the collections the galaxy stage installed (here: the same artifact)
    user = [("--user-pip=%s", "requirements.txt"), ("--user-bindep=%s", "bindep.txt")]
    pip_out, bindep_out = os.path.join(ee, "pip.txt"), os.path.join(ee, "bindep.txt")
    run([sys.executable, os.path.join(build, "scripts", "introspect.py"), "introspect"]
        + [flag % os.path.join(build, f) for flag, f in user if os.path.exists(os.path.join(build, f))]
        + ["--write-pip=" + pip_out, "--write-bindep=" + bindep_out, installed], env(installed), ee)
    runtime = requirement_names(os.path.join(REPO, "meta", "ee-requirements.txt"))
    developers = requirement_names(os.path.join(REPO, "requirements.txt")) - runtime
    image = requirement_names(pip_out)
    # introspection drops what ansible-core itself brings (PyYAML, Jinja2 from ansible-core's own requirements)
    if not image or image - runtime or image & developers:
        raise Failed("an image would install the Python packages %s; the collection's runtime requirements are %s "
                     "(of the developers' only: %s)" % (sorted(image), sorted(runtime), sorted(image & developers)))
    with open(os.path.join(REPO, "meta", "ee-bindep.txt")) as f:
        want_sys = {ln.split("#", 1)[0].strip() for ln in f} - {""}
    with open(bindep_out) as f:
        got_sys = {ln.split("#", 1)[0].strip() for ln in f} - {""}
    if got_sys != want_sys:
        raise Failed("an image would install the system packages %s, not meta/ee-bindep.txt's %s"
                     % (sorted(got_sys), sorted(want_sys)))
    with open(os.path.join(build, "requirements.yml")) as f:
        galaxy = [c["name"] for c in yaml.safe_load(f)["collections"]]
    content = ""
    for path in glob.glob(os.path.join(installed, "ansible_collections", NAMESPACE, NAME, "playbooks", "**", "*.yml"),
                          recursive=True) + glob.glob(os.path.join(installed, "ansible_collections", NAMESPACE, NAME,
                                                                   "roles", "**", "*.yml"), recursive=True):
        with open(path) as f:
            content += f.read()
    unused = [c for c in galaxy if (c + ".") not in content]
    if unused:
        raise Failed("execution-environment/requirements.yml installs collections no playbook or role uses: %s" % unused)
    return "execution environment: %d Python, %d system requirements, collections %s" % (
        len(image), len(got_sys), ", ".join(galaxy))


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    artifact = os.path.abspath(argv[1])
    tarballs = glob.glob(os.path.join(artifact, "%s-%s-*.tar.gz" % (NAMESPACE, NAME)))
    installed = os.path.join(artifact, "installed")
    if len(tarballs) != 1 or not os.path.isdir(os.path.join(installed, "ansible_collections", NAMESPACE, NAME)):
        print("check_artifact: %s holds no single built and installed artifact" % artifact, file=sys.stderr)
        return 2
    steps = [check_visible, check_docs, check_playbooks, check_kernel_upgrade,
             lambda i, c: check_execution_environment(i, c, tarballs[0])]
    cwd = tempfile.mkdtemp(prefix="check-artifact-")
    try:
        for step in steps:
            start = time.monotonic()
            try:
                said = step(installed, cwd)
            except Failed as e:
                print("collection: FAILED: %s" % e, file=sys.stderr)
                return 1
            print("collection: %s (%.1f s)" % (said, time.monotonic() - start), flush=True)
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
