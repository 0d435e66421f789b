# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: concern_options
version_added: 0.4.0
author: gpufabric developers (@gpufabric)
short_description: A concern's module options from its role's variables, as the concern's spec derives them
description:
  - Returns, for each concern named, the options its role passes to the concern's module, derived from the role
    variables by the C(options) function of the concern's spec (C(plugins/module_utils/concerns/<name>/spec.py)),
    that is the rails (the role's rails when given, else the netdevs of the RDMA NICs paired with GPUs; DCB and ECN on the
    physical ports of a RoCE LAG rail), the DSCP map (the lossless entry under DSCP trust when none is set), the
    kernel arguments of an IOMMU mode on the host's architecture, and the rest as the role variables say.
  - The one-call drift check (P(gpufabric.node.fabric_check#module)) derives the same options with the same
    functions, so the roles and the check cannot mean different things by one variable.
  - It reads the variables the spec declares (its C(KEYS)) from the calling context, so it is used inside the
    concern's role, and the host's C(ansible_facts.gpufabric) (C(pairing), C(architecture)), or the setup
    module's C(ansible_facts.architecture).
options:
  _terms:
    description: The concerns, each one whose spec has C(options) (cmdline, dcb, rdma_cm, ecn, sysctl, mtu, nccl).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: DCB on every rail
  gpufabric.node.dcb_qos:
    rails: "{{ options.rails }}"
    dscp_map: "{{ options.dscp_map }}"
    pfc_priorities: "{{ options.pfc_priorities }}"
    trust: "{{ options.trust }}"
    dcbx: "{{ options.dcbx }}"
    ets: "{{ options.ets | default(omit) }}"
  vars:
    options: "{{ lookup('gpufabric.node.concern_options', 'dcb') }}"
"""

RETURN = r"""
_raw:
  description: One dictionary of module options per concern named, in the order named.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common, registry


def _facts(templar, variables):
    """The two facts the specs read (the gpufabric facts, setup's architecture), templated alone: not every fact
    of the host on each use of the lookup."""
    facts = variables.get("ansible_facts") or {}
    own = dict(templar.template(facts.get("gpufabric") or {}))
    arch = templar.template(facts.get("architecture"))
    if arch:
        # setup's fact where gathered, else gpufabric_facts' (the same value, platform.machine())
        own["architecture"] = arch
    return own


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        variables = variables or {}
        out = []
        facts = None
        for name in terms:
            spec = registry.BY_NAME.get(name)
            if spec is None or not hasattr(spec, "options"):
                raise AnsibleLookupError("concern_options: %r is not a concern whose role options its spec derives "
                                         "(one of %s)" % (name, ", ".join(s.NAME for s in registry.SPECS
                                                                          if hasattr(s, "options"))))
            missing = [k for k in spec.KEYS if k not in variables]
            if missing:
                raise AnsibleLookupError("concern_options(%s): the role variables %s are not defined here (use the "
                                         "lookup inside the concern's role)" % (name, ", ".join(missing)))
            if facts is None:
                facts = _facts(self._templar, variables)
            d = dict((k, self._templar.template(variables[k])) for k in spec.KEYS)
            try:
                out.append(spec.options(d, facts))
            except (common.DesiredError, KeyError, TypeError, ValueError) as e:
                raise AnsibleLookupError("concern_options(%s): %s" % (name, e))
        return out
