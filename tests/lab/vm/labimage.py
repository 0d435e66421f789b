# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Image side of the gpufabric VM lab (tier 3): debootstrap rootfs, DCB test driver, disk, first boot.

Everything here feeds the image cache key (see ``image_inputs``), so a change to this file, to
``packages.txt``, to ``guest/`` or to ``dcbtest/`` rebuilds the image; ``lab.py`` (boot, ssh, smoke) does not.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..'))
SUITE = 'bookworm'
# Bumped when the image layout changes in a way the hashed files do not show.
IMAGE_FORMAT = '1'
DISK_SIZE_MIB = 6144
PART_OFFSET = 1048576
KBUILD_IMAGE = 'localhost/gpufabric-kbuild'
HOST_PACKAGES = [
    'qemu-system-x86', 'qemu-utils', 'debootstrap', 'seabios', 'ipxe-qemu', 'openssh-client',
    'e2fsprogs', 'fdisk', 'kmod', 'podman', 'runc', 'fuse-overlayfs', 'uidmap', 'catatonit',
]
APT_SOURCES = ['/etc/apt/sources.list.d/*.sources', '/etc/apt/sources.list', '/etc/apt/sources.list.d/*.list']


class LabError(Exception):
    """A lab step failed; the message says which and why."""


# --------------------------------------------------------------------------- small helpers

def log(msg):
    sys.stderr.write('[lab] %s\n' % msg)
    sys.stderr.flush()


class Timings:
    """Per-stage wall-clock timings, printed as each stage ends and summed up at the end.

    Stages may nest (the image stage contains debootstrap, disk, ...); the total counts top-level stages only.
    """

    def __init__(self):
        self.stages = []
        self.depth = 0

    def run(self, name, func, *args, **kwargs):
        start = time.time()
        log('stage %s ...' % name)
        slot = len(self.stages)
        self.stages.append((name, None, self.depth))
        self.depth += 1
        try:
            return func(*args, **kwargs)
        finally:
            self.depth -= 1
            took = time.time() - start
            self.stages[slot] = (name, took, self.depth)
            log('stage %s: %.1f s' % (name, took))

    def summary(self):
        lines = ['%-26s %8.1f s' % ('  ' * depth + name, took or 0.0) for name, took, depth in self.stages]
        total = sum(stage[1] or 0.0 for stage in self.stages if stage[2] == 0)
        lines.append('%-26s %8.1f s' % ('total', total))
        return '\n'.join(lines)


def run(argv, check=True, capture=False, env=None, input_data=None, cwd=None, timeout=None):
    """Run a command list; raise LabError with its output tail on failure."""
    proc = subprocess.run(
        argv, env=env, cwd=cwd, timeout=timeout, input=input_data,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.PIPE if capture else None,
        check=False,
    )
    if check and proc.returncode != 0:
        tail = ''
        if capture:
            tail = ((proc.stdout or b'') + (proc.stderr or b'')).decode('utf-8', 'replace')[-2000:]
        raise LabError('command failed (rc=%d): %s\n%s' % (proc.returncode, ' '.join(argv), tail))
    return proc


def cache_dir():
    return os.path.abspath(os.environ.get('GPUFABRIC_VM_CACHE') or os.path.join(REPO, '.cache', 'vm'))


def read_package_list(path=None):
    """Package names from packages.txt: one a line, '#' comments and blank lines ignored."""
    path = path or os.path.join(HERE, 'packages.txt')
    names = []
    with open(path) as handle:
        for line in handle:
            line = line.split('#', 1)[0].strip()
            if line:
                if not re.match(r'^[a-z0-9][a-z0-9+.-]*$', line):
                    raise LabError('%s: not a Debian package name: %r' % (path, line))
                names.append(line)
    return names


# --------------------------------------------------------------------------- apt mirror

def _parse_deb822(text):
    stanzas, cur = [], {}
    key = None
    for raw in text.splitlines():
        if raw.startswith('#'):
            continue
        if not raw.strip():
            if cur:
                stanzas.append(cur)
            cur, key = {}, None
            continue
        if raw[0] in ' \t' and key:
            cur[key] += ' ' + raw.strip()
            continue
        if ':' in raw:
            key, val = raw.split(':', 1)
            key = key.strip().lower()
            cur[key] = val.strip()
    if cur:
        stanzas.append(cur)
    return stanzas


