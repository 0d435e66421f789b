# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The desired state of the one-call check: the role variables each concern reads, gathered from the specs.

The desired state of a node is one document keyed by role variable name: the roles' defaults
(``roles/*/defaults/main.yml``) overlaid with the inventory's variables and templated once on the controller (the
``fabric_check`` action plugin), plus the constant tables of the roles' ``vars/main.yml`` that their tasks read
(``__iommu_mode_args``, ``__iommu_arch_map``, the no-rails messages). Nothing here holds a default of its own: a key
missing from the document is an error (``node_check.evaluate``).

What a role variable means (the rails a role takes, the DSCP map it derives, the options of its module) is each
concern's spec (``concerns/<name>/spec.py``, listed in ``concerns/registry.py``); this hub only gathers, in
registry order: ``KEYS`` (per concern), ``CONFLICT_KEYS`` and ``conflict_vars`` (the contradiction check that runs
before any role), ``ROLE_VARS`` (per role) and ``evidence_desired`` (the document the evidence timer evaluates).
The roles take their module options from the same specs (the ``concern_options`` lookup); the equivalence test of
the one-call check holds the two paths to one answer.

Plain Python: no Ansible imports (the evidence timer runs it on the node).
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common, registry

DesiredError = common.DesiredError


def _ordered_union(tuples):
    out = []
    for t in tuples:
        out.extend(k for k in t if k not in out)
    return tuple(out)


# the role variables (and role vars tables) each concern's check reads
KEYS = dict((s.NAME, tuple(s.KEYS)) for s in registry.SPECS)
# what the contradiction check (before any role runs) reads: each spec's CONFLICT_KEYS, in registry order
CONFLICT_KEYS = _ordered_union(getattr(s, "CONFLICT_KEYS", ()) for s in registry.SPECS)
# the constant tables and messages of roles/<role>/vars/main.yml the checks read (no Jinja in them), per role
ROLE_VARS = {}
for _s in registry.SPECS:
    if getattr(_s, "ROLE_VARS", ()):
        _role = model.CONCERNS[model.NAMES.index(_s.NAME)]["role"]
        ROLE_VARS[_role] = _ordered_union([ROLE_VARS.get(_role, ()), _s.ROLE_VARS])
del _s


def evidence_desired(d):
    """The desired state the evidence timer evaluates on the node (fabric_persist's ``evidence_desired``): the keys
    of ``d`` the check of the core concerns reads (``CONFLICT_KEYS`` and ``KEYS``), nothing else. Derived the same
    way on the controller (the fabric_persist action) and on the node (its own persistence check), so the
    document installed and the one compared are the same."""
    keys = list(CONFLICT_KEYS)
    for names in KEYS.values():
        keys.extend(k for k in names if k not in keys)
    missing = [k for k in keys if k not in d]
    if missing:
        raise DesiredError("the desired state lacks %s" % ", ".join(missing))
    return dict((k, d[k]) for k in keys)


def conflict_vars(d):
    """The role variables the contradiction check reads (``contradictions.from_role_vars``), each as its concern's
    spec derives it (``conflict_vars``) or as given."""
    out = dict((k, d[k]) for k in CONFLICT_KEYS)
    for s in registry.SPECS:
        if hasattr(s, "conflict_vars"):
            out.update(s.conflict_vars(d))
    return out
