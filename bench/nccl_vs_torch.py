#!/usr/bin/env python3
"""PyTorch's NCCL collectives on the sizes verlctl's NCCL probes swept, and the ratios.

Usage: nccl_vs_torch.py REPORT.json
REPORT.json is `verlctl probe -o json` with nccl_intra / nccl_inter rows (their data.sweep) of one
rank (world 1, this machine's GPU 0). Two peers, each timed the way the probe times itself:
float32 sum, 5 warm-up and 20 timed launches back to back, wall clock ended by a device
synchronise, algbw = the probe's size / time:
  torch.cuda.nccl      torch's single-process NCCL (communicators over a list of GPUs, as
                       nccl_intra's ncclCommInitAll), out of place like the probe;
  torch.distributed    c10d's ProcessGroupNCCL, world 1: all_gather_into_tensor and
                       reduce_scatter_tensor out of place; its all_reduce is in place only, and
                       NCCL moves no byte for one rank in place, so that column is not comparable
                       and gets no ratio.
Prints verlctl / peer per size (1.00 = the same rate).
"""
import json
import os
import socket
import sys
import time

import torch
import torch.cuda.nccl as tnccl
import torch.distributed as dist


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def time_us(fn, warmup=5, iters=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def ops(op, nbytes, dev):
    """(torch.cuda.nccl launch, c10d launch or None) for the probe's size with one rank."""
    count = nbytes // 4  # float32; with one rank the per-rank count is the whole size
    src = torch.ones(count, dtype=torch.float32, device=dev)
    dst = torch.empty(count, dtype=torch.float32, device=dev)
    if op == "all_reduce":
        return (lambda: tnccl.all_reduce([src], [dst])), None
    if op == "all_gather":
        return (lambda: tnccl.all_gather([src], [dst])), (lambda: dist.all_gather_into_tensor(dst, src))
    return (lambda: tnccl.reduce_scatter([src], [dst])), (lambda: dist.reduce_scatter_tensor(dst, src))


def main():
    rows = json.load(open(sys.argv[1]))["rows"]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(free_port())
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    print(f"{'probe':10} {'collective':14} {'size':>10} {'verlctl':>9} {'t.cuda.nccl':>11} {'ratio':>6} "
          f"{'c10d':>9} {'ratio':>6}   (algbw, GB/s)")
    for r in rows:
        if r["probe"] not in ("nccl_intra", "nccl_inter") or not isinstance(r.get("data"), dict):
            continue
        if r["data"].get("nranks") != 1:
            print(f"{r['probe']} {r['metric']}: {r['data'].get('nranks')} ranks, not comparable with one process: skipped")
            continue
        for p in r["data"].get("sweep", []):
            mine = p["algbw_gbps"]
            single, c10d = ops(r["metric"], p["bytes"], dev)
            a = p["bytes"] / (time_us(single) * 1e-6) / 1e9
            line = f"{r['probe']:10} {r['metric']:14} {p['bytes']:>10} {mine:>9.1f} {a:>11.1f} {mine / a:>6.2f} "
            if c10d:
                b = p["bytes"] / (time_us(c10d) * 1e-6) / 1e9
                line += f"{b:>9.1f} {mine / b:>6.2f}"
            else:
                line += f"{'in place':>9} {'-':>6}"
            print(line)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
