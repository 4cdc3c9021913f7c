"""Compares verlctl's answers with the peer's, line by line (exact equality of the parsed
JSON: float scores and metrics bit for bit). Prints a count per data source and the first
mismatches; exits 1 on any. Usage: compare.py requests.jsonl ours.jsonl peer.jsonl"""
import collections
import json
import sys

reqs, ours, peer = ([json.loads(l) for l in open(p, encoding="utf-8")] for p in sys.argv[1:4])
if not (len(reqs) == len(ours) == len(peer)):
    print(f"line counts differ: {len(reqs)} requests, {len(ours)} from verlctl, {len(peer)} from the peer")
    sys.exit(1)
total, bad = collections.Counter(), []
for r, a, b in zip(reqs, ours, peer):
    kind = r.get("data_source", r["op"])
    total[kind] += 1
    if a != b:
        bad.append((kind, r, a, b))
for kind, n in sorted(total.items()):
    print(f"{kind}: {n - sum(1 for x in bad if x[0] == kind)}/{n} identical")
for kind, r, a, b in bad[:8]:
    shown = {k: v for k, v in r.items() if k != "samples"}
    print(f"MISMATCH {json.dumps(shown, ensure_ascii=False)[:400]}\n  verlctl {json.dumps(a, ensure_ascii=False)[:300]}\n"
          f"  peer    {json.dumps(b, ensure_ascii=False)[:300]}")
    if "samples" in r and isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                print(f"    {k}: verlctl {a.get(k)} peer {b.get(k)}")
sys.exit(1 if bad else 0)
