# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tool-output parsers of validate/ and their path verdicts, on outputs quoted in the tools' own repositories,
issues and documentation (tests/fixtures/validate/README.md names each source) and on outputs built from the tools'
format strings (``built-*``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.validate import gds
from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_log
from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_paths
from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_tests
from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths
from ansible_collections.gpufabric.node.plugins.module_utils.validate import perftest

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "validate")
NCCL_FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nccl")
MIB = 1 << 20


def _text(name, where=FIX):
    with open(os.path.join(where, name)) as f:
        return f.read()


# --- perftest -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,test,device,link,gid,unit,rows,size,bw_avg,cuda,state,fallback", [
    # real: perftest#273, --report_gbits, host memory: 0.48 Gb/s = 0.48 * 125e6 B/s
    ("perftest-gbits-host-issue273.txt", "RDMA_Write Post List", "ib0", "Ethernet", 2, "Gb/sec", 1, 8, 0.48 * 125e6,
     None, "fallback", "host_memory"),
    # real: perftest#241, --use_cuda on an A30, the table cut off in the issue: no result
    ("perftest-cuda-header-issue241.txt", "RDMA_Write", "mlx5_0", None, None, None, 0, None, None,
     (0, "NVIDIA A30", False), "not_exercised", None),
    # real: perftest#234, RoCE with GID index 3, the MB/sec header but the row cut off
    ("perftest-roce-header-issue234.txt", "RDMA_Write", "mlx5_0", "Ethernet", 3, "MB/sec", 0, None, None, None,
     "not_exercised", None),
    # built from perftest 26.04's format strings: MiB/sec = 2^20 B/s, Gb/sec = 125e6 B/s
    ("built-perftest-cuda-mib-26.04.txt", "RDMA_Write", "mlx5_0", "Ethernet", 3, "MiB/sec", 2, 1048576,
     46790.07 * MIB, (0, "NVIDIA H200", True), "direct", None),
    ("built-perftest-host-mib-26.04.txt", "RDMA_Write", "mlx5_0", "Ethernet", 3, "MiB/sec", 2, 1048576,
     46941.38 * MIB, None, "fallback", "host_memory"),
    ("built-perftest-cuda-gbits-26.04.txt", "RDMA_Write", "mlx5_0", "Ethernet", 3, "Gb/sec", 1, 1048576,
     392.57 * 125e6, (0, "NVIDIA H200", True), "direct", None),
])
def test_perftest(name, test, device, link, gid, unit, rows, size, bw_avg, cuda, state, fallback):
    p = perftest.parse(_text(name))
    assert (p["test"], p["device"], p["link_type"], p["gid_index"], p["unit"]) == (test, device, link, gid, unit)
    assert (len(p["rows"]), p["size"]) == (rows, size)
    assert p["bw_average"] == (pytest.approx(bw_avg) if bw_avg is not None else None)
    c = p["cuda"]
    assert ((c["device"], c["name"], c["dmabuf"]) if c["used"] else None) == cuda
    v = perftest.verdict(p)
    assert (v["state"], v["fallback"]) == (state, fallback)
    assert v["bandwidth"] == p["bw_average"]


def test_perftest_row_fields_and_gids():
    p = perftest.parse(_text("perftest-gbits-host-issue273.txt"))
    assert p["rows"] == [{"bytes": 8, "iterations": 224958464, "bw_peak": 0.0, "bw_average": 60000000.0,
                          "msg_rate": pytest.approx(7498617.0)}]
    p = perftest.parse(_text("perftest-roce-header-issue234.txt"))
    assert p["gids"] == {"local": "00:00:00:00:00:00:00:00:00:00:255:255:10:255:255:05",
                         "remote": "00:00:00:00:00:00:00:00:00:00:255:255:10:255:255:04"}
    assert p["mtu"] == 4096


