# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufabric VM lab (tier 3): a real bookworm kernel under QEMU/TCG. See README.md beside this file.

    lab.py deps | image [--force] | dcbdrv [--kver K] | up [--name N] [--iommu] | ssh N -- CMD
    lab.py reboot N | down N | smoke N | status [N] | all [--name N] [--keep]
    lab.py kernels | kernel-repo --kver K | push N SRC... DST
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import labimage  # noqa: E402  (sibling module, path set above)
from labimage import LabError, Timings, log, run  # noqa: E402

SSH_OPTS = ['-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR',
            '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=5', '-o', 'ServerAliveInterval=10']
ROOT_PORTS = ('00:10.0', '00:11.0')
ACS_ENABLED = '001d'
RAILS = ('dcb0', 'dcb1')
NVME_MIB = 64


# --------------------------------------------------------------------------- state

def run_dir(name):
    return os.path.join(labimage.cache_dir(), 'run', name)


def state_path(name):
    return os.path.join(run_dir(name), 'state.json')


def load_state(name):
    path = state_path(name)
    if not os.path.exists(path):
        raise LabError('no VM named %r is up (no %s)' % (name, path))
    with open(path) as handle:
        return json.load(handle)


def free_port(host='127.0.0.1'):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
        return sock.getsockname()[1]
    finally:
        sock.close()


def qemu_argv(rdir, port, overlay, nvme, iommu=False, memory=1024, smp=2):
    """The recipe's QEMU line: q35/TCG, three root ports, a switch with the NVMe ("GPU"), the e1000e ("NIC")."""
    argv = ['qemu-system-x86_64', '-name', 'gpufabric-lab', '-machine', 'q35', '-accel', 'tcg,tb-size=256',
            '-smp', str(smp), '-m', str(memory)]
    if iommu:
        argv += ['-device', 'intel-iommu']
    argv += [
        '-device', 'pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1,addr=0x10',
        '-device', 'pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2,addr=0x11',
        # the "NIC" sits on its own root port so that the GPU<->NIC path crosses two root ports that carry
        # ACS (QEMU's switch ports have none) while 00:10.0 (management NIC) stays off the path
        '-device', 'pcie-root-port,id=rp3,bus=pcie.0,chassis=5,slot=3,addr=0x12',
        '-device', 'x3130-upstream,id=up1,bus=rp2',
        '-device', 'xio3130-downstream,id=dp1,bus=up1,chassis=3,slot=0',
        '-drive', 'if=none,id=nvm,file=%s,format=raw' % nvme,
        '-device', 'nvme,drive=nvm,serial=lab0001,bus=dp1',
        '-netdev', 'user,id=n2,restrict=on,net=10.0.3.0/24',
        '-device', 'e1000e,netdev=n2,bus=rp3',
        # cache=unsafe: the guest's flushes are not passed on. The overlay lives from `up` to `down` (which removes
        # it) inside one QEMU process, guest reboots included, so no flush protects anything a test reads; dpkg's
        # fsync per unpacked file (a kernel package is thousands) no longer waits on the host's disk
        '-drive', 'if=virtio,file=%s,format=qcow2,cache=unsafe' % overlay,
        '-netdev', 'user,id=n1,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22' % port,
        '-device', 'virtio-net-pci,netdev=n1,bus=rp1',
        '-display', 'none', '-serial', 'file:%s' % os.path.join(rdir, 'serial.log'),
        '-daemonize', '-pidfile', os.path.join(rdir, 'qemu.pid'),
    ]
    return argv


def inventory_text(name, port, key):
    common = '-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'
    return ('[lab]\n%s ansible_host=127.0.0.1 ansible_port=%d ansible_user=root '
            'ansible_ssh_private_key_file=%s ansible_python_interpreter=/usr/bin/python3 '
            "ansible_ssh_common_args='%s'\n" % (name, port, key, common))


def ssh_argv(state, command):
    return (['ssh', '-i', state['key'], '-p', str(state['port'])] + SSH_OPTS +
            ['root@127.0.0.1', command])


