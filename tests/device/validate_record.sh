#!/usr/bin/env bash
# Record, on the GPU host, the raw outputs issue 24's parsers and verdicts are tested on (run there, not in CI):
#   tests/device/validate_record.sh OUT_DIR
# - which validation tools the host has (perftest, nccl-tests, gdsio, kvikio) and their versions;
# - an NCCL single-rank all-reduce through PyTorch with NCCL_DEBUG=INFO: as configured, pinned to IB
#   (NCCL_NET=IB: on a host without an RDMA NIC this must fail, not fall back), and with IB disabled;
# - nvidia-smi's NVLink status and topology matrix (the fabric_manager concern's parser).
set -uo pipefail
out=${1:?usage: validate_record.sh OUT_DIR}
mkdir -p "$out"
{
  for t in ib_write_bw ib_read_bw all_reduce_perf gdsio nvidia-smi ibv_devinfo dcb nvidia-fabricmanager; do
    printf '%s: %s\n' "$t" "$(command -v "$t" || echo missing)"
  done
  python3 - <<'PY'
import importlib
for m in ("torch", "kvikio", "cupy"):
    try:
        mod = importlib.import_module(m)
        print("python %s: %s" % (m, getattr(mod, "__version__", "?")))
    except Exception as e:  # noqa: BLE001 - a record of what is there
        print("python %s: missing (%s)" % (m, type(e).__name__))
try:
    import torch
    print("torch cuda:", torch.version.cuda, "nccl:", ".".join(map(str, torch.cuda.nccl.version())),
          "gpus:", torch.cuda.device_count())
except Exception as e:  # noqa: BLE001
    print("torch probe failed:", e)
PY
  find /usr/local/cuda*/gds/tools -maxdepth 1 2>/dev/null | head -20
  find / -xdev -name 'libcufile*.so*' 2>/dev/null | head -5
  uname -r
} > "$out/tools.txt" 2>&1

cat > /tmp/nccl_one.py <<'PY'
import os, sys, torch, torch.distributed as dist
dist.init_process_group("nccl", init_method="file:///tmp/nccl-store-%s" % os.getpid(), rank=0, world_size=1)
x = torch.ones(64 * 1024 * 1024 // 4, device="cuda:0")
for _ in range(3):
    dist.all_reduce(x)
torch.cuda.synchronize()
print("all_reduce ok, x[0] =", float(x[0]))
dist.destroy_process_group()
PY
run_nccl() {  # name, env...
  local name=$1; shift
  env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV,P2P "$@" timeout 240 python3 /tmp/nccl_one.py \
    > "$out/nccl-$name.log" 2>&1
  echo "nccl $name rc=$?" >> "$out/summary.txt"
}
run_nccl configured
run_nccl pinned-ib NCCL_NET=IB
run_nccl ib-disabled NCCL_IB_DISABLE=1
run_nccl gdr-loc NCCL_NET_GDR_LEVEL=LOC

nvidia-smi nvlink -s > "$out/nvidia-smi-nvlink-s.txt" 2>&1; echo "nvlink -s rc=$?" >> "$out/summary.txt"
nvidia-smi nvlink --status > "$out/nvidia-smi-nvlink-status.txt" 2>&1; echo "nvlink --status rc=$?" >> "$out/summary.txt"
nvidia-smi topo -m > "$out/nvidia-smi-topo-m.txt" 2>&1; echo "topo -m rc=$?" >> "$out/summary.txt"
nvidia-smi -q | head -60 > "$out/nvidia-smi-q-head.txt" 2>&1
cat "$out/summary.txt"