def test_perftest_host_run_asked_for_is_a_named_fallback():
    v = perftest.verdict(perftest.parse(_text("built-perftest-host-mib-26.04.txt")), expect_cuda=False)
    assert (v["state"], v["fallback"]) == ("fallback", "host_memory")
    assert "as asked" in v["reason"]


# --- nccl-tests ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,rows,first,avg,oob,max_bw,max_size", [
    # real, NVIDIA/nccl#340: 2.6-era rows without redop/root and a float error column
    ("nccl-tests-2.6-old-format-nccl340.txt", 12,
     (65536, 8192, "float", None, None, 16.57, 1.98e9, 1.98e9, 0, 2.37e9), 6.6972e9, 0, 21.86e9, 134217728),
    # real, nccl-tests#293: current rows with redop and root -1, no footer in the excerpt
    ("nccl-tests-rows-issue293.txt", 10, (8, 2, "float", "sum", -1, 17.59, 0.0, 0.0, 0, 0.0), None, None, 0.18e9,
     4096),
    # real, NVIDIA/nccl#1412: the footer among NCCL INFO lines
    ("nccl-tests-footer-nccl1412.txt", 0, None, 33.3227e9, 0, None, None),
    # built from nccl-tests 2.19.6's format strings
    ("built-allreduce-2nodes-direct-2.30.log", 4,
     (1048576, 262144, "float", "sum", -1, 60.11, 17.44e9, 17.44e9, 0, 17.51e9), 38.4375e9, 0, 47.36e9, 1073741824),
    ("built-allreduce-2nodes-socket-2.30.log", 4,
     (1048576, 262144, "float", "sum", -1, 910.2, 1.15e9, 1.15e9, 0, 1.16e9), 1.6025e9, 0, 1.78e9, 268435456),
])
def test_nccl_tests(name, rows, first, avg, oob, max_bw, max_size):
    p = nccl_tests.parse(_text(name))
    assert len(p["rows"]) == rows
    if first:
        r = p["rows"][0]
        o, i = r["out_of_place"], r["in_place"]
        got = (r["size"], r["count"], r["type"], r["redop"], r["root"], o["time_us"], o["algbw"], o["busbw"],
               o["wrong"], i["busbw"])
        assert got[:5] == first[:5]
        assert got[5:] == pytest.approx(first[5:])
    assert p["avg_busbw"] == (pytest.approx(avg) if avg is not None else None)
    assert p["out_of_bounds"] == oob
    assert p["max_busbw"] == (pytest.approx(max_bw) if max_bw is not None else None)
    assert p["max_busbw_size"] == max_size


def test_nccl_tests_header_and_devices():
    p = nccl_tests.parse(_text("built-allreduce-2nodes-direct-2.30.log"))
    assert (p["version"], p["test"]) == ("2.19.6", "all_reduce_perf")
    assert p["devices"][1] == {"rank": 1, "host": "gpu-b01", "device": 0, "bus": "0000:19:00", "name": "NVIDIA H200"}
    assert p["out_of_bounds_check"] == "OK"


@pytest.mark.parametrize("line,expect", [
    # -c 0: no check, N/A in #wrong
    ("  1048576  262144  float  sum  -1  60.11  17.44  17.44  N/A  59.87  17.51  17.51  N/A",
     (17.44e9, 17.51e9)),
    # trace replay: in-place only
    ("  1048576  262144  float  sum  -1  59.87  17.51  17.51  0", (None, 17.51e9)),
    # broadcast: a root, and %e for a time too wide for its column
    ("  1073741824  268435456  float  none  3  1.2e+05  8.95  8.95  0  1.1e+05  9.76  9.76  0", (8.95e9, 9.76e9)),
    # per-iteration columns (-I 1)
    ("  1048576  262144  float  sum  -1  60.1  17.4  17.4  0  59.0  61.0  62.0  1.2  59.9  17.5  17.5  0  59.0  61.0"
     "  62.0  1.1", (17.4e9, 17.5e9)),
    ("  8  2  float  sum  -1  17.59  0.00", None),
    ("# Avg bus bandwidth    : 6.6972 ", None),
])
def test_nccl_tests_row_variants(line, expect):
    rows = nccl_tests.parse(line)["rows"]
    if expect is None:
        assert rows == []
        return
    (r,) = rows
    got = (r["out_of_place"]["busbw"] if r["out_of_place"] else None, r["in_place"]["busbw"])
    assert got == (pytest.approx(expect[0]) if expect[0] else None, pytest.approx(expect[1]))
    assert r["in_place"]["wrong"] == (None if line.endswith("N/A") else 0)


