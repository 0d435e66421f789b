# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kernel_hold: what its own tests left unseen (make mutation's survivors): hold_status's whole document in each of
its outcomes, word for word, on the simulator's apt and dnf."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.vendor_client import hold as kh
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles as op
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from gpufabric_sim.emulators import pkg

DEB, DEB_NEW, DEB_NEWER = "6.1.0-50-amd64", "6.1.0-55-amd64", "6.1.0-56-amd64"
AGAIN = "; rerun the vendor_nfs_client role (or kernel_upgrade.yml for the new kernel)"


def _held_node(tmp_path):
    root = str(tmp_path)
    pkg.seed(root, "debian", DEB)  # the repo holds DEB and DEB_NEW; DEB_NEWER is added beside them
    db = pkg.load(root)
    pkg.add_kernel(db, "debian", DEB_NEWER)
    pkg.save(root, db)

    def run(argv):
        return pkg.run(root, argv)
    profile = op.get("debian12")
    kh.apply(profile, [DEB], "held", run)
    sr = Sysroot(root)
    kh.record(sr, [DEB], "held")
    return root, sr, run, profile


def test_a_hold_that_holds_is_not_checked_and_says_how_to_prove_the_client(tmp_path):
    _root, sr, run, profile = _held_node(tmp_path)
    assert kh.hold_status(sr, run, profile) == {
        "status": "not_checked", "items": [],
        "reason": "the kernel hold of %s holds (apt-mark); the one-call check makes no vendor NFS client proof: run "
                  "the vendor_nfs_client role (verify.yml)" % DEB}


def test_a_released_hold_and_kernels_installed_around_it_are_each_an_item(tmp_path):
    root, sr, run, profile = _held_node(tmp_path)
    assert pkg.run(root, ["apt-mark", "unhold", "linux-image-" + DEB])[0] == 0
    for k in (DEB_NEWER, DEB_NEW):
        assert pkg.run(root, ["apt-get", "install", "-y", "linux-image-" + k])[0] == 0
    assert kh.hold_status(sr, run, profile) == {
        "status": "drift",
        "reason": "the hold of %s was released (linux-image-%s); kernel %s, %s is installed, newer than the held %s, "
                  "and boots next by default without the client%s" % (DEB, DEB, DEB_NEW, DEB_NEWER, DEB, AGAIN),
        "items": [{"concern": "vendor_client", "object": "linux-image-" + DEB, "key": "kernel hold",
                   "current": "released", "desired": "held"}] + [
            {"concern": "vendor_client", "object": k, "key": "kernel installed around the hold",
             "current": "installed", "desired": "absent (held: %s)" % DEB} for k in (DEB_NEW, DEB_NEWER)]}


def test_a_hold_of_two_kernels_names_both(tmp_path):
    root, sr, run, profile = _held_node(tmp_path)
    assert pkg.run(root, ["apt-get", "install", "-y", "linux-image-" + DEB_NEW])[0] == 0
    kh.apply(profile, [DEB, DEB_NEW], "held", run)
    kh.record(sr, [DEB, DEB_NEW], "held")
    assert pkg.run(root, ["apt-get", "install", "-y", "linux-image-" + DEB_NEWER])[0] == 0
    st = kh.hold_status(sr, run, profile)
    assert st["reason"] == "kernel %s is installed, newer than the held %s, %s, and boots next by default without " \
                           "the client%s" % (DEB_NEWER, DEB, DEB_NEW, AGAIN)
    assert st["items"][0]["desired"] == "absent (held: %s, %s)" % (DEB, DEB_NEW)


def test_no_profile_is_an_error_naming_the_hold(tmp_path):
    _root, sr, run, _profile = _held_node(tmp_path)
    assert kh.hold_status(sr, run, None) == {
        "status": "error", "items": [],
        "reason": "kernel hold: the node has no supported OS profile to read the hold with"}


# ------------------------------------------------------------------- the whole plan, on apt and dnf