def apt_sources_entries(texts):
    """(uri, suite, components) tuples from apt source files: deb822 ``.sources`` and one-line ``.list``."""
    entries = []
    for name, text in texts:
        if name.endswith('.sources'):
            for st in _parse_deb822(text):
                if 'deb' not in st.get('types', '').split():
                    continue
                if st.get('enabled', 'yes').lower() == 'no':
                    continue
                for uri in st.get('uris', '').split():
                    for suite in st.get('suites', '').split():
                        entries.append((uri, suite, st.get('components', '').split()))
        else:
            for line in text.splitlines():
                line = line.split('#', 1)[0].strip()
                if not line.startswith('deb '):
                    continue
                parts = line.split()[1:]
                if parts and parts[0].startswith('['):
                    while parts and not parts[0].endswith(']'):
                        parts.pop(0)
                    parts.pop(0)
                if len(parts) >= 2:
                    entries.append((parts[0], parts[1], parts[2:]))
    return entries


def pick_mirror(entries, suite=SUITE):
    """The URI that serves ``suite`` itself with ``main`` (not -updates/-security)."""
    for uri, ent_suite, comps in entries:
        if ent_suite == suite and 'main' in comps:
            return uri.rstrip('/')
    raise LabError('no apt source for suite %r with component main on this host; set GPUFABRIC_VM_MIRROR' % suite)


def host_mirror(suite=SUITE):
    """The Debian mirror this host's own apt uses (GPUFABRIC_VM_MIRROR overrides)."""
    override = os.environ.get('GPUFABRIC_VM_MIRROR')
    if override:
        return override.rstrip('/')
    texts = []
    for pattern in APT_SOURCES:
        for path in sorted(glob.glob(pattern)):
            with open(path) as handle:
                texts.append((path, handle.read()))
    return pick_mirror(apt_sources_entries(texts), suite)


# --------------------------------------------------------------------------- cache key

def tree_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ('__pycache__', '.tmp_versions'))
        for fname in sorted(filenames):
            if fname.endswith(('.o', '.ko', '.mod', '.mod.c', '.cmd', '.pyc', '.symvers', '.order')):
                continue
            out.append(os.path.join(dirpath, fname))
    return out


def image_inputs(here=HERE):
    """Files whose content defines the image: package list, guest config, driver source, this builder."""
    files = [os.path.join(here, 'packages.txt'), os.path.join(here, 'labimage.py')]
    files += tree_files(os.path.join(here, 'guest'))
    files += tree_files(os.path.join(here, 'dcbtest'))
    return files


def inputs_key(files, base, extra=()):
    """sha256 over (relative path, mode bit x, content) of each file plus extra strings."""
    digest = hashlib.sha256()
    for item in extra:
        digest.update(('extra:%s\n' % item).encode())
    for path in sorted(files):
        rel = os.path.relpath(path, base)
        with open(path, 'rb') as handle:
            data = handle.read()
        mode = 'x' if os.access(path, os.X_OK) else '-'
        digest.update(('file:%s:%s:%d\n' % (rel, mode, len(data))).encode())
        digest.update(data)
    return digest.hexdigest()


def image_key(here=HERE):
    return inputs_key(image_inputs(here), here, extra=('suite=' + SUITE, 'format=' + IMAGE_FORMAT))


def driver_key(here=HERE):
    return inputs_key(tree_files(os.path.join(here, 'dcbtest')), here)[:16]


def image_dir(key=None):
    return os.path.join(cache_dir(), 'images', key or image_key())


def image_ready(key=None):
    d = image_dir(key)
    return all(os.path.exists(os.path.join(d, f)) for f in ('disk.qcow2', 'id_ed25519', 'meta.json'))


def image_meta(key=None):
    with open(os.path.join(image_dir(key), 'meta.json')) as handle:
        return json.load(handle)


# --------------------------------------------------------------------------- host packages

def missing_host_packages(packages=None):
    packages = packages or HOST_PACKAGES
    proc = run(['dpkg-query', '-W', '-f', '${Package} ${db:Status-Abbrev}\n'] + list(packages),
               check=False, capture=True)
    installed = set()
    for line in proc.stdout.decode().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith('ii'):
            installed.add(parts[0])
    return [p for p in packages if p not in installed]


