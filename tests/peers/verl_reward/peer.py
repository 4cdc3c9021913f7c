"""The peer side of tests/integration/reward_peer_test.sh: answers the requests of
make_corpus.py with verl's own Python (the copied gsm8k.py, math_reward.py, math_dapo.py,
TinyZero's countdown.py and metric_utils.py beside this file), in the format of
tests/tools/reward_peer.cc. Usage: peer.py < requests.jsonl > answers.jsonl"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import countdown  # noqa: E402
import gsm8k  # noqa: E402
import math_dapo  # noqa: E402
import math_reward  # noqa: E402
import metric_utils  # noqa: E402


def default_compute_score(data_source, solution_str, ground_truth):
    # verl/utils/reward_score/__init__.py's routing for the sources verlctl implements; the
    # countdown branch is TinyZero's, which scores prompt + response after "Assistant:".
    if data_source == "openai/gsm8k":
        res = gsm8k.compute_score(solution_str, ground_truth)
    elif data_source in ["lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500"]:
        res = math_reward.compute_score(solution_str, ground_truth)
    elif data_source in ["math_dapo", "math", "math_dapo_reasoning"] or data_source.startswith("aime"):
        res = math_dapo.compute_score(solution_str, ground_truth)
    elif "countdown" in data_source:
        res = countdown.compute_score("Assistant:" + solution_str, ground_truth)
    else:
        raise NotImplementedError(f"Reward function is not implemented for {data_source=}")
    if isinstance(res, dict):
        return res
    elif isinstance(res, int | float | bool):
        return float(res)
    return float(res[0])


def score(req):
    try:
        res = default_compute_score(req["data_source"], req["response"], req["ground_truth"])
    except NotImplementedError:
        return {"error": "unsupported"}
    if isinstance(res, dict):
        return {"score": res["score"], "extra": {"score": res["score"], "acc": float(res["acc"])}, "pred": res["pred"]}
    return {"score": res}


def val_metrics(req):
    samples = req["samples"]
    infos = {}
    for s in samples:
        for name, value in s["vars"]:
            infos.setdefault(name, []).append(value)
        if "pred" in s:
            infos.setdefault("pred", []).append(s["pred"])
    metrics = metric_utils.val_metrics_update([s["data_source"] for s in samples], [s["uid"] for s in samples], infos,
                                            req.get("seed", 42))
    return {k: float(v) for k, v in metrics.items()}


import io  # noqa: E402

sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")
real_stdout = sys.stdout
for line in io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8"):
    if not line.strip():
        continue
    req = json.loads(line)
    sys.stdout = io.StringIO()  # math_reward prints caught exceptions; countdown prints samples
    out = score(req) if req["op"] == "score" else val_metrics(req)
    sys.stdout = real_stdout
    real_stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