EL, EL_NEW = "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-432.13.1.el9_4.x86_64"
EL_NAMES = ("kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra")
DEB_PKGS = ["linux-headers-%s" % DEB, "linux-headers-amd64", "linux-image-%s" % DEB, "linux-image-amd64"]


def _node(tmp_path, os_id, kver):
    root = str(tmp_path)
    pkg.seed(root, os_id, kver)
    return root, (lambda argv: pkg.run(root, argv))


def _plan(hold=(), release=(), before=(), after=(), missing=(), kernels=()):
    return {"hold": list(hold), "release": list(release), "before": list(before), "after": list(after),
            "not_installed": list(missing), "kernels": list(kernels)}


def test_apt_plan_whole_before_and_after_the_hold(tmp_path):
    _root, run = _node(tmp_path, "debian", DEB)
    profile = op.get("debian12")
    assert kh.plan(profile, [DEB], "held", run) == _plan(hold=DEB_PKGS, after=DEB_PKGS, kernels=[DEB])
    kh.apply(profile, [DEB], "held", run)
    assert kh.plan(profile, [DEB], "held", run) == _plan(before=DEB_PKGS, after=DEB_PKGS,
                                                         kernels=[DEB])
    # holding a kernel that is not installed releases the old ABI's packages and keeps the meta packages held
    meta = ["linux-headers-amd64", "linux-image-amd64"]
    assert kh.plan(profile, [DEB_NEW], "held", run) == _plan(
        release=["linux-headers-%s" % DEB, "linux-image-%s" % DEB], before=DEB_PKGS, after=meta,
        missing=[DEB_NEW], kernels=[DEB])
    for kvers in ([], [DEB]):
        assert kh.plan(profile, kvers, "unheld", run) == _plan(release=DEB_PKGS, before=DEB_PKGS, kernels=[DEB])
    # releasing another kernel leaves this one's packages held, the meta packages are released
    assert kh.plan(profile, [DEB_NEW], "unheld", run)["release"] == ["linux-headers-amd64", "linux-image-amd64"]


def test_apt_plan_ignores_a_held_package_that_is_no_kernel(tmp_path):
    root, run = _node(tmp_path, "debian", DEB)
    db = pkg.load(root)
    db["installed"]["nvidia-driver"] = ["550"]
    db["holds"] = ["nvidia-driver"]
    pkg.save(root, db)
    p = kh.plan(op.get("debian12"), [DEB], "held", run)
    assert p["before"] == [] and p["after"] == DEB_PKGS and "nvidia-driver" not in p["release"]


def _locks(kver):
    vr = kver.rsplit(".", 1)[0]
    return ["%s-0:%s.*" % (n, vr) for n in EL_NAMES]


def _nvras(kver):
    return ["%s-%s" % (n, kver) for n in EL_NAMES]


def test_dnf_plan_whole_before_and_after_the_lock(tmp_path):
    _root, run = _node(tmp_path, "rocky", EL)
    profile = op.get("el9")
    assert kh.plan(profile, [EL], "held", run) == _plan(hold=_nvras(EL), after=_nvras(EL),
                                                        kernels=[EL])
    kh.apply(profile, [EL], "held", run)
    assert kh.plan(profile, [EL], "held", run) == _plan(before=_locks(EL), after=_locks(EL), kernels=[EL])
    assert kh.plan(profile, [EL_NEW], "held", run) == _plan(
        hold=_nvras(EL_NEW), release=_locks(EL), before=_locks(EL), after=_nvras(EL_NEW), missing=[EL_NEW],
        kernels=[EL])
    for kvers in ([], [EL]):
        assert kh.plan(profile, kvers, "unheld", run) == _plan(release=_locks(EL), before=_locks(EL), kernels=[EL])
    # releasing another kernel's lock keeps this one's
    assert kh.plan(profile, [EL_NEW], "unheld", run) == _plan(before=_locks(EL), after=_locks(EL), missing=[EL_NEW],
                                                              kernels=[EL])


def _dnf_run(rpm_rc, rpm_out, locks=""):
    def run(argv):
        if argv[0] == "dnf":
            return 0, locks, ""
        assert argv[:4] == ["rpm", "-q", "--qf", "%{NAME} %{VERSION}-%{RELEASE}.%{ARCH}\n"]
        return rpm_rc, rpm_out, "rpm: failed\n"
    return run