def deps():
    """apt-get install the host packages; a no-op when all are installed."""
    missing = missing_host_packages()
    if not missing:
        log('deps: all %d host packages installed' % len(HOST_PACKAGES))
        return
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    log('deps: installing %s' % ' '.join(missing))
    run(['apt-get', 'update', '-qq'], env=env, capture=True)
    run(['apt-get', 'install', '-y', '-qq', '--no-install-recommends'] + missing, env=env, capture=True)


# --------------------------------------------------------------------------- debootstrap

def debootstrap(target, include, mirror, suite=SUITE):
    debs = os.path.join(cache_dir(), 'debs')
    os.makedirs(debs, exist_ok=True)
    argv = ['debootstrap', '--variant=minbase', '--cache-dir=' + debs,
            '--include=' + ','.join(include), suite, target, mirror]
    logf = target.rstrip('/') + '.debootstrap.log'
    with open(logf, 'w') as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        with open(logf) as handle:
            tail = handle.read()[-3000:]
        raise LabError('debootstrap failed (rc=%d), log %s:\n%s' % (proc.returncode, logf, tail))


def rootfs_kver(root):
    """The one kernel version installed in a rootfs (from lib/modules)."""
    mods = sorted(d for d in os.listdir(os.path.join(root, 'lib', 'modules'))
                  if os.path.isdir(os.path.join(root, 'lib', 'modules', d, 'kernel')))
    if len(mods) != 1:
        raise LabError('expected exactly one kernel in %s/lib/modules, found %s' % (root, mods))
    return mods[0]


