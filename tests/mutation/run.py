# -*- coding: utf-8 -*-
"""`make mutation`: mutate every drift judge of tests/mutation/judges.yml with mutmut, run only the judge's own unit
tests against each mutant, and score each judge as killed / (mutants - survivors reviewed in survivors.yml).

Each judge runs in its own scratch tree .mutation/<module>/ holding a copy of plugins/ and tests/ laid out as
ansible_collections/gpufabric/node/, so mutmut's module names are the names the tests import.
Run with .venv-mutation's python (the Makefile does); exit 1 when a judge scores under the threshold."""
from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
COLL = os.path.join("ansible_collections", "gpufabric", "node")
PKG = COLL.replace(os.sep, ".")
REASONS = ("equivalent", "message-only")
# mutmut's exit codes (mutmut.stats.status_by_exit_code): a failing test run or a timeout kills the mutant;
# a survivor, "no tests" (no runner test reaches the function) and anything suspicious do not.
KILLED = {1, 3, 36, -24, 24, 152, 255}


def load_config(path):
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("judges"), list):
        raise SystemExit("%s: expected a mapping with a 'judges' list" % path)
    for j in doc["judges"]:
        if not isinstance(j, dict) or not isinstance(j.get("module"), str) or not j.get("tests"):
            raise SystemExit("%s: each judge needs 'module' and 'tests': %r" % (path, j))
        for t in j["tests"]:
            if not os.path.isfile(os.path.join(REPO, t)):
                raise SystemExit("%s: judge %s: no test file %s" % (path, j["module"], t))
        target = os.path.join(REPO, "plugins", "module_utils", j.get("file") or "")
        if not isinstance(j.get("file"), str) or not os.path.isfile(target):
            raise SystemExit("%s: judge %s: no file plugins/module_utils/%r" % (path, j["module"], j.get("file")))
    return doc


def diff_key(diff):
    """The changed lines of a mutant's diff (mutmut show), stripped: what names a mutant across runs, unlike its
    number, which moves when the function above it changes."""
    return [ln[0] + ln[1:].strip() for ln in diff.splitlines()
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def load_survivors(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or []
    if not isinstance(doc, list):
        raise SystemExit("%s: expected a list" % path)
    for e in doc:
        if not isinstance(e, dict) or e.get("reason") not in REASONS or not e.get("why") \
                or not isinstance(e.get("module"), str) or not isinstance(e.get("function"), str) \
                or not isinstance(e.get("diff"), str):
            raise SystemExit("%s: each entry needs module, function, diff, reason (%s) and why: %r"
                             % (path, " | ".join(REASONS), e))
        e["_key"] = diff_key(e["diff"])
    return doc


def repo_files():
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "plugins", "tests"],
                         cwd=REPO, check=True, stdout=subprocess.PIPE).stdout.decode()
    return [p for p in out.split("\0") if p and not p.startswith("tests/integration/")
            and os.path.isfile(os.path.join(REPO, p))]


def copy_files(dest, files):
    for p in files:
        os.makedirs(os.path.dirname(os.path.join(dest, p)), exist_ok=True)
        shutil.copy2(os.path.join(REPO, p), os.path.join(dest, p))


def prepare(work, judge, files, pytest_args, fresh=True):
    if fresh and os.path.exists(work):
        shutil.rmtree(work)
    copy_files(os.path.join(work, COLL), files)
    target = os.path.join(COLL, "plugins", "module_utils", judge["file"])
    with open(os.path.join(work, "setup.cfg"), "w", encoding="utf-8") as f:
        f.write("[mutmut]\nsource_paths = ansible_collections\nonly_mutate = %s\n" % target)
        f.write("pytest_add_cli_args =\n    %s\n" % "\n    ".join(pytest_args))
        f.write("pytest_add_cli_args_test_selection =\n    %s\n"
                % "\n    ".join(os.path.join(COLL, t) for t in judge["tests"]))
    return target