@pytest.mark.parametrize("rc,out,error", [
    (0, "kernel-core %s\n" % EL, None),
    (1, "kernel-core %s\npackage kernel-modules-extra is not installed\n" % EL, None),
    (1, "", None),                                         # nothing installed: rc 1 is rpm's "not installed"
    (2, "kernel-core %s\n" % EL, None),                    # what was read is used
    (2, "", "reading the installed kernel packages failed (rpm -q, rc=2)"),
])
def test_dnf_plan_reads_rpm_rc_1_as_not_installed(rc, out, error):
    run = _dnf_run(rc, out)
    if error is None:
        assert kh.plan(op.get("el9"), [EL], "held", run)["kernels"] == ([EL] if out else [])
        return
    with pytest.raises(kh.HoldError) as e:
        kh.plan(op.get("el9"), [EL], "held", run)
    assert str(e.value) == error


@pytest.mark.parametrize("argv_at,what", [
    (0, "reading the installed packages failed (dpkg-query -W -f=${db:Status-Abbrev}\t${Package}\n, rc=2): boom"),
    (1, "reading the held packages failed (apt-mark showhold, rc=2): boom"),
])
def test_apt_plan_names_the_read_that_failed(tmp_path, argv_at, what):
    _root, run = _node(tmp_path, "debian", DEB)
    calls = []

    def failing(argv):
        calls.append(argv)
        return (2, "", "boom\n") if len(calls) == argv_at + 1 else run(argv)
    with pytest.raises(kh.HoldError) as e:
        kh.plan(op.get("debian12"), [DEB], "held", failing)
    assert str(e.value) == what


def test_dnf_plan_names_the_versionlock_read():
    def run(argv):
        return (1, "", "No such command: versionlock") if argv[0] == "dnf" else (0, "", "")
    with pytest.raises(kh.HoldError) as e:
        kh.plan(op.get("el9"), [EL], "held", run)
    assert str(e.value) == "reading the versionlock failed (dnf -q versionlock list, rc=1): No such command: versionlock"


def test_a_profile_without_a_hold_mechanism_is_named():
    profile = dict(op.get("debian12"), name="odd", hold="zypper-lock")
    with pytest.raises(kh.HoldError) as e:
        kh.plan(profile, [DEB], "held", lambda argv: (0, "", ""))
    assert str(e.value) == "OS profile odd has no kernel hold mechanism 'zypper-lock'"


@pytest.mark.parametrize("text,names", [
    ("ii \tlinux-image-amd64\n", {"linux-image-amd64"}),
    ("hi \tlinux-image-amd64\nrc \tlinux-image-6.1.0-9-amd64\n", {"linux-image-amd64"}),
    ("i\tshort\n", set()),                                 # an abbreviation of one letter has no status
    ("ii\ttwo-letters\n", {"two-letters"}),
    ("ii \tlinux-image-amd64\tjunk\n", set()),             # a tab in the name is no package name
    ("no tab here\nii \tafter-a-bad-line\n", {"after-a-bad-line"}),
    ("ii  linux-image-amd64\n", set()),                    # spaces, no tab: not the format asked for
    ("ii \tBad_Name\n", set()),
    ("", set()), (None, set()),
])
def test_parse_dpkg_installed(text, names):
    assert kh.parse_dpkg_installed(text) == names


@pytest.mark.parametrize("text,out", [
    ("kernel-core %s\nkernel-core %s\n" % (EL, EL_NEW), {"kernel-core": [EL, EL_NEW]}),
    ("package kernel-rt is not installed\n", {}),
    ("package kernel-rt\n", {}),
    ("kernel-core %s extra\n" % EL, {}),
    ("", {}), (None, {}),
])
def test_parse_rpm_installed(text, out):
    assert kh.parse_rpm_installed(text) == out


