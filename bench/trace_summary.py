#!/usr/bin/env python3
"""Where a training step's GPU time goes, from a Kineto / torch.profiler chrome trace.

    trace_summary.py TRACE.json [LABEL]

Prints one JSON line: kernels launched, the GPU's busy time (sum of kernel durations) against
the span from the first kernel's start to the last one's end (busy / span near 1: bound by the
kernels; far below: by the host launching them), time by kind (matmul, attention, softmax /
log-softmax / cross-entropy, optimizer, copies, the rest elementwise) and the ten kernels that
took longest in total."""
import collections
import json
import re
import sys

KINDS = [
    ("matmul", re.compile(r"gemm|cutlass|xmma|nvjet|cublas|sm\d+_.*mma", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|sdpa", re.I)),
    ("softmax", re.compile(r"softmax|cross_entropy|nll_loss|logsumexp", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor|foreach|fused_adam", re.I)),
    ("reduce", re.compile(r"reduce|norm_kernel|sum_kernel", re.I)),
]


def kind(name):
    for k, rx in KINDS:
        if rx.search(name):
            return k
    return "elementwise/other"


def main():
    trace = json.load(open(sys.argv[1]))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kernels = [e for e in events if e.get("cat") == "kernel" and "dur" in e]
    copies = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset") and "dur" in e]
    if not kernels:
        print(json.dumps({"label": sys.argv[2] if len(sys.argv) > 2 else "", "error": "no kernel events"}))
        return
    start = min(e["ts"] for e in kernels + copies)
    end = max(e["ts"] + e["dur"] for e in kernels + copies)
    busy = sum(e["dur"] for e in kernels)
    by_kind = collections.Counter()
    by_name = collections.Counter()
    count = collections.Counter()
    for e in kernels:
        by_kind[kind(e["name"])] += e["dur"]
        short = e["name"][:90]
        by_name[short] += e["dur"]
        count[short] += 1
    by_kind["copies"] = sum(e["dur"] for e in copies)
    out = {
        "label": sys.argv[2] if len(sys.argv) > 2 else "",
        "kernels": len(kernels),
        "span_ms": round((end - start) / 1e3, 2),
        "busy_ms": round(busy / 1e3, 2),
        "busy_fraction": round(busy / max(end - start, 1), 3),
        "by_kind_ms": {k: round(v / 1e3, 2) for k, v in by_kind.most_common()},
        "top": [{"name": n, "ms": round(v / 1e3, 2), "count": count[n]} for n, v in by_name.most_common(10)],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
