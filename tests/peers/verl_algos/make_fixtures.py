"""Writes golden values for trainer/core_algos from verl's own functions.

Usage (Debian's python3: torch + numpy, no PyPI):
    git -C <verl.git> archive <commit> verl | tar -x -C /tmp/verl-src
    /usr/bin/python3 tests/peers/verl_algos/make_fixtures.py /tmp/verl-src <commit> \
        > tests/data/verl_algos/fixtures.json

verl's code stays outside this tree: the script execs verl/trainer/ppo/core_algos.py,
verl/utils/torch_functional.py and verl/utils/groupwise.py from the given checkout. Their
imports that are absent here are stubbed in sys.modules, minimally:
  omegaconf.DictConfig           a type name only (annotations)
  tensordict.TensorDict          a type name only (torch_functional's annotations)
  transformers.PreTrainedTokenizer  a type name only
  verl.utils.device              get_device_name() -> "cpu" (groupwise picks the CPU)
  verl.utils.import_utils        deprecated(): returns the function unchanged
  verl.trainer.config.AlgoConfig  an empty class (isinstance checks only)
  verl.trainer.config.algorithm.RolloutCorrectionConfig, verl.workers.config.actor.PolicyLossConfig
                                  type names only (rollout_corr_helper's annotations)
  verl.protocol.DataProto         from_dict(tensors=...) -> an object whose .batch is that dict
  verl.workers.config.ActorConfig attribute bag with .get() and global_batch_info = {} (the
                                  per-micro-batch path of dp_actor: no global normalisation)
Inputs are float32; every tensor is written with 9 significant digits (round-trips float32).
The C++ test (tests/unit/trainer/core_algos_verl_test.cc) feeds the same inputs to our functions.
"""
import json
import sys
import types

import numpy as np
import torch

VERL, COMMIT = sys.argv[1], sys.argv[2]


def stub(name, **attrs):
    m = types.ModuleType(name)
    m.__path__ = []  # a package, so that submodules resolve
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    return m


class AlgoConfig:
    pass


class ActorConfig:
    def __init__(self, **kw):
        self.__dict__.update(kw)
        self.global_batch_info = {}

    def get(self, key, default=None):
        return self.__dict__.get(key, default)


class PolicyLossConfig(ActorConfig):
    pass


def load(path, name):
    mod = types.ModuleType(name)
    mod.__file__ = path
    sys.modules[name] = mod
    exec(compile(open(path).read(), path, "exec"), mod.__dict__)
    return mod


stub("omegaconf", DictConfig=dict)
stub("tensordict", TensorDict=dict)
stub("transformers", PreTrainedTokenizer=object)
stub("verl")
utils = stub("verl.utils")
stub("verl.utils.device", get_device_name=lambda: "cpu", get_torch_device=lambda: torch.cuda)
stub("verl.utils.import_utils", deprecated=lambda *a, **k: (lambda f: f))
stub("verl.trainer")
stub("verl.trainer.config", AlgoConfig=AlgoConfig)
stub("verl.workers")
stub("verl.workers.config", ActorConfig=ActorConfig)
stub("verl.workers.config.actor", PolicyLossConfig=PolicyLossConfig)
stub("verl.trainer.config.algorithm", RolloutCorrectionConfig=dict)


class DataProto:
    def __init__(self, tensors):
        self.batch = tensors

    @staticmethod
    def from_dict(tensors):
        return DataProto(tensors)


stub("verl.protocol", DataProto=DataProto)
groupwise = load(f"{VERL}/verl/utils/groupwise.py", "verl.utils.groupwise")
utils.as_torch_index, utils.group_mean_std = groupwise.as_torch_index, groupwise.group_mean_std
verl_F = load(f"{VERL}/verl/utils/torch_functional.py", "verl.utils.torch_functional")
utils.torch_functional = verl_F
ca = load(f"{VERL}/verl/trainer/ppo/core_algos.py", "verl.trainer.ppo.core_algos")
rc = load(f"{VERL}/verl/trainer/ppo/rollout_corr_helper.py", "verl.trainer.ppo.rollout_corr_helper")


