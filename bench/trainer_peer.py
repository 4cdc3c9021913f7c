#!/usr/bin/python3
"""The peer of bench_trainer: the same PPO step as verlctl's trainer, written as a plain PyTorch
loop (what a verl-style Python trainer does on one rank, without Ray/FSDP/vLLM overheads).

Same model (Llama/Qwen2 family: RMSNorm, GQA with rotary embeddings, SwiGLU, tied LM head;
critic = same backbone + a scalar head), same sizes, same batch geometry and the same PPO step:
  generate (KV cache, temperature sampling, stop at EOS) -> old log-probs -> values -> reward
  at the last response token -> GAE (verl's reverse scan) + masked whitening -> critic update
  (clipped value loss) -> actor update (dual-clip PPO, token-mean) over mini/micro-batches,
  AdamW, grad-norm clipping at 1.0.
What differs on purpose: prompts are random token ids of the mean prompt length our task had
(the built-in arithmetic task is not ported), and the reward is a cheap rule (first response
token even -> 1), so the measured cost is the model work, which is what both sides share.

Prints one JSON line like bench_trainer's. Run with Debian's torch: /usr/bin/python3.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rope_tables(pos, d, theta):
    # cos/sin [B, 1, T, D] for positions [B, T]; computed once per forward, shared by the layers
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = pos.float().unsqueeze(-1) * inv  # [B, T, D/2]
    ang = torch.cat([ang, ang], -1).unsqueeze(1)
    return ang.cos(), ang.sin()


def rope(x, cos, sin):
    # x [B, H, T, D]
    d = x.shape[-1]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rot = torch.cat([-x2, x1], -1)
    return x * cos + rot * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h, self.kv, self.d = c.heads, c.kv_heads, c.hidden // c.heads
        self.theta = c.rope_theta
        self.q_proj = nn.Linear(c.hidden, self.h * self.d, bias=False)
        self.k_proj = nn.Linear(c.hidden, self.kv * self.d, bias=False)
        self.v_proj = nn.Linear(c.hidden, self.kv * self.d, bias=False)
        self.o_proj = nn.Linear(self.h * self.d, c.hidden, bias=False)

    def forward(self, x, rot, blocked, cache=None):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        q, k = rope(q, *rot), rope(k, *rot)
        if cache is not None:
            if cache[0] is not None:
                k = torch.cat([cache[0], k], 2)
                v = torch.cat([cache[1], v], 2)
            cache[0], cache[1] = k, v
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, 1)
        v = v.repeat_interleave(rep, 1)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.d)  # [B, H, t, T]
        s = s.masked_fill(blocked, -1e9)
        o = torch.softmax(s, -1) @ v
        return self.o_proj(o.transpose(1, 2).reshape(b, t, self.h * self.d))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden, c.eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps)
        self.gate_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.down_proj = nn.Linear(c.inter, c.hidden, bias=False)

    def forward(self, x, rot, blocked, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), rot, blocked, cache)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Backbone(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList([Block(c) for _ in range(c.layers)])
        self.norm = RMSNorm(c.hidden, c.eps)

    def forward(self, ids, pos, key_mask, caches=None):
        x = self.embed_tokens(ids)
        t, total = ids.shape[1], key_mask.shape[1]
        # once per forward: rotary tables and the [B, 1, t, T] mask of keys a query may not see
        rot = rope_tables(pos, self.layers[0].self_attn.d, self.layers[0].self_attn.theta)
        causal = torch.ones(t, total, dtype=torch.bool).tril(total - t)
        blocked = ~(causal.unsqueeze(0) & key_mask[:, None, :].bool()).unsqueeze(1)
        for i, layer in enumerate(self.layers):
            x = layer(x, rot, blocked, None if caches is None else caches[i])
        return self.norm(x)


class CausalLm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = Backbone(c)

    def forward(self, ids, pos, key_mask, caches=None):
        h = self.model(ids, pos, key_mask, caches)
        return h @ self.model.embed_tokens.weight.t()  # tied LM head


class Critic(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = Backbone(c)
        self.score = nn.Linear(c.hidden, 1, bias=False)

    def forward(self, ids, pos, key_mask):
        return self.score(self.model(ids, pos, key_mask)).squeeze(-1)


def init(m, std=0.02):
    for mod in m.modules():
        if isinstance(mod, (nn.Linear, nn.Embedding)):
            nn.init.normal_(mod.weight, 0.0, std)


def masked_mean(x, m):
    return (x * m).sum() / (m.sum() + 1e-8)


def masked_whiten(x, m):
    mean = masked_mean(x, m)
    var = masked_mean((x - mean) ** 2, m)
    n = m.sum()
    var = var * n / (n - 1)
    return (x - mean) * torch.rsqrt(var + 1e-8)


@torch.no_grad()
def generate(actor, prompts, max_resp, eos, pad, temperature):
    b, p = prompts.shape
    caches = [[None, None] for _ in actor.model.layers]
    mask = torch.ones(b, p, dtype=torch.long)
    pos = torch.arange(p).expand(b, p)
    logits = actor(prompts, pos, mask, caches)[:, -1]
    out = torch.full((b, max_resp), pad, dtype=torch.long)
    done = torch.zeros(b, dtype=torch.bool)
    for t in range(max_resp):
        probs = torch.softmax(logits / temperature, -1)
        tok = torch.multinomial(probs, 1).squeeze(-1)
        tok = torch.where(done, torch.full_like(tok, pad), tok)
        out[:, t] = tok
        done = done | (tok == eos)
        if bool(done.all()) or t == max_resp - 1:
            break
        mask = torch.cat([mask, (~done | (tok == eos)).long().unsqueeze(1)], 1)
        step_pos = torch.full((b, 1), p + t, dtype=torch.long)
        logits = actor(tok.unsqueeze(1), step_pos, mask, caches)[:, -1]
    resp_mask = torch.zeros(b, max_resp)
    for i in range(b):
        row = out[i].tolist()
        n = row.index(eos) + 1 if eos in row else max_resp
        resp_mask[i, :n] = 1
    return out, resp_mask


def response_logprobs(actor, ids, mask, width):
    pos = torch.arange(ids.shape[1]).expand_as(ids)
    logits = actor(ids[:, :-1], pos[:, :-1], mask[:, :-1])[:, -width:]
    return torch.log_softmax(logits.float(), -1).gather(-1, ids[:, -width:].unsqueeze(-1)).squeeze(-1)


def response_values(critic, ids, mask, width):
    pos = torch.arange(ids.shape[1]).expand_as(ids)
    return critic(ids[:, :-1], pos[:, :-1], mask[:, :-1])[:, -width:]


def gae(rewards, values, mask, gamma, lam):
    nextv = torch.zeros(rewards.shape[0])
    last = torch.zeros(rewards.shape[0])
    rev = []
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * nextv - values[:, t]
        g = delta + gamma * lam * last
        nextv = values[:, t] * mask[:, t] + (1 - mask[:, t]) * nextv
        last = g * mask[:, t] + (1 - mask[:, t]) * last
        rev.append(last)
    adv = torch.stack(rev[::-1], 1)
    return masked_whiten(adv, mask), adv + values


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--inter", type=int, default=176)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--prompts", type=int, default=64)        # data.train_batch_size
    ap.add_argument("--n", type=int, default=4)               # rollout.n
    ap.add_argument("--prompt-len", type=int, default=7)
    ap.add_argument("--max-resp", type=int, default=12)
    ap.add_argument("--mini", type=int, default=32)           # ppo_mini_batch_size (prompts)
    ap.add_argument("--micro", type=int, default=64)          # ppo_micro_batch_size_per_gpu
    ap.add_argument("--log-prob-micro", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    c = ap.parse_args()
    torch.set_num_threads(c.threads)
    torch.manual_seed(c.seed)
    eos, pad = 1, 0
    actor, critic = CausalLm(c), Critic(c)
    init(actor)
    init(critic)
    critic.model.load_state_dict(actor.model.state_dict())
    aopt = torch.optim.AdamW(actor.parameters(), lr=c.lr, betas=(0.9, 0.999), weight_decay=0.0)
    copt = torch.optim.AdamW(critic.parameters(), lr=c.lr, betas=(0.9, 0.999), weight_decay=0.0)
    rows, mini = c.prompts * c.n, c.mini * c.n
    times, tokens, rlens = [], [], []
    phases = {}

    def mark(name, since):
        now = time.perf_counter()
        if step > 1:
            phases[name] = phases.get(name, 0.0) + now - since
        return now

    for step in range(1, c.steps + 1):
        t0 = time.perf_counter()
        tp = t0
        prompts = torch.randint(2, c.vocab, (c.prompts, c.prompt_len)).repeat_interleave(c.n, 0)
        actor.eval()
        resp, rmask = generate(actor, prompts, c.max_resp, eos, pad, 1.0)
        tp = mark("gen", tp)
        ids = torch.cat([prompts, resp], 1)
        amask = torch.cat([torch.ones_like(prompts, dtype=torch.float32), rmask], 1)
        width = c.max_resp
        with torch.no_grad():
            old_lp = torch.cat([response_logprobs(actor, ids[s:s + c.log_prob_micro], amask[s:s + c.log_prob_micro], width)
                                for s in range(0, rows, c.log_prob_micro)])
            tp = mark("old_log_prob", tp)
            critic.eval()
            values = torch.cat([response_values(critic, ids[s:s + c.log_prob_micro], amask[s:s + c.log_prob_micro], width)
                                for s in range(0, rows, c.log_prob_micro)]) * rmask
        tp = mark("values", tp)
        scores = (resp[:, 0] % 2 == 0).float()
        last = (rmask.sum(-1).long() - 1).clamp(min=0)
        rewards = torch.zeros_like(rmask)
        rewards[torch.arange(rows), last] = scores
        adv, ret = gae(rewards, values, rmask, 1.0, 1.0)
        tp = mark("adv", tp)
        critic.train()
        for s in range(0, rows, mini):
            copt.zero_grad()
            for u in range(s, s + mini, c.micro):
                sl = slice(u, min(u + c.micro, s + mini))
                k = sl.stop - sl.start
                vp = response_values(critic, ids[sl], amask[sl], width)
                vclip = torch.max(torch.min(vp, values[sl] + 0.5), values[sl] - 0.5)
                l = torch.max((vp - ret[sl]) ** 2, (vclip - ret[sl]) ** 2)
                (0.5 * masked_mean(l, rmask[sl]) * (k / mini)).backward()
            torch.nn.utils.clip_grad_norm_(critic.parameters(), 1.0)
            copt.step()
        tp = mark("update_critic", tp)
        actor.train()
        for s in range(0, rows, mini):
            aopt.zero_grad()
            for u in range(s, s + mini, c.micro):
                sl = slice(u, min(u + c.micro, s + mini))
                k = sl.stop - sl.start
                lp = response_logprobs(actor, ids[sl], amask[sl], width)
                ratio = torch.exp(torch.clamp(lp - old_lp[sl], -20, 20))
                a = adv[sl]
                l1 = -a * ratio
                l2 = -a * torch.clamp(ratio, 0.8, 1.2)
                c1 = torch.max(l1, l2)
                pg = torch.where(a < 0, torch.min(-a * 3.0, c1), c1)
                (masked_mean(pg, rmask[sl]) * (k / mini)).backward()
            torch.nn.utils.clip_grad_norm_(actor.parameters(), 1.0)
            aopt.step()
        tp = mark("update_actor", tp)
        dt = time.perf_counter() - t0
        if step > 1:  # step 1 is warm-up, as in bench_trainer
            times.append(dt)
            tokens.append(float(amask.sum()))
        rlens.append(float(rmask.sum(-1).mean()))
    secs = sum(times)
    print(json.dumps({"steps": c.steps, "timed_steps": len(times), "seconds": secs,
                      "steps_per_s": len(times) / secs, "tokens_per_s": sum(tokens) / secs,
                      "vocab_size": c.vocab, "prompt_length_mean": c.prompt_len,
                      "response_length_mean": sum(rlens) / len(rlens), "threads": c.threads,
                      "torch": torch.__version__,
                      "timing_s": {k: v / len(times) for k, v in phases.items()}}))


if __name__ == "__main__":
    main()