def mutant_env():
    """The environment of mutmut's test runs: their temporary trees (a simulated node's sysfs is thousands of small
    files, written for every test of every mutant) go to /dev/shm on the terms tests/lab/basetemp.sh sets for make
    unit (writable, $GPUFABRIC_SHM_MIN_GB, 8, GiB free); mutmut's runs take no --basetemp, so TMPDIR carries it."""
    env = dict(os.environ)
    shm = "/dev/shm"
    min_free = int(env.get("GPUFABRIC_SHM_MIN_GB", "8")) << 30
    if "TMPDIR" not in env and os.path.isdir(shm) and os.access(shm, os.W_OK):
        st = os.statvfs(shm)
        if st.f_bavail * st.f_frsize >= min_free:
            env["TMPDIR"] = shm
    return env


def run_judge(args, judge, files):
    work = os.path.join(args.workdir, judge["module"])
    target = os.path.join(COLL, "plugins", "module_utils", judge["file"])
    if args.score_only:
        return work, target, read_codes(work, target, judge, -1), 0
    plugin = PKG + ".tests.mutation.hypothesis_mutation"
    names = []
    if args.recheck:
        codes = read_codes(work, target, judge, -1)
        names = sorted(n for n, c in codes.items() if c not in KILLED)
        # the tests as they are now, in the scratch tree and in mutmut's copy of it
        copy_files(os.path.join(work, "mutants", COLL), [p for p in files if p.startswith("tests/")])
        if not names:
            return work, target, codes, 0
    prepare(work, judge, files, ["-p", "no:xdist", "-p", "no:cacheprovider", "-p", plugin], fresh=not args.recheck)
    log = os.path.join(work, "mutmut.log")
    start = time.time()
    with open(log, "a" if args.recheck else "w", encoding="utf-8") as out:
        rc = subprocess.call([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs)] + names,
                             cwd=work, stdout=out, stderr=subprocess.STDOUT, env=mutant_env())
    codes_now = read_codes(work, target, judge, rc)
    if args.recheck:
        # a changed test selection makes mutmut forget every verdict; the ones not re-run are the last run's kills
        codes_now = dict((n, codes_now.get(n) if n in names else c) for n, c in codes.items())
        write_codes(work, target, codes_now)
    return work, target, codes_now, time.time() - start


def read_codes(work, target, judge, rc):
    meta = os.path.join(work, "mutants", target + ".meta")
    if not os.path.exists(meta):
        raise SystemExit("%s: mutmut wrote no results (rc %d); see %s"
                         % (judge["module"], rc, os.path.join(work, "mutmut.log")))
    with open(meta, encoding="utf-8") as f:
        return json.load(f)["exit_code_by_key"]