def enc(t):
    t = t.detach().to(torch.float64) if t.is_floating_point() else t.detach()
    flat = [float(f"{x:.9g}") if isinstance(x, float) else x for x in t.reshape(-1).tolist()]
    return {"shape": list(t.shape), "data": flat}


cases = []


def case(name, fn, inputs, outputs, params=None):
    cases.append({"name": name, "fn": fn, "params": params or {},
                  "inputs": {k: enc(v) for k, v in inputs.items()},
                  "outputs": {k: enc(v) if isinstance(v, torch.Tensor) else v for k, v in outputs.items()}})


def r32(t):
    """Rounds to what the fixture stores, so both sides start from identical float32 inputs."""
    return torch.tensor([float(f"{x:.9g}") for x in t.reshape(-1).tolist()], dtype=torch.float32).reshape(t.shape)


def make_mask(B, T, empty_rows=(), gen=None):
    lengths = torch.randint(1, T + 1, (B,), generator=gen)
    m = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).float()
    for r in empty_rows:
        m[r] = 0
    return m


SHAPES = [(4, 6, ()), (6, 5, (2,)), (5, 7, (0, 3)), (3, 4, ())]
AGG_MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
g = torch.Generator().manual_seed(20)

# ---- agg_loss (value and gradient w.r.t. the loss matrix) ----
for si, (B, T, empty) in enumerate(SHAPES):
    mask = make_mask(B, T, empty, g)
    for mode in AGG_MODES:
        lm = r32(torch.randn(B, T, generator=g)).requires_grad_(True)
        loss = ca.agg_loss(lm, mask, mode)
        loss.backward()
        case(f"agg_{mode}_{si}", "agg_loss", {"loss_mat": lm, "mask": mask},
             {"loss": loss, "grad_loss_mat": lm.grad}, {"mode": mode})

# ---- agg_loss with global-batch normalisation (verl's engine path: dp_size, batch_num_tokens,
# global_batch_size, loss_scale_factor) ----
for si, (B, T, empty) in enumerate(SHAPES[:3]):
    mask = make_mask(B, T, empty, g)
    for mode in AGG_MODES:
        lm = r32(torch.randn(B, T, generator=g)).requires_grad_(True)
        info = {"dp_size": 2, "batch_num_tokens": 37, "global_batch_size": 9, "loss_scale_factor": 16}
        loss = ca.agg_loss(lm, mask, mode, **info)
        loss.backward()
        case(f"agg_global_{mode}_{si}", "agg_loss_global", {"loss_mat": lm, "mask": mask},
             {"loss": loss, "grad_loss_mat": lm.grad}, {"mode": mode, **info})

# ---- KL estimators ----
for si, (B, T, empty) in enumerate(SHAPES[:2]):
    mask = make_mask(B, T, empty, g)
    for kind in ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"]:
        lp = r32(torch.randn(B, T, generator=g) * 2 - 1).requires_grad_(True)
        ref = r32(torch.randn(B, T, generator=g) * 2 - 1)
        kl = ca.kl_penalty(lp, ref, kind)
        kl.sum().backward()
        case(f"kl_{kind}_{si}", "kl_penalty", {"logprob": lp, "ref_logprob": ref},
             {"kl": kl, "grad_logprob": lp.grad}, {"type": kind})
        for mode in AGG_MODES if si == 0 else []:
            lp2 = lp.detach().clone().requires_grad_(True)
            loss = ca.agg_loss(ca.kl_penalty(lp2, ref, kind), mask, mode)
            loss.backward()
            case(f"kl_loss_{kind}_{mode}_{si}", "kl_loss", {"logprob": lp2, "ref_logprob": ref, "mask": mask},
                 {"loss": loss, "grad_logprob": lp2.grad}, {"type": kind, "mode": mode})

# ---- entropy ----
logits = r32(torch.randn(3, 4, 9, generator=g) * 3)
case("entropy", "entropy_from_logits", {"logits": logits}, {"entropy": verl_F.entropy_from_logits(logits)})

