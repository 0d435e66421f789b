# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The grub/grubby emulator of the simulated node."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import pytest

from gpufabric_sim.emulators import grub

KVER = "6.8.0-45-generic"
EL_NEW = "5.14.0-427.13.1.el9_4.x86_64"
EL_OLD = "5.14.0-362.8.1.el9_3.x86_64"


def _w(root, rel, text):
    p = os.path.join(root, rel)
    if not os.path.isdir(os.path.dirname(p)):
        os.makedirs(os.path.dirname(p))
    with open(p, "w") as f:
        f.write(text)


@pytest.fixture
def deb(tmp_path, monkeypatch):
    root = str(tmp_path)
    _w(root, "etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX=""\n')
    _w(root, "proc/sys/kernel/osrelease", KVER + "\n")
    _w(root, "etc/fstab", "UUID=abcd / ext4 errors=remount-ro 0 1\n")
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    return root


@pytest.fixture
def el(tmp_path, monkeypatch):
    root = str(tmp_path)
    for k in (EL_OLD, EL_NEW):
        _w(root, "boot/loader/entries/m-%s.conf" % k,
           "title Rocky Linux (%s) 9.4\nversion %s\nlinux /vmlinuz-%s\ninitrd /initramfs-%s.img\n"
           "options root=/dev/sda2 ro iommu=off iommu=soft quiet $tuned_params\ngrub_class rocky\n" % (k, k, k, k))
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    return root


@pytest.mark.parametrize("dropins,expected", [
    ({}, ["quiet", "splash"]),
    ({"10-a.cfg": 'GRUB_CMDLINE_LINUX="iommu=pt"\n'}, ["iommu=pt", "quiet", "splash"]),
    ({"10-a.cfg": 'GRUB_CMDLINE_LINUX="a"\n', "20-b.cfg": 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX b"\n'},
     ["a", "b", "quiet", "splash"]),
    ({"10-q.cfg": "GRUB_CMDLINE_LINUX=\"'pci=realloc,disable_acs_redir=0000:16:01.0/00.0;0000:16:01.0/01.0'\"\n"},
     ["pci=realloc,disable_acs_redir=0000:16:01.0/00.0;0000:16:01.0/01.0", "quiet", "splash"]),
    ({"x.conf": 'GRUB_CMDLINE_LINUX="ignored"\n'}, ["quiet", "splash"]),
])
def test_update_grub_sources_defaults_and_dropins(deb, capsys, dropins, expected):
    for n, t in dropins.items():
        _w(deb, "etc/default/grub.d/" + n, t)
    assert grub.main(["/usr/sbin/update-grub"]) == 0
    err = capsys.readouterr().err
    assert "Generating grub configuration file ..." in err and "Found linux image: /boot/vmlinuz-%s" % KVER in err
    assert err.rstrip().endswith("done")
    cfg = open(os.path.join(deb, "boot/grub/grub.cfg")).read()
    assert "linux\t/boot/vmlinuz-%s root=UUID=abcd ro " % KVER in cfg
    line = grub.next_boot_cmdline(deb)
    assert line.split()[:3] == ["BOOT_IMAGE=/boot/vmlinuz-%s" % KVER, "root=UUID=abcd", "ro"]
    assert line.split()[3:] == expected


def test_grub_mkconfig_variants(deb, capsys):
    assert grub.main(["grub-mkconfig", "-o", "/boot/grub/grub.cfg"]) == 0
    assert os.path.exists(os.path.join(deb, "boot/grub/grub.cfg"))
    assert grub.main(["grub2-mkconfig", "--output=/boot/grub2/grub.cfg"]) == 0
    assert os.path.exists(os.path.join(deb, "boot/grub2/grub.cfg"))
    assert grub.main(["grub-mkconfig"]) == 0
    assert "menuentry" in capsys.readouterr().out
    assert grub.main(["grub-mkconfig", "--bogus"]) == 1


def test_newest_kernel_is_default_and_recovery_entries(deb):
    for k in (KVER, "6.8.0-51-generic"):
        _w(deb, "boot/vmlinuz-" + k, "")
    assert grub.main(["update-grub"]) == 0
    cfg = open(os.path.join(deb, "boot/grub/grub.cfg")).read()
    assert "(recovery mode)" in cfg and "ro single" in cfg
    assert grub.next_boot_cmdline(deb).startswith("BOOT_IMAGE=/boot/vmlinuz-6.8.0-51-generic ")


def test_broken_defaults_fail(deb, capsys):
    _w(deb, "etc/default/grub", 'GRUB_CMDLINE_LINUX="unterminated\n')
    assert grub.main(["update-grub"]) == 1
    assert not os.path.exists(os.path.join(deb, "boot/grub/grub.cfg"))


def test_requires_sysroot(monkeypatch):
    monkeypatch.delenv("GPUFABRIC_SYSROOT", raising=False)
    with pytest.raises(SystemExit):
        grub.main(["update-grub"])


def test_grubby_info_format(el, capsys):
    assert grub.main(["grubby", "--info=ALL"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["index=0", 'kernel="/boot/vmlinuz-%s"' % EL_NEW,
                       'args="ro iommu=off iommu=soft quiet $tuned_params"', 'root="/dev/sda2"']
    assert out[4] == 'initrd="/boot/initramfs-%s.img"' % EL_NEW
    assert out[6] == 'id="m-%s"' % EL_NEW and out[7] == "index=1"
    assert grub.main(["grubby", "--default-kernel"]) == 0
    assert capsys.readouterr().out == "/boot/vmlinuz-%s\n" % EL_NEW
    assert grub.main(["grubby", "--info", "/boot/vmlinuz-%s" % EL_OLD]) == 0
    assert capsys.readouterr().out.startswith("index=1\n")
    assert grub.main(["grubby", "--info=/boot/vmlinuz-nope"]) == 1


@pytest.mark.parametrize("argv,expected", [
    (["--args=iommu=pt"], "ro iommu=soft quiet $tuned_params iommu=pt"),
    (["--remove-args=iommu"], "ro iommu=soft quiet $tuned_params"),
    (["--remove-args=iommu=soft"], "ro iommu=off quiet $tuned_params"),
    (["--remove-args=quiet", "--args=nosmt"], "ro iommu=off iommu=soft $tuned_params nosmt"),
    (["--remove-args", "iommu iommu", "--args", "iommu=pt"], "ro quiet $tuned_params iommu=pt"),
])
def test_grubby_update_semantics(el, capsys, argv, expected):
    assert grub.main(["grubby", "--update-kernel=ALL"] + argv) == 0
    capsys.readouterr()
    for idx in ("0", "1"):
        grub.main(["grubby", "--info=%s" % idx])
        assert 'args="%s"' % expected in capsys.readouterr().out


def test_grubby_update_one_kernel_and_next_boot(el, capsys):
    assert grub.main(["grubby", "--update-kernel=/boot/vmlinuz-%s" % EL_NEW, "--args=iommu=pt",
                      "--remove-args=iommu iommu"]) == 0
    assert grub.next_boot_cmdline(el) == \
        "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-%s root=/dev/sda2 ro quiet iommu=pt" % EL_NEW
    grub.main(["grubby", "--info=1"])
    assert "iommu=off" in capsys.readouterr().out


def test_grubby_saved_entry_is_default(el, capsys):
    _w(el, "boot/grub2/grubenv", "# GRUB Environment Block\nsaved_entry=m-%s\n" % EL_OLD)
    assert grub.main(["grubby", "--default-kernel"]) == 0
    assert capsys.readouterr().out.strip() == "/boot/vmlinuz-%s" % EL_OLD
    assert "vmlinuz-%s" % EL_OLD in grub.next_boot_cmdline(el)


def test_dispatch(el, capsys):
    assert grub.main(["/opt/node/bin/grubby", "--default-index"]) == 0
    assert capsys.readouterr().out == "0\n"
    assert grub.main(["grub.py", "grubby", "--default-index"]) == 0
    assert grub.main(["lilo"]) == 2


UBUNTU_DISTRIBUTOR = "GRUB_DISTRIBUTOR=`( . /etc/os-release; echo ${NAME:-Ubuntu} ) 2>/dev/null || echo Ubuntu`\n"
DEBIAN_DISTRIBUTOR = "GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n"
RHEL_DISTRIBUTOR = "GRUB_DISTRIBUTOR=\"$(sed 's, release .*$,,g' /etc/system-release)\"\n"


DISTRIBUTOR_CASES = [
    ("ubuntu", 'NAME="Ubuntu"\nID=ubuntu\n', {}, UBUNTU_DISTRIBUTOR, "Ubuntu", "ubuntu"),
    ("ubuntu via lsb_release", 'NAME="Ubuntu"\nID=ubuntu\n', {}, DEBIAN_DISTRIBUTOR, "Ubuntu", "ubuntu"),
    ("debian", 'NAME="Debian GNU/Linux"\nID=debian\n', {}, DEBIAN_DISTRIBUTOR, "Debian GNU/Linux", "debian"),
    ("made-up distro, os-release", 'NAME="Gfsim"\nID=gfsim\n', {}, UBUNTU_DISTRIBUTOR, "Gfsim GNU/Linux", "gfsim"),
    ("made-up distro, lsb_release", 'NAME="Fabric OS"\nID=fabricos\n', {}, DEBIAN_DISTRIBUTOR,
     "Fabricos GNU/Linux", "fabricos"),
    ("rhel system-release", 'NAME="Red Hat Enterprise Linux"\nID="rhel"\n',
     {"etc/system-release": "Red Hat Enterprise Linux release 9.4 (Plow)\n"}, RHEL_DISTRIBUTOR,
     "Red Hat Enterprise Linux GNU/Linux", "red"),
    ("none", 'NAME="Ubuntu"\nID=ubuntu\n', {}, "", "GNU/Linux", None),
]


@pytest.mark.parametrize("title,os_release,extra,distributor,menu,cls", DISTRIBUTOR_CASES,
                         ids=[c[0] for c in DISTRIBUTOR_CASES])
def test_distributor_is_the_nodes(deb, title, os_release, extra, distributor, menu, cls):
    _w(deb, "etc/os-release", os_release)
    for rel, text in extra.items():
        _w(deb, rel, text)
    _w(deb, "etc/default/grub", "GRUB_DEFAULT=0\n" + distributor + 'GRUB_CMDLINE_LINUX=""\n')
    assert grub.source_defaults(deb)["GRUB_DISTRIBUTOR"] == menu.replace(" GNU/Linux", "").replace("GNU/Linux", "")
    cfg = grub.generate_grub_cfg(deb)
    first = [line for line in cfg.splitlines() if line.startswith("menuentry ")][0]
    assert first.startswith("menuentry '%s' " % menu), title
    assert ("--class %s --class gnu-linux" % cls in first) if cls else ("menuentry '%s' --class gnu-linux" % menu
                                                                        in first)
    assert "submenu 'Advanced options for %s'" % menu in cfg


@pytest.mark.parametrize("args,expected", [
    (["-i", "-s"], "Ubuntu\n"),
    (["-si"], "Ubuntu\n"),
    (["--id", "--short"], "Ubuntu\n"),
    (["-a"], "Distributor ID:\tUbuntu\nDescription:\tUbuntu 24.04.1 LTS\nRelease:\t24.04\nCodename:\tnoble\n"),
    (["-rcs"], "24.04\nnoble\n"),
])
def test_lsb_release_stand_in(deb, tmp_path, args, expected):
    _w(deb, "etc/os-release", 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\n'
                              'VERSION_CODENAME=noble\nID=ubuntu\n')
    script = tmp_path.parent / ("lsb-%s" % tmp_path.name)
    script.write_text(grub.LSB_RELEASE % {"root": deb})
    out = subprocess.run(["/bin/sh", str(script)] + args, stdout=subprocess.PIPE, universal_newlines=True,
                         check=True).stdout
    assert out == expected


def test_sourcing_error_names_the_nodes_file(deb):
    _w(deb, "etc/default/grub.d/50-bad.cfg", 'GRUB_CMDLINE_LINUX="unterminated\n')
    with pytest.raises(RuntimeError) as e:
        grub.generate_grub_cfg(deb)
    assert "/etc/default/grub.d/50-bad.cfg" in str(e.value) and "gpufabric-grub-" not in str(e.value)