def chroot(root, argv, **kwargs):
    env = {'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'LC_ALL': 'C', 'DEBIAN_FRONTEND': 'noninteractive'}
    return run(['chroot', root] + argv, env=env, **kwargs)


def copy_tree(src, dst):
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        target_dir = os.path.normpath(os.path.join(dst, rel))
        os.makedirs(target_dir, exist_ok=True)
        for fname in filenames:
            shutil.copy2(os.path.join(dirpath, fname), os.path.join(target_dir, fname))


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as handle:
        handle.write(text)
    os.chmod(path, mode)


def configure_rootfs(root, pubkey, kver, ko_path, hostname='gpufabric-lab'):
    """Apply the recipe's configuration to a debootstrapped rootfs and install the DCB test driver."""
    copy_tree(os.path.join(HERE, 'guest'), root)
    write(os.path.join(root, 'etc', 'hostname'), hostname + '\n')
    write(os.path.join(root, 'etc', 'hosts'),
          '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' % hostname)
    write(os.path.join(root, 'etc', 'fstab'), 'LABEL=root\t/\text4\terrors=remount-ro\t0\t1\n')
    ssh_dir = os.path.join(root, 'root', '.ssh')
    os.makedirs(ssh_dir, mode=0o700, exist_ok=True)
    os.chmod(ssh_dir, 0o700)
    write(os.path.join(ssh_dir, 'authorized_keys'), pubkey, mode=0o600)
    write(os.path.join(root, 'var', 'lib', 'lab-firstboot-pending'), 'install grub\n')
    chroot(root, ['passwd', '-d', 'root'], capture=True)
    chroot(root, ['systemctl', 'enable', 'systemd-networkd', 'lab-rails.service', 'lab-firstboot.service'],
           capture=True)
    for unit in ('apt-daily.timer', 'apt-daily-upgrade.timer', 'apt-daily.service', 'apt-daily-upgrade.service',
                 'e2scrub_all.timer', 'fstrim.timer'):
        link = os.path.join(root, 'etc', 'systemd', 'system', unit)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink('/dev/null', link)
    # The driver, loaded at boot by modules-load.d (guest/etc/modules-load.d/gpufabric-lab.conf).
    upd = os.path.join(root, 'lib', 'modules', kver, 'updates')
    os.makedirs(upd, exist_ok=True)
    shutil.copy2(ko_path, os.path.join(upd, 'dcbtest.ko'))
    run(['depmod', '-b', root, kver])
    # Drop the debootstrap apt cache from the image (the host keeps the .debs in its own cache).
    for deb in glob.glob(os.path.join(root, 'var', 'cache', 'apt', 'archives', '*.deb')):
        os.unlink(deb)


# --------------------------------------------------------------------------- podman + driver

def podman_env():
    """CONTAINERS_CONF / CONTAINERS_STORAGE_CONF in the lab cache, with the recipe's quirks."""
    base = os.path.join(cache_dir(), 'podman')
    os.makedirs(base, exist_ok=True)
    conf = os.path.join(base, 'containers.conf')
    storage = os.path.join(base, 'storage.conf')
    write(conf, '\n'.join([
        '[containers]',
        'default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]',
        'netns = "none"',
        '',
        '[engine]',
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        '',
    ]))
    write(storage, '\n'.join([
        '[storage]',
        'driver = "overlay"',
        'graphroot = "%s"' % os.path.join(base, 'graph'),
        'runroot = "%s"' % os.path.join(base, 'run'),
        '',
    ]))
    env = dict(os.environ)
    env['CONTAINERS_CONF'] = conf
    env['CONTAINERS_STORAGE_CONF'] = storage
    return env


def kbuild_image_name(kver):
    return '%s:%s' % (KBUILD_IMAGE, kver)


def ensure_kbuild_image(kver, mirror, timings):
    """A podman image with build-essential and linux-headers-<kver>, imported from a debootstrap rootfs."""
    env = podman_env()
    name = kbuild_image_name(kver)
    if run(['podman', 'image', 'exists', name], check=False, env=env).returncode == 0:
        log('podman image %s cached' % name)
        return name
    work = tempfile.mkdtemp(prefix='kbuild-', dir=os.path.join(cache_dir(), 'work'))
    try:
        root = os.path.join(work, 'root')

        def bootstrap():
            debootstrap(root, ['build-essential', 'linux-headers-' + kver, 'kmod'], mirror)

        timings.run('podman-debootstrap', bootstrap)

        def do_import():
            tar = subprocess.Popen(['tar', '-C', root, '--numeric-owner', '-c', '.'], stdout=subprocess.PIPE)
            imp = subprocess.run(['podman', 'import', '-q', '-', name], stdin=tar.stdout, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
            tar.stdout.close()
            if tar.wait() != 0 or imp.returncode != 0:
                raise LabError('podman import failed: %s' % imp.stderr.decode('utf-8', 'replace')[-2000:])

        timings.run('podman-import', do_import)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return name


def vermagic(ko_path):
    return run(['modinfo', '-F', 'vermagic', ko_path], capture=True).stdout.decode().strip()


def check_vermagic(ko_path, kver):
    magic = vermagic(ko_path)
    if magic.split(' ', 1)[0] != kver:
        raise LabError('%s: vermagic %r does not match guest kernel %s' % (ko_path, magic, kver))
    return magic


def build_driver(kver, mirror, timings):
    """Build dcbtest.ko for kver inside podman (--network none); cached by kver and source hash."""
    out_dir = os.path.join(cache_dir(), 'drv', '%s-%s' % (kver, driver_key()))
    ko = os.path.join(out_dir, 'dcbtest.ko')
    if os.path.exists(ko):
        log('driver %s cached (vermagic %s)' % (ko, check_vermagic(ko, kver)))
        return ko
    image = ensure_kbuild_image(kver, mirror, timings)
    env = podman_env()
    os.makedirs(os.path.join(cache_dir(), 'work'), exist_ok=True)
    build = tempfile.mkdtemp(prefix='dcbtest-', dir=os.path.join(cache_dir(), 'work'))
    try:
        copy_tree(os.path.join(HERE, 'dcbtest'), build)

        def compile_it():
            run(['podman', 'run', '--rm', '--network', 'none', '-v', '%s:/build' % build, '-w', '/build',
                 image, 'make', 'KVER=' + kver], env=env, capture=True)

        timings.run('driver-build', compile_it)
        built = os.path.join(build, 'dcbtest.ko')
        magic = check_vermagic(built, kver)
        os.makedirs(out_dir, exist_ok=True)
        shutil.copy2(built, ko + '.tmp')
        os.rename(ko + '.tmp', ko)
        log('driver built: vermagic %s' % magic)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return ko


# --------------------------------------------------------------------------- disk + first boot

def sfdisk_script():
    return 'label: dos\nunit: sectors\n\nstart=%d, type=83, bootable\n' % (PART_OFFSET // 512)


def make_disk(root, qcow2):
    """Raw disk with one bootable partition filled by mkfs.ext4 -d (no loop devices), then qcow2."""
    raw = qcow2 + '.raw'
    try:
        run(['truncate', '-s', '%dM' % (DISK_SIZE_MIB + 1), raw])
        run(['sfdisk', '-q', raw], input_data=sfdisk_script().encode(), capture=True)
        run(['mkfs.ext4', '-q', '-F', '-L', 'root', '-E', 'offset=%d' % PART_OFFSET, '-d', root, raw,
             '%dM' % DISK_SIZE_MIB], capture=True)
        run(['qemu-img', 'convert', '-O', 'qcow2', raw, qcow2], capture=True)
    finally:
        if os.path.exists(raw):
            os.unlink(raw)


def first_boot(qcow2, kernel, initrd, logfile, timeout=420):
    """Boot once with -kernel/-initrd; lab-firstboot.service runs grub-install + update-grub and powers off."""
    argv = ['qemu-system-x86_64', '-machine', 'q35', '-accel', 'tcg,tb-size=256', '-smp', '2', '-m', '1024',
            '-kernel', kernel, '-initrd', initrd,
            '-append', 'root=LABEL=root rw console=ttyS0,115200n8 panic=10',
            '-drive', 'if=virtio,file=%s,format=qcow2' % qcow2,
            '-nic', 'none', '-display', 'none', '-serial', 'file:%s' % logfile, '-no-reboot']
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        err = proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise LabError('first boot did not power off within %d s; serial log %s' % (timeout, logfile))
    with open(logfile, 'rb') as handle:
        text = handle.read().decode('utf-8', 'replace')
    if 'LAB-FIRSTBOOT: OK' not in text:
        raise LabError('first boot did not install grub (qemu rc=%d %s); serial log %s:\n%s'
                       % (proc.returncode, err.decode('utf-8', 'replace')[-500:], logfile, text[-3000:]))


# --------------------------------------------------------------------------- the image

def prune_images(keep_key, keep=2):
    base = os.path.join(cache_dir(), 'images')
    entries = []
    for name in os.listdir(base):
        path = os.path.join(base, name)
        if name != keep_key and os.path.isdir(path):
            entries.append((os.path.getmtime(path), path))
    for _mtime, path in sorted(entries, reverse=True)[keep - 1:]:
        log('pruning old image %s' % path)
        shutil.rmtree(path, ignore_errors=True)


def build_image(timings, force=False):
    """Build (or find cached) the lab image; returns its directory."""
    key = image_key()
    final = image_dir(key)
    if image_ready(key) and not force:
        log('image cache hit: %s' % final)
        return final
    mirror = host_mirror()
    work_base = os.path.join(cache_dir(), 'work')
    os.makedirs(work_base, exist_ok=True)
    os.makedirs(os.path.join(cache_dir(), 'images'), exist_ok=True)
    work = tempfile.mkdtemp(prefix='image-', dir=work_base)
    try:
        root = os.path.join(work, 'rootfs')
        timings.run('debootstrap', debootstrap, root, read_package_list(), mirror)
        kver = rootfs_kver(root)
        log('guest kernel %s' % kver)
        ko = build_driver(kver, mirror, timings)
        run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'gpufabric-vm-lab', '-f',
             os.path.join(work, 'id_ed25519')])
        with open(os.path.join(work, 'id_ed25519.pub')) as handle:
            pubkey = handle.read()
        timings.run('configure', configure_rootfs, root, pubkey, kver, ko)
        kernel = os.path.join(work, 'vmlinuz')
        initrd = os.path.join(work, 'initrd.img')
        shutil.copy2(os.path.join(root, 'boot', 'vmlinuz-' + kver), kernel)
        shutil.copy2(os.path.join(root, 'boot', 'initrd.img-' + kver), initrd)
        qcow2 = os.path.join(work, 'disk.qcow2')
        timings.run('disk', make_disk, root, qcow2)
        shutil.rmtree(root)
        timings.run('grub-first-boot', first_boot, qcow2, kernel, initrd, os.path.join(work, 'firstboot.log'))
        meta = {
            'key': key, 'kver': kver, 'suite': SUITE, 'vermagic': vermagic(ko),
            'packages': read_package_list(), 'built': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
        }
        write(os.path.join(work, 'meta.json'), json.dumps(meta, indent=2, sort_keys=True) + '\n')
        os.chmod(os.path.join(work, 'id_ed25519'), 0o600)
        for f in ('vmlinuz', 'initrd.img'):
            os.unlink(os.path.join(work, f))
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(work, final)
        work = None
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    prune_images(key)
    return final