# ---- masked statistics ----
for si, (B, T, empty) in enumerate(SHAPES):
    mask = make_mask(B, T, empty, g)
    v = r32(torch.randn(B, T, generator=g) * 3 + 1)
    case(f"masked_{si}", "masked", {"values": v, "mask": mask},
         {"mean": verl_F.masked_mean(v, mask), "mean_dim": verl_F.masked_mean(v, mask, axis=-1),
          "var": verl_F.masked_var(v, mask), "whiten": verl_F.masked_whiten(v, mask),
          "whiten_noshift": verl_F.masked_whiten(v, mask, shift_mean=False)})

# ---- advantage estimators ----
def scores_rows(B, T, mask, kind):
    """Outcome rewards at each row's last real token (verl's reward managers do this)."""
    if kind == "binary":
        s = torch.randint(0, 2, (B,), generator=g).float()
    else:
        s = r32(torch.randn(B, generator=g))
    r = torch.zeros(B, T)
    for i in range(B):
        n = int(mask[i].sum())
        r[i, max(n - 1, 0)] = s[i]
    return r


GROUPED = [  # (B, T, index, empty rows)
    (8, 5, [0, 0, 0, 0, 1, 1, 1, 1], ()),
    (9, 6, [3, 1, 3, 1, 3, 1, 7, 7, 7], (4,)),
    (6, 4, [0, 0, 1, 1, 2, 2], ()),
    (7, 5, [5, 5, 5, 9, 9, 2, 2], ()),
    (6, 4, [0, 1, 1, 2, 3, 3], (2,)),  # groups of one (rollout.n = 1 or filtered)
]
for gi, (B, T, index, empty) in enumerate(GROUPED):
    mask = make_mask(B, T, empty, g)
    for kind in ["binary", "real"]:
        rew = r32(scores_rows(B, T, mask, kind))
        idx = np.array(index)
        tag = f"{gi}_{kind}"
        ins = {"rewards": rew, "mask": mask, "index": torch.tensor(index)}
        for norm in [True, False]:
            a, _ = ca.compute_grpo_outcome_advantage(rew.clone(), mask, idx, norm_adv_by_std_in_grpo=norm)
            case(f"grpo_{norm}_{tag}", "adv", ins, {"advantages": a}, {"estimator": "grpo", "norm_adv_by_std_in_grpo": norm})
            a, _ = ca.compute_grpo_vectorized_outcome_advantage(rew.clone(), mask, idx, norm_adv_by_std_in_grpo=norm)
            case(f"grpo_vectorized_{norm}_{tag}", "adv", ins, {"advantages": a},
                 {"estimator": "grpo_vectorized", "norm_adv_by_std_in_grpo": norm})
            cfg = {"norm_adv_by_std_in_grpo": norm}
            if min(index.count(i) for i in index) < 2:
                continue  # verl raises ValueError for pass@k on a group of one (so do we)
            a, _ = ca.compute_grpo_passk_outcome_advantage(rew.clone(), mask, idx, config=cfg)
            case(f"grpo_passk_{norm}_{tag}", "adv", ins, {"advantages": a},
                 {"estimator": "grpo_passk", "norm_adv_by_std_in_grpo": norm})
        a, _ = ca.compute_rloo_outcome_advantage(rew.clone(), mask, idx)
        case(f"rloo_{tag}", "adv", ins, {"advantages": a}, {"estimator": "rloo"})
        a, _ = ca.compute_rloo_vectorized_outcome_advantage(rew.clone(), mask, idx)
        case(f"rloo_vectorized_{tag}", "adv", ins, {"advantages": a}, {"estimator": "rloo_vectorized"})
        a, _ = ca.compute_opo_outcome_advantage(rew.clone(), mask, idx)
        case(f"opo_{tag}", "adv", ins, {"advantages": a}, {"estimator": "opo"})
        a, _ = ca.compute_gpg_outcome_advantage(rew.clone(), mask, idx)
        case(f"gpg_{tag}", "adv", ins, {"advantages": a}, {"estimator": "gpg"})
        a, ret = ca.compute_reinforce_plus_plus_baseline_outcome_advantage(rew.clone(), mask, idx)
        case(f"reinforce_plus_plus_baseline_{tag}", "adv", ins, {"advantages": a},
             {"estimator": "reinforce_plus_plus_baseline"})
        for gamma in [1.0, 0.9]:
            a, ret = ca.compute_reinforce_plus_plus_outcome_advantage(rew.clone(), mask, config=types.SimpleNamespace(gamma=gamma))
            case(f"reinforce_plus_plus_{gamma}_{tag}", "adv", ins, {"advantages": a, "returns": ret},
                 {"estimator": "reinforce_plus_plus", "gamma": gamma})
    values = r32(torch.randn(B, T, generator=g))
    rew = r32(torch.randn(B, T, generator=g) * mask)
    for gamma, lam in [(1.0, 1.0), (0.9, 0.8)]:
        a, ret = ca.compute_gae_advantage_return(rew, values, mask, gamma, lam)
        case(f"gae_{gamma}_{lam}_{gi}", "adv", {"rewards": rew, "values": values, "mask": mask},
             {"advantages": a, "returns": ret}, {"estimator": "gae", "gamma": gamma, "lam": lam})

