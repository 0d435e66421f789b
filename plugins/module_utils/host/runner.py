# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one command runner: every command the collection runs, from a module, the one-call check, the boot-time
applier or the evidence timer, goes through ``CommandRunner``.

Shaped after community.general's ``CmdRunner``: a runner is made once around what runs commands (its *backend*) and
then called with an argument list. It

- looks the program up with the backend's ``get_bin_path`` (an absolute ``argv[0]`` is kept as it is), and answers
  ``127`` with a reason when it is not installed, or fails the way the backend fails when the runner was made with
  ``required=True``;
- runs it in the C locale (``C_LOCALE``, then the runner's and the call's own ``environ_update``): the collection
  parses what tools print, and a translated message or a decimal comma would change what it reads;
- never uses a shell: the backend gets a list.

The backend is an ``AnsibleModule`` (a module, or the ``fabric_check`` module for the one-call check), a
``task_host.TaskModule`` (a concern's body run inside another module) or ``LocalBackend`` (code that runs on the node
without Ansible: the applier, the evidence timer, unit tests). Each has ``get_bin_path(name, required, opt_dirs)``
and ``run_command(args, environ_update, check_rc, data)`` with AnsibleModule's meaning.

``tests/unit/plugins/test_command_runner.py`` fails on any other place in ``plugins/`` that sets the locale or calls
``run_command`` itself.

Plain Python: no Ansible imports (the node payload runs it). This file is private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

from ansible_collections.gpufabric.node.plugins.module_utils.argspec import get_bin_path as _get_bin_path

# what every command runs with: messages untranslated, numbers and dates in the C format
C_LOCALE = {"LC_ALL": "C", "LANG": "C"}
RC_NOT_FOUND = 127
# shell scripts (``sh -c SCRIPT``) that only read: a read-only evaluation (check/node_check.SnapshotRunner) may answer
# the same command from its first run; a concern registers its own with read_only_script()
READ_ONLY_SCRIPTS = set()


def read_only_script(script):
    """Register ``script`` (the text after ``sh -c``) as one that reads and changes nothing; returns it."""
    READ_ONLY_SCRIPTS.add(script)
    return script


def runs_read_only_script(argv):
    """True when ``argv`` runs a registered read-only script with ``sh -c`` (directly or through ``env``)."""
    for i, a in enumerate(argv[:-1]):
        if a == "-c" and i > 0 and os.path.basename(argv[i - 1]) in ("sh", "dash", "bash"):
            return argv[i + 1] in READ_ONLY_SCRIPTS
    return False


class CommandFailed(Exception):
    """A ``check_rc`` run that failed on a ``LocalBackend``: ``result`` is what AnsibleModule would have failed with."""

    def __init__(self, result):
        Exception.__init__(self, result.get("msg") or "failed")
        self.result = result


class LocalBackend(object):
    """``get_bin_path`` and ``run_command`` for code that runs without Ansible: ``subprocess`` with an argument list,
    stdin closed unless ``data`` is given, output decoded as UTF-8 (undecodable bytes replaced)."""

    def __init__(self, path=None):
        self.path = path

    def get_bin_path(self, name, required=False, opt_dirs=None):
        try:
            return _get_bin_path(name, opt_dirs=opt_dirs or [], path=self.path)
        except ValueError as e:
            if required:
                raise CommandFailed({"msg": str(e), "failed": True})
            return None

    def run_command(self, args, environ_update=None, check_rc=False, data=None, **_kw):
        env = dict(os.environ)
        env.update(environ_update or {})
        argv = [str(a) for a in args]
        try:
            p = subprocess.Popen(argv, stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        except OSError as e:
            if check_rc:
                raise CommandFailed({"msg": "%s: %s" % (argv[0], e), "failed": True, "rc": 126})
            return 126, "", "%s: %s" % (argv[0], e)
        out, err = p.communicate(None if data is None else data.encode("utf-8"))
        out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        if check_rc and p.returncode != 0:
            raise CommandFailed({"msg": "%s failed (rc=%d)" % (" ".join(argv), p.returncode), "failed": True,
                                 "rc": p.returncode, "stdout": out, "stderr": err})
        return p.returncode, out, err


class CommandRunner(object):
    """``run(argv) -> (rc, stdout, stderr)`` over ``backend`` (see the file's doc).

    ``environ_update``: added to every command's environment after the C locale. ``required``: a program that is
    not installed fails through the backend's ``get_bin_path(required=True)`` instead of answering 127.
    ``opt_dirs``: searched before ``PATH``. Binaries are looked up once per runner.
    """

    def __init__(self, backend, environ_update=None, required=False, opt_dirs=None):
        self.backend = backend
        self.environ_update = dict(environ_update or {})
        self.required = required
        self.opt_dirs = list(opt_dirs or [])
        self._bins = {}

    def bin_path(self, name, required=None):
        """The program's path, or None (``required``: fail through the backend instead)."""
        required = self.required if required is None else required
        if os.path.isabs(name):
            return name
        if self._bins.get(name) is None:
            self._bins[name] = self.backend.get_bin_path(name, required=required, opt_dirs=self.opt_dirs)
        return self._bins[name]

    def environ(self, environ_update=None):
        """The environment additions of one command: the C locale, the runner's, the call's."""
        env = dict(C_LOCALE)
        env.update(self.environ_update)
        env.update(environ_update or {})
        return env

    def __call__(self, argv, env=None, data=None, check_rc=False):
        """(rc, stdout, stderr) of ``argv``; ``env``: this command's own environment additions."""
        argv = [str(a) for a in argv]
        exe = self.bin_path(argv[0])
        if exe is None:
            return RC_NOT_FOUND, "", "%s: command not found in PATH" % argv[0]
        kw = {"environ_update": self.environ(env)}
        if check_rc:
            kw["check_rc"] = True
        if data is not None:
            kw["data"] = data
        return self.backend.run_command([exe] + argv[1:], **kw)

    run = __call__


def local(environ_update=None, path=None):
    """A runner for code without Ansible (the applier, the evidence timer): ``LocalBackend`` on ``path`` (default:
    the process's PATH)."""
    return CommandRunner(LocalBackend(path=path), environ_update=environ_update)