# --- NCCL INFO log: path verdicts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name,where,net,fallback,reason,evidence,intra", [
    # real, nccl-tests#373: the IBext plugin's channels without /GDRDMA: staged through host memory
    ("nccl-ib-no-gdr-ncclt373.log", FIX, "fallback", "no_gdr", "0 of 3 network channels with /GDRDMA",
     "Channel 00/0 : 2 -> 0 [send] via NET/IBext_v8/1", "not_exercised"),
    # real, NVIDIA/nccl#1453: every network channel /GDRDMA
    ("nccl-ib-gdrdma-nccl1453.log", FIX, "direct", None, "6 of 6 network channels with /GDRDMA",
     "Channel 08/0 : 16 -> 0 [receive] via NET/IBext_v8/7/GDRDMA", "not_exercised"),
    # real, NVIDIA/nccl#1676: the NICs' GDR disabled after the DGX OS upgrade; no channel lines in the excerpt
    ("nccl-gdr-disabled-nccl1676.log", FIX, "unknown", None, "no network and no channel",
     "GPU Direct RDMA Disabled for HCA 2 'mlx5_2'", "not_exercised"),
    # real, NVIDIA/nccl#1773: 8 GPUs of one node over P2P
    ("nccl-p2p-intra-nccl1773.log", FIX, "not_exercised", None, "no network channel (p2p 9)",
     "Connected all rings ... GDR 1", "direct"),
    # real, the device host: one H200, one rank
    ("nccl-1rank-h200.log", NCCL_FIX, "not_exercised", None, "not exercised: one rank", "Using network Socket",
     "not_exercised"),
    # real, the device host through PyTorch (NCCL 2.28.9, tests/fixtures/validate/h200-microvm): one rank as
    # configured, with IB disabled, with NCCL_NET_GDR_LEVEL=LOC; pinned to IB without an IB device the run fails
    ("h200-microvm/nccl-configured.log", FIX, "not_exercised", None, "not exercised: one rank",
     "GPU Direct RDMA Disabled for HCA 0 'eth0'", "not_exercised"),
    ("h200-microvm/nccl-ib-disabled.log", FIX, "not_exercised", None, "one rank",
     "NCCL_IB_DISABLE set by environment to 1", "not_exercised"),
    ("h200-microvm/nccl-gdr-loc.log", FIX, "not_exercised", None, "one rank", "Using network Socket",
     "not_exercised"),
    ("h200-microvm/nccl-pinned-ib.log", FIX, "not_exercised", None,
     "NCCL could not initialize any network: NET/IB : No device found.", "Failed to initialize any NET plugin",
     "not_exercised"),
    # built from NCCL 2.30.7's format strings: the configured run and both forced fallbacks
    ("built-allreduce-2nodes-direct-2.30.log", FIX, "direct", None, "4 of 4 network channels with /GDRDMA",
     "Channel 00/0 : 0 -> 1 [send] via NET/IB/0/GDRDMA", "not_exercised"),
    ("built-allreduce-2nodes-gdr-loc-2.30.log", FIX, "fallback", "no_gdr", "0 of 4 network channels with /GDRDMA",
     "NCCL_NET_GDR_LEVEL set by environment to LOC", "not_exercised"),
    ("built-allreduce-2nodes-socket-2.30.log", FIX, "fallback", "socket", "4 over NET/Socket",
     "NCCL_IB_DISABLE set by environment to 1", "not_exercised"),
    ("built-intra-node-2.21.log", NCCL_FIX, "not_exercised", None, "no network channel", "Using network IB",
     "fallback"),
])
def test_nccl_path_verdicts(name, where, net, fallback, reason, evidence, intra):
    p = nccl_log.parse(_text(name, where))
    v = nccl_paths.network_verdict(p)
    assert (v["state"], v["fallback"]) == (net, fallback)
    assert reason in v["reason"]
    assert evidence in v["evidence"]
    assert nccl_paths.intra_node_verdict(p)["state"] == intra