def ssh(state, command, check=True, timeout=300):
    proc = subprocess.run(ssh_argv(state, command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, check=False)
    out = proc.stdout.decode('utf-8', 'replace')
    if check and proc.returncode != 0:
        raise LabError('ssh %r failed (rc=%d): %s%s' % (command, proc.returncode, out[-1500:],
                                                        proc.stderr.decode('utf-8', 'replace')[-1500:]))
    return proc.returncode, out


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def qemu_pid(rdir):
    """QEMU's pid from its own pidfile, only if that process is QEMU running from this run dir."""
    path = os.path.join(rdir, 'qemu.pid')
    try:
        with open(path) as handle:
            pid = int(handle.read().strip())
        with open('/proc/%d/cmdline' % pid, 'rb') as handle:
            cmdline = handle.read().decode('utf-8', 'replace')
    except (OSError, ValueError):
        return None
    if 'qemu-system' in cmdline and rdir in cmdline:
        return pid
    return None


def serial_tail(rdir, chars=3000):
    try:
        with open(os.path.join(rdir, 'serial.log'), 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')[-chars:]
    except OSError:
        return ''


def wait_ssh(state, timeout, previous_boot=None):
    """Wait until SSH answers (and, after a reboot, answers from a new boot); returns the boot id."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not pid_alive(state['pid']):
            raise LabError('QEMU (pid %d) exited while waiting for SSH; serial log:\n%s'
                           % (state['pid'], serial_tail(state['run_dir'])))
        try:
            rc, out = ssh(state, 'cat /proc/sys/kernel/random/boot_id', check=False, timeout=20)
        except subprocess.TimeoutExpired:
            rc, out = 255, ''
        if rc == 0 and out.strip() and out.strip() != previous_boot:
            return out.strip()
        time.sleep(2)
    raise LabError('no SSH on 127.0.0.1:%d within %d s; serial log:\n%s'
                   % (state['port'], timeout, serial_tail(state['run_dir'])))


# --------------------------------------------------------------------------- subcommands

def cmd_deps(args, timings):
    timings.run('deps', labimage.deps)


def cmd_image(args, timings):
    path = timings.run('image', labimage.build_image, timings, force=args.force)
    print(path)


def cmd_dcbdrv(args, timings):
    kver = args.kver
    if not kver:
        if not labimage.image_ready():
            raise LabError('no cached image to read the guest kernel from: pass --kver or run "image" first')
        kver = labimage.image_meta()['kver']
    os.makedirs(os.path.join(labimage.cache_dir(), 'work'), exist_ok=True)
    ko = labimage.build_driver(kver, labimage.host_mirror(), timings)
    print(ko)


def cmd_up(args, timings):
    if not labimage.image_ready():
        raise LabError('image %s is not built: run "lab.py image" first' % labimage.image_dir())
    image = labimage.image_dir()
    meta = labimage.image_meta()
    rdir = run_dir(args.name)
    if qemu_pid(rdir):
        raise LabError('VM %r is already up (run dir %s); "down %s" first' % (args.name, rdir, args.name))
    shutil.rmtree(rdir, ignore_errors=True)
    os.makedirs(rdir)
    key = os.path.join(rdir, 'id_ed25519')
    shutil.copy2(os.path.join(image, 'id_ed25519'), key)
    os.chmod(key, 0o600)
    overlay = os.path.join(rdir, 'run.qcow2')
    run(['qemu-img', 'create', '-q', '-f', 'qcow2', '-b', os.path.join(image, 'disk.qcow2'), '-F', 'qcow2',
         overlay])
    nvme = os.path.join(rdir, 'nvme.raw')
    run(['truncate', '-s', '%dM' % NVME_MIB, nvme])
    port = free_port()
    state = {
        'name': args.name, 'port': port, 'overlay': overlay, 'run_dir': rdir, 'key': key, 'image': image,
        'kver': meta['kver'], 'iommu': bool(args.iommu), 'pid': 0,
        'inventory': os.path.join(rdir, 'inventory.ini'), 'serial_log': os.path.join(rdir, 'serial.log'),
    }

    def boot():
        run(qemu_argv(rdir, port, overlay, nvme, iommu=args.iommu), capture=True)
        pid = qemu_pid(rdir)
        if not pid:
            raise LabError('QEMU did not start (no live pid in %s/qemu.pid)' % rdir)
        state['pid'] = pid
        write_state(state)
        state['boot_id'] = wait_ssh(state, args.timeout)

    try:
        timings.run('boot-to-ssh', boot)
    except BaseException:
        down(args.name)
        raise
    write_state(state)
    labimage.write(state['inventory'], inventory_text(args.name, port, key))
    log('VM %s up: ssh port %d, inventory %s' % (args.name, port, state['inventory']))
    print(state_path(args.name))


def write_state(state):
    labimage.write(state_path(state['name']), json.dumps(state, indent=2, sort_keys=True) + '\n')


def cmd_ssh(args, timings):
    state = load_state(args.name)
    command = ' '.join(shlex.quote(a) for a in args.command) if len(args.command) > 1 else ' '.join(args.command)
    proc = subprocess.run(ssh_argv(state, command or 'true'), check=False)
    return proc.returncode


def reboot(name, timeout=420):
    state = load_state(name)
    before = ssh(state, 'cat /proc/sys/kernel/random/boot_id')[1]
    ssh(state, 'systemctl reboot', check=False, timeout=30)
    state['boot_id'] = wait_ssh(state, timeout, previous_boot=before.strip())
    write_state(state)


# --------------------------------------------------------------------------- kernel upgrade material

KERNEL_PACKAGE_RE = re.compile(r'^linux-image-(\d+\.\d+\.\d+)-(\d+)-([a-z0-9]+)$')
KERNEL_RELEASE_RE = re.compile(r'^(\d+\.\d+\.\d+)-(\d+)-([a-z0-9]+)$')


def newer_kernels(current, package_names):
    """Releases of ``linux-image-<base>-<abi>-<flavour>`` packages with ``current``'s base and flavour and a
    higher ABI, newest first (Debian's kernel ABI: 6.1.0-50-amd64 -> 6.1.0-57-amd64)."""
    cur = KERNEL_RELEASE_RE.match(current)
    if not cur:
        raise LabError('%r is not a Debian kernel release (<base>-<abi>-<flavour>)' % current)
    found = []
    for name in package_names:
        m = KERNEL_PACKAGE_RE.match(name.strip())
        if m and m.group(1) == cur.group(1) and m.group(3) == cur.group(3) and int(m.group(2)) > int(cur.group(2)):
            found.append((int(m.group(2)), '%s-%s-%s' % m.groups()))
    return [kver for _abi, kver in sorted(found, reverse=True)]


def apt_kernel_packages():
    """Names of the linux-image-* packages the host's apt knows (every suite it has: main, -updates, -security)."""
    out = run(['apt-cache', 'pkgnames', 'linux-image-'], capture=True).stdout.decode('utf-8', 'replace')
    return out.split()


def packages_stanza(deb, filename):
    """One ``Packages`` stanza (flat repository) for a .deb: its control fields + Filename, Size, checksums."""
    control = run(['dpkg-deb', '-f', deb], capture=True).stdout.decode('utf-8', 'replace').rstrip('\n')
    with open(deb, 'rb') as handle:
        data = handle.read()
    return '%s\nFilename: %s\nSize: %d\nMD5sum: %s\nSHA256: %s\n' % (
        control, filename, len(data), hashlib.md5(data).hexdigest(), hashlib.sha256(data).hexdigest())


def kernel_repo(kver):
    """A flat apt repository (``deb [trusted=yes] file:DIR ./``) with ``linux-image-<kver>`` from the host's apt,
    for a guest that has no network. Cached in ``<cache>/kernels/<kver>/``; returns its path."""
    if not KERNEL_RELEASE_RE.match(kver):
        raise LabError('%r is not a Debian kernel release' % kver)
    repo = os.path.join(labimage.cache_dir(), 'kernels', kver)
    packages = os.path.join(repo, 'Packages')
    if os.path.exists(packages):
        return repo
    tmp = repo + '.tmp'
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    run(['apt-get', 'download', '-q', 'linux-image-' + kver], cwd=tmp, capture=True, timeout=900)
    debs = sorted(f for f in os.listdir(tmp) if f.endswith('.deb'))
    if not debs:
        raise LabError('apt-get download linux-image-%s left no package' % kver)
    with open(os.path.join(tmp, 'Packages'), 'w') as handle:
        handle.write('\n'.join(packages_stanza(os.path.join(tmp, d), './' + d) for d in debs))
    shutil.rmtree(repo, ignore_errors=True)
    os.rename(tmp, repo)
    return repo


def push(name, sources, dest, timeout=900):
    """scp -r SOURCES into DEST of the guest."""
    state = load_state(name)
    # the guest's sshd under TCG on a busy host can take longer than the 5 s the boot poll allows to answer;
    # a copy is not a poll: give it 30 s to connect and three tries. ssh keeps the first value it is given for an
    # option, so this ConnectTimeout goes before SSH_OPTS' own.
    argv = (['scp', '-q', '-r', '-i', state['key'], '-P', str(state['port']), '-o', 'ConnectTimeout=30'] +
            SSH_OPTS + list(sources) + ['root@127.0.0.1:' + dest])
    for attempt in range(1, 4):
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, check=False)
        if proc.returncode == 0:
            return
        why = proc.stderr.decode('utf-8', 'replace').strip()[-300:]
        log('scp to %s:%s failed (try %d of 3): %s' % (name, dest, attempt, why))
        if attempt < 3:
            time.sleep(5)
    raise LabError('scp to %s:%s failed: %s' % (name, dest, proc.stderr.decode('utf-8', 'replace')[-1500:]))


def cmd_kernels(args, timings):
    current = args.current or labimage.image_meta()['kver']
    print(json.dumps({'current': current, 'newer': newer_kernels(current, apt_kernel_packages())}))


def cmd_kernel_repo(args, timings):
    print(timings.run('kernel-repo', kernel_repo, args.kver))


def cmd_push(args, timings):
    timings.run('push', push, args.name, args.paths[:-1], args.paths[-1])


def cmd_reboot(args, timings):
    timings.run('reboot', reboot, args.name, args.timeout)


def down(name):
    """Kill QEMU by the pid in its own pidfile (never by name), remove the overlay; idempotent."""
    rdir = run_dir(name)
    pid = qemu_pid(rdir)
    if pid:
        os.kill(pid, signal.SIGTERM)
        for _attempt in range(50):
            if not pid_alive(pid):
                break
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)
            for _attempt in range(50):
                if not pid_alive(pid):
                    break
                time.sleep(0.2)
        log('VM %s: QEMU pid %d stopped' % (name, pid))
    if os.path.isdir(rdir):
        shutil.rmtree(rdir, ignore_errors=True)


def cmd_down(args, timings):
    down(args.name)


def cmd_status(args, timings):
    base = os.path.join(labimage.cache_dir(), 'run')
    names = [args.name] if args.name else (sorted(os.listdir(base)) if os.path.isdir(base) else [])
    out = {'image': labimage.image_dir(), 'image_ready': labimage.image_ready(), 'vms': {}}
    for name in names:
        pid = qemu_pid(run_dir(name))
        out['vms'][name] = {'running': bool(pid), 'pid': pid}
        if os.path.exists(state_path(name)):
            out['vms'][name].update(load_state(name))
    print(json.dumps(out, indent=2, sort_keys=True))


# --------------------------------------------------------------------------- smoke

def parse_dcb_app_dscp(text):
    """dscp_prio pairs from `dcb -j app show`: [[26,3]] (iproute2 < 6.5) or [[26,3," "]] (>= 6.5)."""
    data = json.loads(text) if text.strip() else {}
    pairs = []
    for entry in data.get('dscp_prio', []):
        if isinstance(entry, dict):
            pairs.append((int(entry['dscp']), int(entry['prio'])))
        else:
            pairs.append((int(entry[0]), int(entry[1])))
    return pairs


class Smoke:
    """Checks with real read-back; every failure is collected and reported."""

    def __init__(self, state):
        self.state = state
        self.failures = []
        self.passed = 0

    def sh(self, command):
        return ssh(self.state, command, check=False)

    def check(self, what, ok, detail=''):
        if ok:
            self.passed += 1
            log('PASS %s' % what)
        else:
            self.failures.append('%s: %s' % (what, detail))
            log('FAIL %s: %s' % (what, detail))

    def toggles(self, dev):
        rc, out = self.sh('cat /sys/class/net/%s/dcbtest/link_toggles' % dev)
        return int(out.strip()) if rc == 0 and out.strip().isdigit() else None

    def run_all(self):
        st = self.state
        rc, out = self.sh('uname -r')
        self.check('uname -r is the image kernel %s' % st['kver'], rc == 0 and out.strip() == st['kver'], out)

        rc, out = self.sh('cat /sys/module/dcbtest/parameters/count; ls /sys/class/net')
        self.check('dcbtest loaded with dcb0, dcb1', rc == 0 and all(r in out.split() for r in RAILS), out)

        for idx, rail in enumerate(RAILS):
            rc, out = self.sh('test -e /sys/class/infiniband/rxe%d && rdma -j link show rxe%d/1' % (idx, idx))
            try:
                link = json.loads(out)[0] if rc == 0 else {}
            except ValueError:
                link = {}
            self.check('rxe%d on %s ACTIVE' % (idx, rail),
                       link.get('netdev') == rail and link.get('state') == 'ACTIVE', out)

        tos = '/sys/kernel/config/rdma_cm/rxe0/ports/1/default_roce_tos'
        rc, out = self.sh('mkdir -p /sys/kernel/config/rdma_cm/rxe0 && echo 106 > %s && cat %s' % (tos, tos))
        self.check('rdma_cm default_roce_tos accepts 106 and reads back', rc == 0 and out.strip() == '106', out)
        self.sh('rmdir /sys/kernel/config/rdma_cm/rxe0')

        rc, out = self.sh('dcb -j app show dev dcb0')
        try:
            before = parse_dcb_app_dscp(out) if rc == 0 else None
        except ValueError:
            before = None
        self.check('dcb -j app show dev dcb0 works (PCP trust, no DSCP entries)', before == [], out)
        rc, out = self.sh('dcb app add dev dcb0 dscp-prio 26:3 && dcb -j app show dev dcb0 && '
                          'cat /sys/class/net/dcb0/dcbtest/trust')
        lines = out.strip().splitlines()
        try:
            after = parse_dcb_app_dscp(lines[0]) if rc == 0 and lines else []
        except ValueError:
            after = []
        self.check('dcb app add dscp-prio 26:3 -> 64 entries, 26->3, trust dscp',
                   len(after) == 64 and (26, 3) in after and lines[-1:] == ['dscp']
                   and all(p == d >> 3 for d, p in after), out)
        rc, out = self.sh('dcb app add dev dcb0 dscp-prio 26:5 && dcb -j app show dev dcb0')
        try:
            repl = parse_dcb_app_dscp(out) if rc == 0 else []
        except ValueError:
            repl = []
        self.check('dcb app add dscp-prio 26:5 replaces the entry (still 64)',
                   len(repl) == 64 and (26, 5) in repl and (26, 3) not in repl, out)
        rc, out = self.sh('dcb app del dev dcb0 dscp-prio 26:5 && dcb -j app show dev dcb0')
        try:
            deleted = parse_dcb_app_dscp(out) if rc == 0 else []
        except ValueError:
            deleted = []
        self.check('dcb app del dscp-prio 26:5 -> 63 entries', len(deleted) == 63, out)
        rc, out = self.sh('dcb apptrust set dev dcb0 order dscp')
        self.check('dcb apptrust fails as on mlx5 (no setapptrust)', rc != 0, out)

        t0 = self.toggles('dcb0')
        rc, out = self.sh('dcb pfc set dev dcb0 prio-pfc all:off 3:on && dcb -j pfc show dev dcb0')
        t1 = self.toggles('dcb0')
        try:
            pfc = json.loads(out) if rc == 0 else {}
        except ValueError:
            pfc = {}
        prio = pfc.get('prio_pfc', [])
        self.check('dcb pfc set prio-pfc 3:on reads back and toggles the link once',
                   t0 is not None and t1 == t0 + 1 and len(prio) == 8 and prio[3] is True
                   and sum(1 for p in prio if p) == 1, 'toggles %s -> %s; %s' % (t0, t1, out))
        self.sh('dcb pfc set dev dcb0 prio-pfc all:off 3:on')
        t2 = self.toggles('dcb0')
        self.check('identical pfc set does not toggle the link (mlx5 compares pfc_en)', t2 == t1,
                   'toggles %s -> %s' % (t1, t2))
        rc, out = self.sh('cat /sys/class/net/dcb0/carrier')
        self.check('dcb0 carrier back on after the toggle', out.strip() == '1', out)

        if st.get('iommu'):
            for bdf in ROOT_PORTS:
                rc, out = self.sh('setpci -s %s ECAP_ACS+6.w' % bdf)
                self.check('ACS control of root port %s is 0x%s' % (bdf, ACS_ENABLED),
                           rc == 0 and out.strip() == ACS_ENABLED, out)
        return self.failures


def ensure_iommu_cmdline(state, timeout):
    """With --iommu the guest needs intel_iommu=on: a grub drop-in, update-grub and a real reboot."""
    cmdline = ssh(state, 'cat /proc/cmdline')[1]
    if 'intel_iommu=on' in cmdline.split():
        return
    ssh(state, "printf 'GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT intel_iommu=on\"\\n' "
               '> /etc/default/grub.d/50-lab-iommu.cfg && update-grub 2>/dev/null')
    reboot(state['name'], timeout)


def smoke(name, timings, timeout=420):
    state = load_state(name)
    if state.get('iommu'):
        timings.run('iommu-cmdline-reboot', ensure_iommu_cmdline, state, timeout)
        state = load_state(name)
    checker = Smoke(state)
    failures = timings.run('smoke', checker.run_all)
    log('smoke: %d passed, %d failed' % (checker.passed, len(failures)))
    if failures:
        raise LabError('smoke failed:\n  ' + '\n  '.join(failures))


def cmd_smoke(args, timings):
    smoke(args.name, timings, args.timeout)


def cmd_all(args, timings):
    """deps -> image -> up --iommu -> smoke -> down, cleaning up on any failure."""
    timings.run('deps', labimage.deps)
    timings.run('image', labimage.build_image, timings)
    up_args = argparse.Namespace(name=args.name, iommu=True, timeout=args.timeout)
    try:
        cmd_up(up_args, timings)
        smoke(args.name, timings, args.timeout)
    finally:
        if not args.keep:
            down(args.name)


# --------------------------------------------------------------------------- main

def parser():
    p = argparse.ArgumentParser(prog='lab.py', description=__doc__.split('\n', maxsplit=1)[0])
    sub = p.add_subparsers(dest='cmd')
    sub.required = True
    sub.add_parser('deps', help='apt-get install the host packages (idempotent)')
    s = sub.add_parser('image', help='build or find the cached lab image')
    s.add_argument('--force', action='store_true', help='rebuild even on a cache hit')
    s = sub.add_parser('dcbdrv', help='build the dcbtest driver for the guest kernel in podman')
    s.add_argument('--kver', help='guest kernel version (default: the cached image\'s)')
    s = sub.add_parser('up', help='boot a throw-away overlay and wait for SSH')
    s.add_argument('--name', default='lab')
    s.add_argument('--iommu', action='store_true', help='add -device intel-iommu')
    s.add_argument('--timeout', type=int, default=420, help='seconds to wait for SSH')
    s = sub.add_parser('ssh', help='run a command in the VM: ssh NAME -- CMD')
    s.add_argument('name')
    s.add_argument('command', nargs=argparse.REMAINDER)
    for name, helptext in (('reboot', 'reboot the guest and wait for SSH'), ('smoke', 'real-kernel checks')):
        s = sub.add_parser(name, help=helptext)
        s.add_argument('name')
        s.add_argument('--timeout', type=int, default=420)
    s = sub.add_parser('down', help='stop QEMU (by its pidfile) and remove the overlay; idempotent')
    s.add_argument('name')
    s = sub.add_parser('status', help='image and VM state as JSON')
    s.add_argument('name', nargs='?')
    s = sub.add_parser('kernels', help='the image kernel and the newer Debian ABIs the host apt knows (JSON)')
    s.add_argument('--current', help='kernel release to compare with (default: the cached image\'s)')
    s = sub.add_parser('kernel-repo', help='flat apt repository with linux-image-KVER for the guest')
    s.add_argument('--kver', required=True)
    s = sub.add_parser('push', help='copy files into the guest: push NAME SRC... DST')
    s.add_argument('name')
    s.add_argument('paths', nargs='+')
    s = sub.add_parser('all', help='deps, image, up --iommu, smoke, down (with per-stage timings)')
    s.add_argument('--name', default='lab-all')
    s.add_argument('--timeout', type=int, default=420)
    s.add_argument('--keep', action='store_true', help='leave the VM up at the end')
    return p


COMMANDS = {
    'deps': cmd_deps, 'image': cmd_image, 'dcbdrv': cmd_dcbdrv, 'up': cmd_up, 'ssh': cmd_ssh,
    'reboot': cmd_reboot, 'down': cmd_down, 'smoke': cmd_smoke, 'status': cmd_status, 'all': cmd_all,
    'kernels': cmd_kernels, 'kernel-repo': cmd_kernel_repo, 'push': cmd_push,
}


def main(argv=None):
    args = parser().parse_args(argv)
    if getattr(args, 'command', None) and args.command[:1] == ['--']:
        args.command = args.command[1:]
    timings = Timings()

    def on_signal(signum, frame):
        raise KeyboardInterrupt('signal %d' % signum)

    signal.signal(signal.SIGTERM, on_signal)
    try:
        rc = COMMANDS[args.cmd](args, timings)
    except (LabError, KeyboardInterrupt) as exc:
        log('ERROR: %s' % exc)
        rc = 1
    if timings.stages and args.cmd not in ('ssh', 'status', 'down'):
        sys.stderr.write('[lab] timings:\n' + timings.summary() + '\n')
    return rc or 0


if __name__ == '__main__':
    sys.exit(main())