@pytest.mark.parametrize("older,newer", [
    ("6.1.0-9-amd64", "6.1.0-10-amd64"),
    ("5.14.0-427.el9", "5.14.0-427.13.1.el9_4"),           # a number is newer than letters (rpmvercmp)
    ("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-503.el9.x86_64"),
    ("6.8.0-45-generic", "6.8.0-45-lowlatency"),          # letters compare as text, after numbers
    ("6.1.0-9rc", "6.1.0-10"),
    ("6.8.0-45-Generic", "6.8.0-45-generic"),
])
def test_release_key_orders_as_the_package_managers_do(older, newer):
    assert kh.release_key(older) < kh.release_key(newer)


def test_release_key_is_numbers_then_words():
    assert kh.release_key("6.1.0-50-Amd64.x86_64") == [
        (1, 6, ""), (1, 1, ""), (1, 0, ""), (1, 50, ""), (0, 0, "Amd"), (1, 64, "")]


# ------------------------------------------------------------------- apply's failures, the record, messages

def _refusing(run, refused, rc=1, err="E: refused\n", do_nothing=False):
    """The simulator's tools, but ``refused`` (an argv prefix) fails, or (do_nothing) succeeds without acting."""
    def wrapped(argv):
        if argv[:len(refused)] == refused:
            return (0, "", "") if do_nothing else (rc, "", err)
        return run(argv)
    return wrapped


@pytest.mark.parametrize("os_id,prof,kver,first,refused,message", [
    ("debian", "debian12", DEB, None, ["apt-mark", "hold"],
     "holding %s failed (apt-mark hold %s, rc=1): E: refused" % (", ".join(DEB_PKGS), " ".join(DEB_PKGS))),
    ("debian", "debian12", DEB, DEB, ["apt-mark", "unhold"],
     "releasing the hold of linux-headers-%s, linux-image-%s failed (apt-mark unhold linux-headers-%s "
     "linux-image-%s, rc=1): E: refused" % (DEB, DEB, DEB, DEB)),
    ("rocky", "el9", EL, None, ["dnf", "-q", "versionlock", "add"],
     "adding the versionlock entries %s failed (dnf -q versionlock add %s, rc=1): E: refused"
     % (", ".join(_nvras(EL)), " ".join(_nvras(EL)))),
    ("rocky", "el9", EL, EL, ["dnf", "-q", "versionlock", "delete"],
     "deleting the versionlock entries %s failed (dnf -q versionlock delete %s, rc=1): E: refused"
     % (", ".join(_locks(EL)), " ".join(_locks(EL)))),
])
def test_apply_names_the_change_that_failed(tmp_path, os_id, prof, kver, first, refused, message):
    _root, run = _node(tmp_path, os_id, kver)
    profile = op.get(prof)
    if first:
        kh.apply(profile, [first], "held", run)
    target = [kver] if first is None else [DEB_NEW if os_id == "debian" else EL_NEW]
    with pytest.raises(kh.HoldError) as e:
        kh.apply(profile, target, "held", _refusing(run, refused))
    assert str(e.value) == message


def test_a_failing_command_without_output_says_so(tmp_path):
    _root, run = _node(tmp_path, "debian", DEB)
    with pytest.raises(kh.HoldError) as e:
        kh.apply(op.get("debian12"), [DEB], "held", _refusing(run, ["apt-mark", "hold"], rc=100, err=""))
    assert str(e.value).endswith("rc=100): no output")

    def out_only(argv):
        return (1, "E: on stdout\n", "") if argv[:2] == ["apt-mark", "hold"] else run(argv)
    with pytest.raises(kh.HoldError) as e:
        kh.apply(op.get("debian12"), [DEB], "held", out_only)
    assert str(e.value).endswith("rc=1): E: on stdout")


@pytest.mark.parametrize("refused,message", [
    (["apt-mark", "hold"], "the kernel hold did not take: still to hold %s, to release -" % DEB_PKGS),
    (["apt-mark", "unhold"], "the kernel hold did not take: still to hold -, to release %s" % DEB_PKGS),
])
def test_a_change_that_did_not_take_is_an_error(tmp_path, refused, message):
    _root, run = _node(tmp_path, "debian", DEB)
    profile = op.get("debian12")
    if refused[1] == "unhold":
        kh.apply(profile, [DEB], "held", run)
        state, kvers = "unheld", []
    else:
        state, kvers = "held", [DEB]
    with pytest.raises(kh.HoldError) as e:
        kh.apply(profile, kvers, state, _refusing(run, refused, do_nothing=True))
    assert str(e.value) == message