# Groups of identical non-integer scores: verl's float32 std of 0.1 x n is 1 ulp, not 0, so its
# advantages are not 0 (here 0.056 for eight 0.7s; +-0.47 seen in training); ours (double) are
# exactly 0. Recorded to pin the difference down.
rew = torch.zeros(8, 3)
rew[:, 2] = 0.7
a, _ = ca.compute_grpo_outcome_advantage(rew.clone(), torch.ones(8, 3), np.zeros(8, dtype=np.int64))
case("grpo_identical_nonint", "adv_identical", {"rewards": rew, "mask": torch.ones(8, 3), "index": torch.zeros(8, dtype=torch.int64)},
     {"advantages": a}, {"estimator": "grpo", "norm_adv_by_std_in_grpo": True})

# ---- policy losses (value, metrics and gradient w.r.t. log_prob) ----
def actor_cfg(**kw):
    base = dict(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0, tau_pos=1.0, tau_neg=1.05)
    base.update(kw)
    base["policy_loss"] = PolicyLossConfig(loss_mode="vanilla", clip_cov_ratio=kw.get("clip_cov_ratio", 0.0002),
                                           clip_cov_lb=kw.get("clip_cov_lb", 1.0), clip_cov_ub=kw.get("clip_cov_ub", 5.0),
                                           kl_cov_ratio=kw.get("kl_cov_ratio", 0.0002), ppo_kl_coef=kw.get("ppo_kl_coef", 0.1))
    return ActorConfig(**base)


