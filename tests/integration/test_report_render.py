# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's HTML of a 2-node simulated fleet, opened in headless Chromium (Debian package ``chromium``).

The facts are discovered from simulated node trees (hgx-h200 and pcie-4gpu-crossnuma); the page must render to a
non-trivial screenshot without console errors. A canary page with a console error proves the detection works.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
for p in (os.path.join(REPO, ".build"), os.path.join(REPO, "tests", "lab")):
    if p not in sys.path:
        sys.path.insert(0, p)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--hide-scrollbars"]
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)$", re.M)


def screenshot(html_path, png_path, profile, size="1500,2600"):
    argv = [CHROMIUM] + FLAGS + ["--user-data-dir=%s" % profile, "--window-size=%s" % size,
                                 "--screenshot=%s" % png_path, "file://%s" % html_path]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120, check=False)
    return p.returncode, p.stdout + p.stderr


def png_pixels(path):
    """(width, height, decompressed scanlines) of a PNG, read with the standard library."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def fleet_html(tmp_path):
    from ansible_collections.gpufabric.node.plugins.module_utils import fleet_report as fr
    from ansible_collections.gpufabric.node.plugins.module_utils import topology
    from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot
    from gpufabric_sim import topology as sim_topology
    from gpufabric_sim import tree
    nodes = {}
    for i, (host, topo) in enumerate((("hgx-a", "hgx-h200"), ("pcie-b", "pcie-4gpu-crossnuma")), 1):
        root = str(tmp_path / host)
        os.makedirs(root)
        tree.build_tree(root, sim_topology.load(topo), i)
        nodes[host] = {"facts": topology.discover(Sysroot(root), ["all"])}
    nodes["hgx-a"].update(drift=[], gds={"ok": True, "reasons": [
        "rpcrdma hooked into nvidia-fs", "test transfer moved data with compat mode off"]})
    nodes["pcie-b"].update(drift=[{"concern": "dcb", "object": "ens2np0", "key": "pfc", "current": [],
                                   "desired": [3]},
                                  {"concern": "sysctl", "object": "ens1np0", "key": "arp_ignore", "current": 0,
                                   "desired": 1}],
                           gds={"ok": False, "reasons": ["IOMMU in translated mode: DMA chunks 4096 != 1, EIO"]})
    previous = fr.build(dict(nodes, **{"pcie-b": dict(nodes["pcie-b"], drift=[])}))
    rep = fr.build(nodes, previous, title="gpufabric fleet report (simulated)", generated="2024-06-01T12:00:00Z")
    path = str(tmp_path / "fleet-report.html")
    with open(path, "w") as f:
        f.write(fr.to_html(rep))
    return path


def test_canary_console_error_is_detected(tmp_path):
    page = tmp_path / "canary.html"
    page.write_text('<!DOCTYPE html><html><body><p>x</p><script>console.error("canary-broken")</script></body></html>')
    rc, log = screenshot(str(page), str(tmp_path / "c.png"), str(tmp_path / "profile"), size="400,300")
    assert rc == 0, log[-3000:]
    assert any("canary-broken" in m for m in CONSOLE.findall(log)), log[-3000:]


def test_fleet_report_renders(tmp_path):
    html = fleet_html(tmp_path)
    png = str(tmp_path / "fleet-report.png")
    rc, log = screenshot(html, png, str(tmp_path / "profile"))
    assert rc == 0, log[-3000:]
    assert CONSOLE.findall(log) == [], "console messages: %s" % CONSOLE.findall(log)
    assert os.path.getsize(png) > 50000, "screenshot suspiciously small"
    width, height, raw = png_pixels(png)
    assert (width, height) == (1500, 2600)
    assert len(set(raw[:1 << 20])) > 40, "screenshot looks like one colour"
    out = os.environ.get("GPUFABRIC_REPORT_SCREENSHOT")
    if out:
        shutil.copyfile(png, out)
