# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time one collection module on the host it runs on (inside a simulated node: gpufabric_sim exec).

usage: python module_timer.py MODULE ARGS_JSON [--check]
Runs plugins/modules/MODULE.py the way AnsiballZ does (fresh interpreter, args file, __main__), with its JSON
result swallowed, and prints {"module", "import_s", "run_s", "changed", "failed"}: import_s = importing
AnsibleModule and the module's module_utils, run_s = main() (argument parsing, reading, planning, writing).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import sys
import tempfile
import time


def main(argv):
    name, args = argv[1], json.loads(argv[2])
    args["_ansible_check_mode"] = "--check" in argv[3:]
    args["_ansible_diff"] = True
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
    t0 = time.perf_counter()
    import importlib
    mod = importlib.import_module("ansible_collections.gpufabric.node.plugins.modules." + name)
    t1 = time.perf_counter()
    sys.argv = [name, path]
    real_stdout = sys.stdout
    buf = io.StringIO()
    sys.stdout = buf
    try:
        mod.main()
    except SystemExit:
        pass
    finally:
        sys.stdout = real_stdout
        os.unlink(path)
    t2 = time.perf_counter()
    try:
        res = json.loads(buf.getvalue())
    except ValueError:
        res = {"failed": True, "msg": buf.getvalue()[-500:]}
    print(json.dumps({"module": name, "import_s": round(t1 - t0, 4), "run_s": round(t2 - t1, 4),
                      "changed": bool(res.get("changed")), "failed": bool(res.get("failed")),
                      "msg": res.get("msg") if res.get("failed") else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