def test_forced_fallback_flips_the_verdict_and_drops_the_bandwidth():
    """The negative test the playbook runs: the same all_reduce once as configured and once forced off the direct
    path; the verdict flips and busbw drops."""
    runs = {}
    for name in ("built-allreduce-2nodes-direct-2.30.log", "built-allreduce-2nodes-gdr-loc-2.30.log",
                 "built-allreduce-2nodes-socket-2.30.log"):
        text = _text(name)
        runs[name] = nccl_paths.network_verdict(nccl_log.parse(text), nccl_tests.parse(text)["max_busbw"])
    direct, loc, sock = (runs[n] for n in sorted(runs))
    assert paths.label(direct) == "direct"
    assert paths.label(loc) == "fallback: no gdr" and paths.label(sock) == "fallback: socket"
    assert direct["bandwidth"] > loc["bandwidth"] > sock["bandwidth"]


def test_nccl_log_extensions():
    p = nccl_log.parse(_text("nccl-ib-no-gdr-ncclt373.log"))
    assert [d["name"] for d in p["net_devices"]] == ["mlx5_2", "mlx5_3", "mlx5_0", "mlx5_1"]
    assert p["net_devices"][0] == {"net": "IB", "index": 0, "name": "mlx5_2", "port": 1, "link": "RoCE"}
    assert p["env"] == {"NCCL_P2P_LEVEL": "LOC"}
    p = nccl_log.parse(_text("built-allreduce-2nodes-gdr-loc-2.30.log"))
    assert (p["ring_gdr"], p["nvls"]) == (False, {"supported": False, "channels": 0})
    p = nccl_log.parse(_text("nccl-p2p-intra-nccl1773.log"))
    assert p["ring_gdr"] is True
    p = nccl_log.parse("h:1:1 [0] NCCL INFO 16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p "
                       "channels, 2 p2p channels per peer\nh:1:1 [0] NCCL INFO NVLS multicast support is available "
                       "on dev 0\n")
    assert p["nvls"] == {"supported": True, "channels": 16}
    assert nccl_paths.intra_node_verdict(p)["state"] == "direct"


# --- gdsio and KvikIO ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,index,io,xfer,cls,tp_gib,done,verified", [
    ("gdsio-forum-346097.txt", 0, "READ", "GPUD", "gpu_direct", 6.622534, 104837120, False),
    ("gdsio-forum-346097.txt", 1, "READ", "CPU_GPU", "host_bounce", 6.573733, 104739840, False),
    ("gdsio-forum-346097.txt", 2, "READ", "CPUONLY", "host_only", 6.478798, 104857600, False),
    ("gdsio-gpud-getting-started-docs.txt", 0, "WRITE", "GPUD", "gpu_direct", 0.001081, 8, False),
    ("gdsio-nvme-verify-docs.txt", 1, "READ", "CPUONLY", "host_only", 2.698050, 4069376, True),
])
def test_gdsio_lines(name, index, io, xfer, cls, tp_gib, done, verified):
    r = gds.parse_gdsio(_text(name))["runs"][index]
    assert (r["io_type"], r["xfer_type"], r["xfer_class"], r["verified"]) == (io, xfer, cls, verified)
    assert r["throughput"] == pytest.approx(tp_gib * (1 << 30))
    assert r["done_bytes"] == done * 1024