LOSSES = {
    "vanilla": {}, "gspo": {}, "sapo": {}, "gpg": {}, "geo_mean": {}, "cispo": {},
    # clip_cov draws randomly among candidates beyond clip_num: a ratio of 0.5 keeps clip_num
    # above the candidate count, so the choice is "all of them" on both sides.
    "clip_cov": {"clip_cov_ratio": 0.5, "clip_cov_lb": 0.05, "clip_cov_ub": 5.0},
    "kl_cov": {"kl_cov_ratio": 0.2, "ppo_kl_coef": 0.1},
}
for si, (B, T, empty) in enumerate(SHAPES):
    mask = make_mask(B, T, empty, g)
    old = r32(-torch.rand(B, T, generator=g) * 2 - 0.05)
    lp0 = r32(old + torch.randn(B, T, generator=g) * 0.3)
    adv_tok = r32(torch.randn(B, T, generator=g))
    adv_seq = r32(torch.randn(B, 1, generator=g).expand(B, T).contiguous() * mask)
    for loss_mode, kw in LOSSES.items():
        for mode in AGG_MODES:
            if loss_mode in ("gspo", "sapo", "geo_mean") and mode != "token-mean":
                continue  # these ignore loss_agg_mode
            adv = adv_seq if loss_mode == "geo_mean" else adv_tok
            lp = lp0.clone().requires_grad_(True)
            fn = ca.get_policy_loss_fn(loss_mode)
            loss, metrics = fn(old, lp, adv, mask, mode, actor_cfg(**kw))
            loss.backward()
            case(f"pl_{loss_mode}_{mode}_{si}", "policy_loss",
                 {"old_log_prob": old, "log_prob": lp, "advantages": adv, "mask": mask},
                 {"loss": loss, "grad_log_prob": lp.grad, **{k.split("/")[-1]: v for k, v in metrics.items()}},
                 {"loss_mode": loss_mode, "mode": mode, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28,
                  "clip_ratio_c": 3.0, "tau_pos": 1.0, "tau_neg": 1.05, **kw})
    for mode in AGG_MODES:
        lp = lp0.clone().requires_grad_(True)
        loss, metrics = ca.compute_policy_loss_reinforce(old, lp, adv_tok, mask, mode, actor_cfg())
        loss.backward()
        case(f"pl_reinforce_{mode}_{si}", "policy_loss",
             {"old_log_prob": old, "log_prob": lp, "advantages": adv_tok, "mask": mask},
             {"loss": loss, "grad_log_prob": lp.grad, "ppo_kl": metrics["actor/ppo_kl"]},
             {"loss_mode": "reinforce", "mode": mode})

    # The rollout-correction weights in every loss mode (truncated token weights; detached, as
    # verl's are), with the gradient through log_prob.
    is_w = r32(torch.exp(torch.randn(B, T, generator=g) * 0.4).clamp(max=2.0) * mask)
    for loss_mode, kw in LOSSES.items():
        for mode in ("token-mean", "seq-mean-token-mean"):
            if loss_mode in ("gspo", "sapo", "geo_mean") and mode != "token-mean":
                continue
            adv = adv_seq if loss_mode == "geo_mean" else adv_tok
            lp = lp0.clone().requires_grad_(True)
            loss, metrics = ca.get_policy_loss_fn(loss_mode)(old, lp, adv, mask, mode, actor_cfg(**kw), rollout_is_weights=is_w)
            loss.backward()
            case(f"pl_is_{loss_mode}_{mode}_{si}", "policy_loss",
                 {"old_log_prob": old, "log_prob": lp, "advantages": adv, "mask": mask, "rollout_is_weights": is_w},
                 {"loss": loss, "grad_log_prob": lp.grad, **{k.split("/")[-1]: v for k, v in metrics.items()}},
                 {"loss_mode": loss_mode, "mode": mode, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28,
                  "clip_ratio_c": 3.0, "tau_pos": 1.0, "tau_neg": 1.05, **kw})

# ---- rollout correction (rollout_corr_helper.compute_rollout_correction_and_rejection_mask):
# IS weights, the rejection mask and every metric, for each IS level and RS option ----
RC_CONFIGS = [
    dict(rollout_is="token", rollout_is_threshold=2.0),
    dict(rollout_is="sequence", rollout_is_threshold=2.0),
    dict(rollout_is="token", rollout_is_threshold=1.5, rollout_is_batch_normalize=True),
    dict(rollout_is="sequence", rollout_is_threshold=5.0, rollout_is_batch_normalize=True),
    dict(rollout_rs="token_k1", rollout_rs_threshold="0.7_1.3"),
    dict(rollout_rs="token_k1", rollout_rs_threshold=1.5),
    dict(rollout_rs="token_k2", rollout_rs_threshold=0.02),
    dict(rollout_rs="token_k3", rollout_rs_threshold=0.02),
    dict(rollout_rs="seq_sum_k1", rollout_rs_threshold="0.5_2.0"),
    dict(rollout_rs="seq_sum_k2", rollout_rs_threshold=0.1),
    dict(rollout_rs="seq_sum_k3", rollout_rs_threshold=0.1),
    dict(rollout_rs="seq_mean_k1", rollout_rs_threshold="0.9_1.1"),
    dict(rollout_rs="seq_mean_k2", rollout_rs_threshold=0.02),
    dict(rollout_rs="seq_mean_k3", rollout_rs_threshold=0.02),
    dict(rollout_rs="seq_max_k2", rollout_rs_threshold=0.05),
    dict(rollout_rs="seq_max_k3", rollout_rs_threshold=0.05),
    dict(rollout_is="token", rollout_is_threshold=2.0, rollout_rs="token_k1,seq_mean_k3,token_k1",
         rollout_rs_threshold="0.6_1.6,0.03"),
    dict(rollout_is="sequence", rollout_is_threshold=3.0, rollout_rs="seq_max_k3,seq_sum_k2", rollout_rs_threshold=0.08),
]
for si, (B, T, empty) in enumerate(SHAPES):
    mask = make_mask(B, T, empty, g)
    old = r32(-torch.rand(B, T, generator=g) * 2 - 0.05)
    roll = r32(old + torch.randn(B, T, generator=g) * 0.2)
    for ci, cfg in enumerate(RC_CONFIGS):
        w, new_mask, metrics = rc.compute_rollout_correction_and_rejection_mask(old, roll, mask, **cfg)
        out = {"response_mask": new_mask, "metrics": metrics}
        if w is not None:
            out["weights"] = w.batch["rollout_is_weights"]
        params = {k: (str(v) if k == "rollout_rs_threshold" else v) for k, v in cfg.items()}
        case(f"rc_{ci}_{si}", "rollout_correction", {"old_log_prob": old, "rollout_log_prob": roll, "mask": mask},
             out, params)
    lp = r32(old + torch.randn(B, T, generator=g) * 0.1)
    case(f"rc_actor_metrics_{si}", "rollout_corr_metrics", {"log_prob": lp, "rollout_log_prob": roll, "mask": mask},
         {"metrics": rc.compute_rollout_corr_metrics_from_logprobs(lp, roll, mask)})

