#!/usr/bin/env python3
"""PyTorch's own rates for what verlctl's GPU probes measure, on the same sizes, and the ratios.

Usage: gpu_probe_vs_torch.py REPORT.json
REPORT.json is `verlctl probe --local -o json` (its h2d, d2h, d2d and matmul rows). For each GPU
row this measures with torch, the same way the probe does: one untimed warm-up, then the best of
N single operations timed with CUDA events on one stream:
  h2d     pinned CPU tensor .to('cuda', non_blocking=True)
  d2h     CUDA tensor copied into a pinned CPU tensor (non_blocking)
  d2d     dst.copy_(src) on the same GPU (bytes copied, as the probe counts them)
  matmul  torch.matmul of two n x n bf16 tensors (cuBLAS, fp32 accumulate); 2 n^3 flops
and prints verlctl / torch per probe (1.00 = the same rate).
"""
import json
import re
import sys

import torch


def best_ms(fn, reps):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()  # warm-up
    torch.cuda.synchronize()
    best = None
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        best = ms if best is None else min(best, ms)
    return best


def copy_gbps(direction, nbytes, reps, dev):
    n = nbytes  # uint8 elements
    if direction == "h2d":
        src = torch.empty(n, dtype=torch.uint8, pin_memory=True).fill_(0x5A)
        holder = {}
        fn = lambda: holder.__setitem__("x", src.to(dev, non_blocking=True))
    elif direction == "d2h":
        src = torch.empty(n, dtype=torch.uint8, device=dev).fill_(0x5A)
        dst = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        fn = lambda: dst.copy_(src, non_blocking=True)
    else:
        src = torch.empty(n, dtype=torch.uint8, device=dev).fill_(0x5A)
        dst = torch.empty(n, dtype=torch.uint8, device=dev)
        fn = lambda: dst.copy_(src)
    ms = best_ms(fn, reps)
    return nbytes / (ms * 1e-3) / 1e9


def matmul_tflops(n, reps, dev):
    g = torch.Generator(device=dev).manual_seed(1234)
    a = (torch.rand(n, n, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)
    b = (torch.rand(n, n, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)
    ms = best_ms(lambda: torch.matmul(a, b), reps)
    return 2.0 * n * n * n / (ms * 1e-3) / 1e12


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def parse_detail(detail):
    """'gpu 0: best of 20 at 256 MiB (1 MiB 20.1, 16 MiB 48.2, 256 MiB 55.3 GB/s)' -> 0, 20, {bytes: gbps}"""
    gpu = int(re.match(r"gpu (\d+)", detail).group(1))
    reps = int(re.search(r"best of (\d+)", detail).group(1))
    sweep = {}
    inner = re.search(r"\((.*) GB/s\)", detail)
    if inner:
        for part in inner.group(1).split(", "):
            num, unit, rate = part.split(" ")
            sweep[int(float(num) * UNITS[unit])] = float(rate)
    return gpu, reps, sweep


def main():
    report = json.load(open(sys.argv[1]))
    rows = [r for r in report["rows"] if r["value"] is not None and r["status"] != "skipped"]
    out = []
    for r in rows:
        if r["probe"] in ("h2d", "d2h", "d2d"):
            gpu, reps, sweep = parse_detail(r["detail"])
            dev = torch.device("cuda", gpu)
            for nbytes, ours in sweep.items():
                theirs = copy_gbps(r["probe"], nbytes, reps, dev)
                out.append((r["probe"], gpu, "%d MiB" % (nbytes >> 20) if nbytes >= 1 << 20 else "%d B" % nbytes,
                            "GB/s", ours, theirs))
        elif r["probe"] == "matmul":
            m = re.match(r"gpu (\d+): (\d+)x\d+x\d+, best of (\d+)", r["detail"])
            gpu, n, reps = int(m.group(1)), int(m.group(2)), int(m.group(3))
            theirs = matmul_tflops(n, reps, torch.device("cuda", gpu))
            out.append(("matmul bf16", gpu, "%d^3" % n, "TFLOP/s", r["value"], theirs))
    print("torch %s, CUDA %s, %s" % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0)))
    print("%-12s %4s %10s %8s %10s %10s %7s" % ("PROBE", "GPU", "SIZE", "UNIT", "VERLCTL", "TORCH", "RATIO"))
    for probe, gpu, size, unit, ours, theirs in out:
        print("%-12s %4d %10s %8s %10.2f %10.2f %7.3f" % (probe, gpu, size, unit, ours, theirs, ours / theirs))
    if not out:
        print("no GPU rows in the report: nothing to compare")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