@pytest.mark.parametrize("index,delta,loaded,state,fallback,reason", [
    (0, {"reads": 102380, "writes": 0}, True, "direct", None, "reads +102380"),
    (0, {"reads": 0, "writes": 0}, True, "fallback", "host_memory", "did not move"),
    (0, None, True, "unknown", None, "compat mode cannot be excluded"),
    (0, None, False, "fallback", "host_memory", "nvidia-fs is not loaded"),
    (1, None, True, "fallback", "host_memory", "host bounce buffer"),
    (2, None, True, "fallback", "host_memory", "CPUONLY"),
])
def test_gdsio_verdicts(index, delta, loaded, state, fallback, reason):
    run = gds.parse_gdsio(_text("gdsio-forum-346097.txt"))["runs"][index]
    v = gds.gdsio_verdict(run, delta, loaded)
    assert (v["state"], v["fallback"]) == (state, fallback)
    assert reason in v["reason"]


def test_gdsio_without_a_summary():
    v = gds.gdsio_verdict(None, nvfs_loaded=False, compat_mode=False)
    assert (v["state"], v["reason"]) == ("not_exercised", "GDS unavailable: nvidia-fs not loaded")
    assert gds.gdsio_verdict(None)["state"] == "not_exercised"
    assert gds.parse_gdsio("Verifying data\nData Verification Failed\n")["verify_failed"] is True


KVIKIO_COMPAT = "\n".join([
    "Roundtrip benchmark", "-" * 34, "!" * 34, "   WARNING - KvikIO compat mode   ", "      libcufile.so not used       ",
    "!" * 34, "GPU               | NVIDIA H200 (dev #0)", "libcufile version | 1.15",
    "GDS driver        | N/A (Compatibility Mode)", "=" * 34,
    u"cufile read       |   1.53 GiB/s \u00b1 2.31 % (1.50 GiB/s, 1.57 GiB/s)", "cufile write      | 900.12 MiB/s", ""])


@pytest.mark.parametrize("text,api,direction,delta,state,fallback,bw", [
    (_text("kvikio-bench-kvikio508.txt"), "cufile", "read", None, "unknown", None, 901.62 * MIB),
    (_text("kvikio-bench-kvikio508.txt"), "cufile", "read", {"reads": 10}, "direct", None, 901.62 * MIB),
    (_text("kvikio-bench-kvikio508.txt"), "cufile", "write", {"writes": 0}, "fallback", "host_memory",
     634.03 * MIB),
    (_text("kvikio-bench-kvikio508.txt"), "posix", "read", None, "fallback", "host_memory", 799.14 * MIB),
    (KVIKIO_COMPAT, "cufile", "read", None, "fallback", "host_memory", 1.53 * (1 << 30)),
    (KVIKIO_COMPAT, "zarr", "read", None, "not_exercised", None, None),
])
def test_kvikio(text, api, direction, delta, state, fallback, bw):
    p = gds.parse_kvikio(text)
    v = gds.kvikio_verdict(p, api, direction, delta)
    assert (v["state"], v["fallback"]) == (state, fallback)
    assert v["bandwidth"] == (pytest.approx(bw) if bw else None)


def test_kvikio_fields():
    p = gds.parse_kvikio(_text("kvikio-bench-kvikio508.txt"))
    assert (p["gds_driver"], p["compat"], p["info"]["nthreads"]) == ("v2.23", None, "1")
    assert [(r["api"], r["direction"]) for r in p["results"]] == [("cufile", "read"), ("cufile", "write"),
                                                                  ("posix", "read"), ("posix", "write")]
    p = gds.parse_kvikio(KVIKIO_COMPAT)
    assert (p["compat"], p["results"][0]["stdev_pct"]) == ("kvikio", 2.31)


