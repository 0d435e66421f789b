# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report at 1,000 and 10,000 nodes (issue 23 item 3): not a test, a measurement.

usage: PYTHONPATH=.build:tests/lab python tests/bench/report_scaling.py [--sizes 1000,10000] [--bad 3] [--reps 3]
                                                                       [--chromium]
Every node carries the gpufabric facts discovered from one simulated hgx-h200 tree (8 GPUs, 8 RoCE rails, 16 ACS
path bridges; IOMMU in pass-through as on a provisioned node) and a status for every core concern; ``--bad`` nodes,
spread over the fleet, have a concern in drift (one with an error). Prints, per size, the seconds to build the model
(``fleet.build``), to render the HTML, JSON and Markdown, the sizes of the three files, and where the first problem
nodes sit in the page (their rows must come first, each with its section). Medians of ``--reps`` runs. With
``--chromium``, also the seconds headless Chromium takes to load, lay out and screenshot the page, and the same for
an empty page (the browser's own start), medians of ``--reps`` runs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.join(HERE, "..", "lab"), os.path.join(HERE, "..", "..", ".build")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm  # noqa: E402
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology  # noqa: E402
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot  # noqa: E402
from ansible_collections.gpufabric.node.plugins.module_utils.report import fleet as fr  # noqa: E402


def node_facts(topo="hgx-h200"):
    from gpufabric_sim import topology as sim_topology
    from gpufabric_sim import tree
    root = tempfile.mkdtemp(prefix="gpufabric-report-bench-")
    try:
        tree.build_tree(root, sim_topology.load(topo), 1)
        facts = topology.discover(Sysroot(root), ["all"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    facts["iommu"]["mode"] = "passthrough"  # a provisioned node: no data-path warning
    return facts


def fleet(size, bad, facts):
    """{host: node data}: every core concern ok, ``bad`` nodes spread over the fleet with drift (the last one an
    error), every 7th node with routing not applicable."""
    bad_at = set(int((i + 0.5) * size / bad) for i in range(bad)) if bad else set()
    nodes = {}
    for i in range(size):
        concerns = dict((n, cm.status(cm.OK)) for n in cm.CORE)
        if i % 7 == 0:
            concerns["routing"] = cm.status(cm.NOT_APPLICABLE, "routing is turned off (rail_network_routing: false)")
        if i in bad_at:
            concerns["dcb"] = cm.status(cm.DRIFT, "1 item(s) differ", [
                {"concern": "dcb", "object": "ens1np0", "key": "pfc", "current": [], "desired": [3]}])
            if i == max(bad_at):
                concerns["nccl"] = cm.status(cm.ERROR, "nccl_config: cannot write /etc/nccl.conf")
        nodes["gpu-%05d" % i] = {"facts": facts, "concerns": concerns}
    return nodes, sorted("gpu-%05d" % i for i in bad_at)


def chromium_s(html, reps):
    """Median seconds of headless Chromium loading ``html`` and taking a 1400x1800 screenshot."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    work = tempfile.mkdtemp(prefix="gpufabric-report-bench-")
    try:
        page = os.path.join(work, "page.html")
        with open(page, "w") as f:
            f.write(html)
        out = []
        for i in range(reps):
            argv = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                    "--user-data-dir=%s" % os.path.join(work, "profile%d" % i), "--window-size=1400,1800",
                    "--screenshot=%s" % os.path.join(work, "shot.png"), "file://" + page]
            t0 = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=True)
            out.append(time.perf_counter() - t0)
        return round(statistics.median(out), 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(size, bad, reps, facts, browser=False):
    nodes, bad_hosts = fleet(size, bad, facts)
    scope = {"pattern": "all", "inventory_hosts": sorted(nodes), "limit": None}
    times = {"build_s": [], "html_s": [], "json_s": [], "markdown_s": []}
    for _rep in range(reps):
        t0 = time.perf_counter()
        rep = fr.build(nodes, generated="2026-12-05T00:00:00Z", scope=scope)
        t1 = time.perf_counter()
        html = fr.to_html(rep)
        t2 = time.perf_counter()
        text = fr.to_json(rep)
        t3 = time.perf_counter()
        md = fr.to_markdown(rep)
        t4 = time.perf_counter()
        for key, value in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            value = round(value, 3)
            times[key].append(value)
    rows = [html.index('id="node-%s"' % h) if 'id="node-%s"' % h in html else -1 for h in bad_hosts]
    order = [html.index('href="#node-%s"' % h) for h in sorted(nodes)]
    out = dict((k, statistics.median(v)) for k, v in times.items())
    out.update(
        nodes=size, bad=bad,
        render_s=round(out["build_s"] + out["html_s"], 3),
        html_mb=round(len(html.encode("utf-8")) / 1e6, 2),
        json_mb=round(len(text.encode("utf-8")) / 1e6, 2),
        markdown_mb=round(len(md.encode("utf-8")) / 1e6, 2),
        bad_rows_first=sorted(order)[:bad] == sorted(html.index('href="#node-%s"' % h) for h in bad_hosts),
        bad_sections_shown=all(r >= 0 for r in rows),
    )
    if browser:
        out["chromium_s"] = chromium_s(html, reps)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--bad", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--chromium", action="store_true", help="also time headless Chromium on each page")
    args = ap.parse_args(argv)
    facts = node_facts()
    out = {"loadavg_start": os.getloadavg()}
    if args.chromium:
        out["chromium_empty_page_s"] = chromium_s("<!DOCTYPE html><title>empty</title>", args.reps)
    out["results"] = [measure(int(n), args.bad, args.reps, facts, args.chromium) for n in args.sizes.split(",")]
    out["loadavg_end"] = os.getloadavg()
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