# ---- value loss ----
for si, (B, T, empty) in enumerate(SHAPES):
    mask = make_mask(B, T, empty, g)
    values = r32(torch.randn(B, T, generator=g))
    vp0 = r32(values + torch.randn(B, T, generator=g) * 0.7)
    ret = r32(torch.randn(B, T, generator=g))
    for mode in AGG_MODES:
        vp = vp0.clone().requires_grad_(True)
        loss, clipfrac = ca.compute_value_loss(vp, ret, values, mask, 0.5, mode)
        loss.backward()
        case(f"vf_{mode}_{si}", "value_loss", {"vpreds": vp, "returns": ret, "values": values, "mask": mask},
             {"loss": loss, "clipfrac": clipfrac, "grad_vpreds": vp.grad}, {"mode": mode, "cliprange_value": 0.5})

# ---- PF-PPO: weights and the resampled rows (torch.multinomial from a seeded CPU generator;
# verl draws from the global one, which torch.manual_seed seeds the same way) ----
class Batch(dict):
    """Stands in for the TensorDict of a DataProto: a dict with a batch_size attribute."""
    batch_size = None


class FakeData:
    def __init__(self, scores):
        self.batch = Batch(token_level_scores=scores, row=torch.arange(scores.shape[0]))
        self.non_tensor_batch = {}
        self.meta_info = {}


for pi, (method, wpow) in enumerate([("pow", 2.0), ("pow", 1.0), ("max_min", 2.0), ("max_random", 2.0)]):
    B, T = 10, 3
    tls = torch.zeros(B, T)
    tls[:, -1] = r32(torch.randn(B, generator=g)) if method == "pow" else torch.randint(0, 3, (B,), generator=g).float()
    torch.manual_seed(1000 + pi)
    out = ca.compute_pf_ppo_reweight_data(FakeData(tls), method, wpow)
    case(f"pf_ppo_{method}_{wpow}", "pf_ppo", {"token_level_scores": tls},
         {"indices": out.batch["row"]}, {"reweight_method": method, "weight_pow": wpow, "seed": 1000 + pi})

# Every name verl registers (what its generated config lets adv_estimator / loss_mode take).
registries = {"adv_estimator": sorted(str(getattr(k, "value", k)) for k in ca.ADV_ESTIMATOR_REGISTRY),
              "policy_loss": sorted(ca.POLICY_LOSS_REGISTRY)}
json.dump({"verl_commit": COMMIT, "torch": torch.__version__,
           "generator": "tests/peers/verl_algos/make_fixtures.py", "registries": registries, "cases": cases},
          sys.stdout, separators=(",", ":"))