def write_codes(work, target, codes):
    meta = os.path.join(work, "mutants", target + ".meta")
    with open(meta, encoding="utf-8") as f:
        doc = json.load(f)
    doc["exit_code_by_key"] = codes
    with open(meta, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def mutant_diff(work, target, name):
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    cwd = os.getcwd()
    os.chdir(work)
    try:
        return get_diff_for_mutant(name, path=target)
    finally:
        os.chdir(cwd)


def function_of(name):
    """'pkg.mod.x__channel__mutmut_5' -> '_channel'; methods: 'xǁClassǁmeth__mutmut_2' -> 'Class.meth'."""
    mangled = name.rsplit(".", 1)[1].rsplit("__mutmut_", 1)[0]
    if mangled.startswith("x_"):
        return mangled[2:]
    return ".".join(p for p in mangled.split("\u01c1")[1:] if p)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, as survivors.yml writes them."""


_Dumper.add_representer(str, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v,
                                                             style="|" if "\n" in v else None))


def score(module, work, target, codes, survivors):
    listed = [e for e in survivors if e["module"] == module]
    used = set()
    killed, reviewed, open_ = 0, [], []
    for name, code in sorted(codes.items()):
        if code in KILLED:
            killed += 1
            continue
        diff = mutant_diff(work, target, name)
        fn, key = function_of(name), diff_key(diff)
        match = next((i for i, e in enumerate(listed) if i not in used and e["function"] == fn and e["_key"] == key),
                     None)
        if match is None:
            open_.append((name, code, fn, diff))
        else:
            used.add(match)
            reviewed.append(name)
    stale = [e for i, e in enumerate(listed) if i not in used]
    # the open survivors in survivors.yml's shape, for review (reason and why are to be filled in)
    with open(os.path.join(work, "open-survivors.yml"), "w", encoding="utf-8") as f:
        entries = [{"module": module, "function": fn, "mutant": name.rsplit(".", 1)[1],
                    "diff": "\n".join(diff_key(diff)) + "\n", "reason": "", "why": ""}
                   for name, _code, fn, diff in open_]
        yaml.dump(entries, f, Dumper=_Dumper, sort_keys=False, width=200)
    denom = len(codes) - len(reviewed)
    pct = 100.0 * killed / denom if denom else 100.0
    return {"module": module, "total": len(codes), "killed": killed, "reviewed": len(reviewed),
            "open": open_, "stale": stale, "score": pct}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=os.path.join(HERE, "judges.yml"))
    ap.add_argument("--survivors", default=os.path.join(HERE, "survivors.yml"))
    ap.add_argument("--workdir", default=os.path.join(REPO, ".mutation"))
    ap.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    ap.add_argument("--score-only", action="store_true",
                    help="score the results of the last run in --workdir again (after editing survivors.yml)")
    ap.add_argument("--recheck", action="store_true",
                    help="run the last run's survivors again with the judge's current tests (after adding a kill "
                         "test): quicker than a full run, whose verdicts it otherwise keeps")
    ap.add_argument("--report", help="also write the per-judge result as JSON here")
    ap.add_argument("judges", nargs="*", help="modules to run (default: every judge of the config)")
    args = ap.parse_args()
    cfg = load_config(args.config)
    survivors = load_survivors(args.survivors)
    threshold = float(cfg.get("threshold", 90))
    names = [j["module"] for j in cfg["judges"]]
    unknown = [n for n in args.judges if n not in names]
    if unknown:
        raise SystemExit("not a judge of %s: %s" % (args.config, ", ".join(unknown)))
    files = repo_files()
    results, t0 = [], time.time()
    for judge in cfg["judges"]:
        if args.judges and judge["module"] not in args.judges:
            continue
        work, target, codes, took = run_judge(args, judge, files)
        r = score(judge["module"], work, target, codes, survivors)
        r["seconds"] = round(took)
        results.append(r)
        print("%-20s %5.1f %%  killed %4d of %4d, %3d reviewed survivors, %3d open  (%ds)"
              % (r["module"], r["score"], r["killed"], r["total"], r["reviewed"], len(r["open"]), took), flush=True)
        for name, code, fn, diff in r["open"]:
            print("  open survivor (exit %s) in %s: %s\n    %s" % (code, fn, name, "\n    ".join(diff.splitlines()[2:])))
        for e in r["stale"]:
            print("  survivors.yml entry matches no surviving mutant (killed now, or the code moved): %s %s"
                  % (e["module"], e["function"]))
    print("\n%-20s %7s %7s %7s %8s" % ("judge", "score", "killed", "total", "reviewed"))
    for r in results:
        print("%-20s %6.1f%% %7d %7d %8d" % (r["module"], r["score"], r["killed"], r["total"], r["reviewed"]))
    print("total wall time: %ds" % (time.time() - t0))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump([{k: v for k, v in r.items() if k not in ("open", "stale")} for r in results], f, indent=1)
    low = [r["module"] for r in results if r["score"] < threshold]
    if low:
        print("below %g %%: %s" % (threshold, ", ".join(low)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
