# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cmdline concern's GRUB drop-in read by its real consumer: the guest's grub-mkconfig (GRUB 2.06, /bin/sh
sourcing /etc/default/grub and /etc/default/grub.d/*.cfg). A broken copy of the drop-in is fed to grub-mkconfig in a
private mount namespace (a bind mount over /etc/default/grub.d that dies with the command), so the node's own
files are never touched."""
from __future__ import absolute_import, division, print_function

import re

from conftest import log

__metaclass__ = type

GRUBD = '/etc/default/grub.d'
DROPIN = GRUBD + '/99-gpufabric.cfg'
LINUX_LINE = re.compile(r'^\s*linux\s+\S+\s+(.*)$')


def linux_lines(cfg):
    return [m.group(1) for m in (LINUX_LINE.match(line) for line in cfg.splitlines()) if m]


def scratch(host):
    return host.check_output('mktemp -d /tmp/gf-grub.XXXXXX')


def test_grub_mkconfig_puts_the_dropin_arguments_on_every_linux_line(host):
    tmp = scratch(host)
    try:
        # the arguments come from the collection's drop-in alone
        others = host.run("grep -l 'iommu=pt' /etc/default/grub %s/*.cfg | grep -vx %s" % (GRUBD, DROPIN))
        assert others.stdout.strip() == '', others.stdout
        run = host.run('grub-mkconfig -o %s/grub.cfg' % tmp)
        log('grub-mkconfig rc=%d; stderr tail: %s' % (run.rc, ' | '.join(run.stderr.strip().splitlines()[-3:])))
        assert run.rc == 0, run.stderr
        lines = linux_lines(host.file('%s/grub.cfg' % tmp).content_string)
        log('generated linux lines: %s' % ' || '.join(lines))
        assert lines
        for args in lines:
            words = args.split()
            assert 'iommu=pt' in words, args
            assert any('pci=disable_acs_redir=' in w for w in words), args
        # what the node boots from was made the same way (update-grub in converge)
        assert sorted(lines) == sorted(linux_lines(host.file('/boot/grub/grub.cfg').content_string))
    finally:
        host.run('rm -rf %s' % tmp)


def test_grub_mkconfig_fails_on_a_broken_dropin(host):
    tmp = scratch(host)
    try:
        host.check_output('cp -a %s %s/grub.d' % (GRUBD, tmp))
        good = host.file(DROPIN).content_string
        # drop the last double quote: an unterminated string in the collection's assignment
        cut = good.rindex('"')
        broken = good[:cut] + good[cut + 1:]
        host.check_output("printf '%%s' %s > %s/grub.d/99-gpufabric.cfg" % (shell_quote(broken), tmp))
        assert host.file('%s/grub.d/99-gpufabric.cfg' % tmp).content_string == broken
        run = host.run("unshare --mount sh -c 'mount --bind %s/grub.d %s && exec grub-mkconfig -o %s/broken.cfg'"
                       % (tmp, GRUBD, tmp))
        log('broken drop-in: grub-mkconfig rc=%d: %s' % (run.rc, ' | '.join(run.stderr.strip().splitlines()[-2:])))
        assert run.rc != 0
        assert '99-gpufabric.cfg' in run.stderr and 'Syntax error' in run.stderr, run.stderr
        assert not host.file('%s/broken.cfg' % tmp).exists
        # the node's drop-in is unchanged
        assert host.file(DROPIN).content_string == good
    finally:
        host.run('rm -rf %s' % tmp)


def shell_quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"
