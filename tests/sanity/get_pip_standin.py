# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the get-pip bootstrap script that ansible-test downloads from a host this network cannot reach.

ansible-test runs it in a fresh virtual environment with pip's own options and the packages to install
(e.g. ``--disable-pip-version-check pip==24.2 --no-setuptools --no-wheel``). We bootstrap pip from the
interpreter's bundled ``ensurepip`` and let that pip install the requested packages from the package index the
machine is configured for. tests/sanity/run.sh copies this file to ansible-test's cache path.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ensurepip
import os
import subprocess
import sys


def main():
    # ensurepip clears PIP_* variables and points PIP_CONFIG_FILE at /dev/null in os.environ; the machine's pip
    # configuration (index, certificates) must apply to the install that follows, so keep a copy.
    env = dict(os.environ)
    ensurepip.bootstrap(upgrade=True)
    args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
    if args:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q"] + args, env=env)


if __name__ == "__main__":
    main()
