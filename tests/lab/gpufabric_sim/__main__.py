# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""python -m gpufabric_sim create|destroy|list|exec|hash|reboot|reregister (see runtime.py), elapse (timers.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

from gpufabric_sim.runtime import main

if __name__ == "__main__":
    if sys.argv[1:2] == ["elapse"]:
        from gpufabric_sim.timers import cli
        sys.exit(cli(sys.argv[2:]))
    sys.exit(main())