def test_dnf_rpm_rc_0_with_nothing_read_is_no_error():
    assert kh.plan(op.get("el9"), [EL], "held", _dnf_run(0, ""))["kernels"] == []


def test_record_writes_a_new_record_and_check_mode_writes_nothing(tmp_path):
    sr = Sysroot(str(tmp_path))
    assert kh.record(sr, [DEB_NEW, DEB], "held", check_mode=True) is True
    assert kh.read_record(sr) == []
    assert kh.record(sr, [DEB_NEW, DEB], "held") is True
    with open(sr.path(kh.STATE_FILE)) as f:
        assert f.read() == ('{\n  "hold": {\n    "kernel_releases": [\n      "%s",\n      "%s"\n    ]\n  },\n'
                            '  "kernels": {},\n  "version": 1\n}\n' % (DEB, DEB_NEW))
    assert kh.record(sr, [DEB, DEB_NEW], "held") is False
    assert kh.record(sr, [], "unheld", check_mode=True) is True
    assert kh.read_record(sr) == [DEB, DEB_NEW]
    assert kh.record(sr, [], "unheld") is True and kh.read_record(sr) == []


@pytest.mark.parametrize("text,message", [
    ('{"version": 1, "kernels": {}, "hold": {"kernel_releases": "6.1.0-50-amd64"}}',
     "%s: hold.kernel_releases is not a list of kernel releases" % kh.STATE_FILE),
    ('{"version": 1, "kernels": {}, "hold": {"kernel_releases": [5]}}',
     "%s: hold.kernel_releases is not a list of kernel releases" % kh.STATE_FILE),
])
def test_read_record_refuses_a_bad_hold(tmp_path, text, message):
    sr = Sysroot(str(tmp_path))
    sr.write_file_atomic(kh.STATE_FILE, text)
    with pytest.raises(kh.HoldError) as e:
        kh.read_record(sr)
    assert str(e.value) == message


def test_read_record_names_an_unreadable_record_and_the_fix(tmp_path):
    sr = Sysroot(str(tmp_path))
    sr.write_file_atomic(kh.STATE_FILE, "{not json")
    with pytest.raises(kh.HoldError) as e:
        kh.read_record(sr)
    assert str(e.value).startswith(kh.STATE_FILE) and str(e.value).endswith("; rerun the vendor_nfs_client role")


@pytest.mark.parametrize("kvers,state,message", [
    ([DEB], "locked", "state must be held or unheld, not 'locked'"),
    ([], "held", "a kernel hold needs the kernel release(s) to hold"),
])
def test_check_messages(kvers, state, message):
    with pytest.raises(kh.HoldError) as e:
        kh.check(op.get("debian12"), kvers, state)
    assert str(e.value) == message


def test_a_hold_of_two_kernels_released_and_holding_names_both(tmp_path):
    root, sr, run, profile = _held_node(tmp_path)
    assert pkg.run(root, ["apt-get", "install", "-y", "linux-image-" + DEB_NEW])[0] == 0
    kh.apply(profile, [DEB, DEB_NEW], "held", run)
    kh.record(sr, [DEB, DEB_NEW], "held")
    assert kh.hold_status(sr, run, profile)["reason"].startswith(
        "the kernel hold of %s, %s holds (apt-mark)" % (DEB, DEB_NEW))
    assert pkg.run(root, ["apt-mark", "unhold", "linux-image-" + DEB, "linux-image-" + DEB_NEW])[0] == 0
    assert kh.hold_status(sr, run, profile)["reason"] == (
        "the hold of %s, %s was released (linux-image-%s, linux-image-%s)%s" % (DEB, DEB_NEW, DEB, DEB_NEW, AGAIN))