# --- the verdict shape --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,error", [
    (("x", "maybe", "r"), "not one of"),
    (("x", "fallback", "r"), "names its fallback"),
    (("x", "direct", "r", "socket"), "names its fallback"),
    (("x", "fallback", "r", "carrier_pigeon"), "not one of"),
])
def test_verdict_shape_is_checked(args, error):
    with pytest.raises(ValueError, match=error):
        paths.verdict(*args)


def test_evidence_is_bounded_and_rates_are_decimal():
    v = paths.verdict("x", "direct", "r", evidence=["l%d" % i for i in range(30)])
    assert len(v["evidence"]) == paths.MAX_EVIDENCE and v["evidence"][-1] == "... and 19 more"
    assert [paths.rate(x) for x in (None, 12.5e9, 3e6, 999)] == ["n/a", "12.50 GB/s", "3.00 MB/s", "999 B/s"]


@pytest.mark.parametrize("lines,key,expect", [
    (["Connected all rings, use ring PXN 0 GDR 1", "Connected all rings, use ring PXN 1 GDR 0"], "ring_gdr", False),
    (["Connected all rings, use ring PXN 0 GDR 0", "Connected all rings, use ring PXN 0 GDR 1"], "ring_gdr", False),
    (["Connected all rings, use ring PXN 1 GDR 1"], "ring_gdr", True),
    (["NCCL_IB_DISABLE set by environment to 1.", "NCCL_NET_GDR_LEVEL set by environment to PHB"], "env",
     {"NCCL_IB_DISABLE": "1", "NCCL_NET_GDR_LEVEL": "PHB"}),
    (["NET/Socket : Using [0]eth0:10.0.0.1<0>"], "net_devices", []),
    # a rail and plane suffix (2.2x), a SHARP plugin suffix, and a repeated line counted once
    (["NET/IB : Using [0]mlx5_0:1:0/RoCE [1]mlx5_1:1::2/IB/SHARP [RO]; OOB eth0:10.0.0.1<0>",
      "NET/IB : Using [0]mlx5_0:1:0/RoCE; OOB eth0:10.0.0.1<0>"], "net_devices",
     [{"net": "IB", "index": 0, "name": "mlx5_0", "port": 1, "link": "RoCE"},
      {"net": "IB", "index": 1, "name": "mlx5_1", "port": 1, "link": "IB"}]),
    (["4 coll channels, 4 collnet channels, 0 nvls channels, 4 p2p channels, 2 p2p channels per peer",
      "32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 2 p2p channels per peer"], "nvls",
     {"supported": None, "channels": 16}),
    (["NVLS multicast support is not available on dev 3"], "nvls", {"supported": False, "channels": None}),
])
def test_nccl_log_extension_lines(lines, key, expect):
    p = nccl_log.parse("".join("h:1:1 [0] NCCL INFO %s\n" % line for line in lines))
    assert p[key] == expect
    assert p["info_lines"] == len(lines) and p["channels"] == []


def test_patterns_are_linear_by_construction():
    """The validate parsers read output a user's job wrote: no pattern nests a repetition in another or repeats
    lazily (the structural check of test_nccl_log), so a long line costs time linear in its length."""
    try:
        from re import _parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover
        import sre_parse
    from test_nccl_log import _repeats
    seen = 0
    for mod in (perftest, nccl_tests, gds, nccl_log):
        for name, pat in vars(mod).items():
            if hasattr(pat, "pattern") and hasattr(pat, "fullmatch"):
                seen += 1
                assert _repeats(sre_parse.parse(pat.pattern)) == (False, False), "%s.%s" % (mod.__name__, name)
    assert seen >= 25


@pytest.mark.parametrize("token,ok", [("1" * 5000 + "x", False), ("6.6972", True), ("1.2e+05", True),
                                      ("-1", True), (".5", True), ("N/A", False), ("1.2.3", False)])
def test_number_tokens(token, ok):
    assert nccl_tests._num(token) is ok
