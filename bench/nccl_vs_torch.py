#!/usr/bin/env python3
"""torch.distributed's NCCL collectives on the sizes verlctl's NCCL probes swept, and the ratios.

Usage: nccl_vs_torch.py REPORT.json
REPORT.json is `verlctl probe -o json` with nccl_intra / nccl_inter rows (their data.sweep). This
runs the same collectives with torch.distributed (backend nccl, one process: world 1, this
machine's GPU 0; so the probe rows it compares with must also be one rank) the way the probe
times them: float32 sum, 5 warm-up and 20 timed launches back to back, wall clock ended by
cudaDeviceSynchronize, out of place where torch allows (all_reduce is in place in torch).
algbw = size / time with the probe's size (all_reduce: the buffer; all_gather, reduce_scatter:
the gathered / sent buffer), and verlctl / torch per size (1.00 = the same rate).
"""
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def torch_time_us(op, nbytes, dev, warmup=5, iters=20):
    count = nbytes // 4  # float32 elements, the probe's size (n = 1: per rank = all)
    if op == "all_reduce":
        buf = torch.ones(count, dtype=torch.float32, device=dev)
        fn = lambda: dist.all_reduce(buf)
    elif op == "all_gather":
        src = torch.ones(count, dtype=torch.float32, device=dev)
        dst = torch.empty(count, dtype=torch.float32, device=dev)
        fn = lambda: dist.all_gather_into_tensor(dst, src)
    else:
        src = torch.ones(count, dtype=torch.float32, device=dev)
        dst = torch.empty(count, dtype=torch.float32, device=dev)
        fn = lambda: dist.reduce_scatter_tensor(dst, src)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def main():
    rows = json.load(open(sys.argv[1]))["rows"]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(free_port())
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    print(f"{'probe':10} {'collective':14} {'size':>10} {'verlctl GB/s':>13} {'torch GB/s':>11} {'ratio':>6}")
    for r in rows:
        if r["probe"] not in ("nccl_intra", "nccl_inter") or not isinstance(r.get("data"), dict):
            continue
        if r["data"].get("nranks") != 1:
            print(f"{r['probe']} {r['metric']}: {r['data'].get('nranks')} ranks, not comparable with one process: skipped")
            continue
        for p in r["data"].get("sweep", []):
            us = torch_time_us(r["metric"], p["bytes"], dev)
            torch_gbps = p["bytes"] / (us * 1e-6) / 1e9
            print(f"{r['probe']:10} {r['metric']:14} {p['bytes']:>10} {p['algbw_gbps']:>13.1f} {torch_gbps:>11.1f} "
                  f"{p['algbw_gbps'] / torch_gbps:>6.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
