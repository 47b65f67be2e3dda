#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Recompute a MoE block from `moebench run --dump-tensors DIR` with numpy alone, and compare.

Usage: scripts/check_moe_dump.py DIR/moe_layer.safetensors [--rtol 1e-4] [--quiet]

Independent of moebench's code: the safetensors file is read by hand (8-byte header length, JSON header, raw
little-endian data), and each family's routing is written from the model's reference implementation (Hugging Face
transformers and the vendors' inference code), in float64:

  softmax_topk          softmax over all experts, top-k, optional renormalisation (Qwen-MoE, OLMoE, DBRX)
  topk_softmax          top-k of the logits (+ router bias), softmax over the k (Mixtral, gpt-oss)
  sigmoid_group_topk    sigmoid; choice scores + e_score_correction_bias; groups ranked by the sum of their two best;
                        top-k inside the best topk_groups groups; weights from the plain sigmoid, renormalised,
                        x routed_scaling_factor (DeepSeek-V3, Kimi-K2)
  softmax_group_greedy  softmax; groups ranked by their best; top-k inside the best topk_groups groups;
                        renormalised if norm_topk_prob and k > 1, else x routed_scaling_factor (DeepSeek-V2's
                        modeling_deepseek.py)
  topk_sigmoid          top-k of the logits, sigmoid of those; the score scales the expert's INPUT (Llama-4)
  sparsemixer           top-2 of the logits; each weight a softmax over only the logits l with
                        (m - l) / max(|l|, m) <= 2 router_jitter_noise around that expert's logit m, the first
                        expert left out of the second's (PhiMoE, modeling_phimoe.py sparsemixer at inference)

Ties: the higher score wins, on equal scores the lower expert id (the dump's `tie_break`). Routing is compared as
sets per token; a token whose k-th and (k+1)-th scores are within 1e-5 is reported as a near tie, not a mismatch.
Where a workload imposed the routing (metadata `workload` other than `router`), or soft top-N or a capacity factor
is in force, the dumped ids and weights are checked for consistency and used for the output.

Exit status: 0 all within tolerance, 1 a mismatch, 2 a file that cannot be read.
"""
import argparse
import json
import math
import struct
import sys

try:
    import numpy as np
except ImportError:  # the test that calls this script skips on exit 77
    print("check_moe_dump: numpy is not installed (Debian: apt-get install python3-numpy)", file=sys.stderr)
    sys.exit(77)

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "BF16": None, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        dt = DTYPES.get(info["dtype"])
        if dt is None:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, expected F32 or I32")
        a, b = info["data_offsets"]
        tensors[name] = np.frombuffer(blob[base + a:base + b], dtype=np.dtype(dt).newbyteorder("<")).reshape(info["shape"])
    return tensors, meta


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def top_k(scores, k):
    # Higher first; stable sort of the negated scores keeps the lower id first on equal scores.
    return np.argsort(-scores, axis=-1, kind="stable")[..., :k]


def mask_groups(choice, num_groups, topk_groups, group_score):
    t, e = choice.shape
    g = choice.reshape(t, num_groups, e // num_groups)
    gs = group_score(g)  # [t, groups]
    keep = top_k(gs, topk_groups)
    mask = np.full((t, num_groups), True)
    np.put_along_axis(mask, keep, False, axis=1)
    return np.where(np.repeat(mask, e // num_groups, axis=1), -np.inf, choice)


def close(a, b, eps=1e-5):
    return abs(a - b) <= eps * max(1.0, abs(a), abs(b))


def near_tie(meta, row_logits, row_corr_choice, k, soft):
    """True where fp32 rounding may legitimately change this token's selection or sparsemixer weights: the k-th and
    (k+1)-th selection scores tie, two group scores tie at the group cut, or (sparsemixer) the first two logits tie
    or a logit sits on the edge of a band."""
    srt = np.sort(row_corr_choice)[::-1]
    if k < srt.size and np.isfinite(srt[k]) and close(srt[k - 1], srt[k]):
        return True
    kind = meta["routing"]
    groups, topk_groups = int(meta.get("num_groups", "1") or 1), int(meta.get("topk_groups", "1") or 1)
    if soft <= 0 and groups > 1 and topk_groups < groups and kind in ("sigmoid_group_topk", "softmax_group_greedy"):
        g = row_corr_choice.reshape(groups, -1)
        gs = np.sort(g, axis=1)[:, -2:].sum(axis=1) if kind == "sigmoid_group_topk" else g.max(axis=1)
        gs = np.sort(gs)[::-1]
        if close(gs[topk_groups - 1], gs[topk_groups]):
            return True
    if soft <= 0 and kind == "sparsemixer":
        eps = float(meta.get("router_jitter_noise", "0.01"))
        l = row_logits
        order = np.argsort(-l, kind="stable")
        if close(l[order[0]], l[order[1]]):
            return True
        with np.errstate(divide="ignore", invalid="ignore"):
            for m in (l[order[0]], l[order[1]]):
                band = (m - l) / np.maximum(np.abs(l), m)
                if np.any(np.isfinite(band) & (np.abs(band - 2 * eps) <= 1e-5)):
                    return True
    return False


def route(meta, logits, corr):
    """(ids [T,k], weights [T,k], selection scores [T,E]) of the family's routing."""
    kind, k = meta["routing"], int(meta["top_k"])
    norm = meta.get("norm_topk_prob", "false") == "true"
    scale = float(meta.get("routed_scaling_factor", "1") or 1)
    groups, topk_groups = int(meta.get("num_groups", "1") or 1), int(meta.get("topk_groups", "1") or 1)
    if kind == "softmax_topk":
        p = softmax(logits)
        choice = p + corr if corr is not None else p  # ERNIE-4.5: the correction bias picks, the weights stay p
        ids = top_k(choice, k)
        w = np.take_along_axis(p, ids, axis=1)
        if norm:
            w = w / w.sum(axis=1, keepdims=True)
        return ids, w * scale, choice  # the scale is 1 in these families' configs; moebench applies it when set
    if kind == "topk_softmax":
        ids = top_k(logits, k)
        return ids, softmax(np.take_along_axis(logits, ids, axis=1)), logits
    if kind == "sigmoid_group_topk":
        s = sigmoid(logits)
        choice = s + (corr if corr is not None else 0.0)
        if groups > 1:
            choice = mask_groups(choice, groups, topk_groups, lambda g: np.sort(g, axis=-1)[..., -2:].sum(axis=-1))
        ids = top_k(choice, k)
        w = np.take_along_axis(s, ids, axis=1)
        if norm:
            w = w / w.sum(axis=1, keepdims=True)
        return ids, w * scale, choice
    if kind == "softmax_group_greedy":
        p = softmax(logits)
        choice = mask_groups(p, groups, topk_groups, lambda g: g.max(axis=-1)) if groups > 1 else p
        ids = top_k(choice, k)
        w = np.take_along_axis(p, ids, axis=1)
        if norm and k > 1:
            return ids, w / (w.sum(axis=1, keepdims=True) + 1e-20), choice
        return ids, w * scale, choice
    if kind == "topk_sigmoid":
        ids = top_k(logits, k)
        return ids, sigmoid(np.take_along_axis(logits, ids, axis=1)), logits
    if kind == "sparsemixer":
        eps = float(meta.get("router_jitter_noise", "0.01"))
        ids = top_k(logits, 2)
        w = np.zeros(ids.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            for j in range(2):
                m = np.take_along_axis(logits, ids[:, j:j + 1], axis=1)
                masked = (m - logits) / np.maximum(np.abs(logits), m) > 2 * eps  # NaN (0/0) compares False: kept
                if j == 1:
                    np.put_along_axis(masked, ids[:, :1], True, axis=1)
                z = np.where(masked, 0.0, np.exp(logits - m))
                w[:, j] = 1.0 / z.sum(axis=1)
        return ids, w, logits
    raise ValueError(f"routing {kind!r} is not one this checker knows")


def activation(meta, g, u):
    act = meta.get("activation", "swiglu")
    if act == "swiglu":
        return g * sigmoid(g) * u
    if act == "geglu":  # tanh approximation (jax.nn.gelu, Grok-1)
        return 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3))) * u
    if act == "swiglu_oai":  # gpt-oss: clamp, alpha 1.702, (up + 1)
        limit = float(meta.get("swiglu_limit", "7") or 7)
        limit = limit if limit > 0 else 7.0
        g = np.minimum(g, limit)
        u = np.clip(u, -limit, limit)
        return g * sigmoid(1.702 * g) * (u + 1.0)
    raise ValueError(f"activation {act!r} is not one this checker knows")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--rtol", type=float, default=1e-4, help="max |diff| / max |moe_out| allowed (default 1e-4)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    try:
        t, meta = read_safetensors(a.file)
    except (OSError, ValueError, KeyError) as e:
        print(f"check_moe_dump: cannot read {a.file}: {e}", file=sys.stderr)
        return 2
    f64 = {n: v.astype(np.float64) for n, v in t.items() if v.dtype == np.float32}
    x = f64["moe_in"]
    T, H = x.shape
    E = int(meta["num_experts"])
    ids_d, w_d = t["topk_ids"].astype(np.int64), f64["topk_weights"]
    k = ids_d.shape[1]
    problems = []

    logits = x @ f64["router_weight"].T
    if "router_bias" in f64:
        logits = logits + f64["router_bias"]
    corr = f64.get("e_score_correction_bias")
    ids_r, w_r, choice = route(meta, logits, corr)
    # Selection scores before any group mask, for the near-tie test.
    kind = meta["routing"]
    bias = corr if corr is not None else 0.0
    raw_choice = (sigmoid(logits) + bias if kind == "sigmoid_group_topk"
                  else softmax(logits) + bias if kind == "softmax_topk"
                  else softmax(logits) if kind == "softmax_group_greedy" else logits)
    imposed = meta.get("workload", "router") != "router"
    soft = int(meta.get("soft_topn", "0") or 0)
    cf = float(meta.get("capacity_factor", "0") or 0)
    near_ties = 0
    if soft > 0 and not imposed:  # weighted mix of the N most probable experts
        p = softmax(logits)
        ids_r = top_k(p, soft)
        w_r = np.take_along_axis(p, ids_r, axis=1)
        w_r = w_r / w_r.sum(axis=1, keepdims=True)
        choice = raw_choice = p
    if not imposed:
        if ids_r.shape[1] != k:
            problems.append(f"topk_ids has {k} columns, the routing selects {ids_r.shape[1]}")
        else:
            for i in range(T):
                kept = ids_d[i] >= 0
                tie = near_tie(meta, logits[i], raw_choice[i], k, soft)
                if not set(ids_d[i][kept]) <= set(ids_r[i]) or (cf <= 0 and kept.sum() != k):
                    if tie:
                        near_ties += 1
                        continue
                    problems.append(f"token {i}: dumped experts {sorted(ids_d[i].tolist())}, reference {sorted(ids_r[i].tolist())}")
                    continue
                ref = dict(zip(ids_r[i].tolist(), w_r[i].tolist()))
                bad = [j for j in range(k) if ids_d[i, j] >= 0 and not close(w_d[i, j], ref[int(ids_d[i, j])])]
                if bad and tie:
                    near_ties += 1
                    continue
                for j in bad:
                    problems.append(f"token {i}: weight of expert {ids_d[i, j]} is {w_d[i, j]:.7g}, reference {ref[int(ids_d[i, j])]:.7g}")
    if cf > 0:  # capacity = ceil(C T k / E); overflow dropped in arrival order (token, then slot)
        cap = math.ceil(round(cf * T * k / E, 9))
        counts = np.zeros(E, dtype=np.int64)
        for i in range(T):
            for j in range(k):
                e = int(ids_d[i, j]) if ids_d[i, j] >= 0 else (int(ids_r[i, j]) if not imposed and ids_r.shape[1] == k else -1)
                if e < 0:
                    continue
                if ids_d[i, j] >= 0:
                    counts[e] += 1
                    if counts[e] > cap:
                        problems.append(f"expert {e} holds more than its capacity {cap} tokens")
                elif counts[e] < cap:
                    problems.append(f"token {i} slot {j}: dropped from expert {e}, which had room ({counts[e]} < {cap})")
    if ids_d.max() >= E:
        problems.append(f"topk_ids holds expert {ids_d.max()} >= num_experts {E}")

    # The block's output from the dumped selection.
    scale_in = meta["routing"] == "topk_sigmoid"
    out = np.zeros((T, H))
    for e in range(E):
        rows, slots = np.nonzero(ids_d == e)
        if rows.size == 0:
            continue
        xe = x[rows] * (w_d[rows, slots][:, None] if scale_in else 1.0)
        g = xe @ f64["w_gate"][e].T
        u = xe @ f64["w_up"][e].T
        if "b_gate" in f64:
            g, u = g + f64["b_gate"][e], u + f64["b_up"][e]
        y = activation(meta, g, u) @ f64["w_down"][e].T
        if "b_down" in f64:
            y = y + f64["b_down"][e]
        np.add.at(out, rows, y * (1.0 if scale_in else w_d[rows, slots][:, None]))
    if "shared_w_gate" in f64:
        sh = activation(meta, x @ f64["shared_w_gate"].T, x @ f64["shared_w_up"].T) @ f64["shared_w_down"].T
        if "shared_gate_weight" in f64:
            sh = sigmoid(x @ f64["shared_gate_weight"].T) * sh
        out += sh
    moe_out = f64["moe_out"]
    scale = max(np.abs(out).max(), 1e-30)
    err = np.abs(out - moe_out).max() / scale
    if err > a.rtol:
        problems.append(f"moe_out: max |diff| / max |reference| = {err:.3g} > {a.rtol:g}")
    if not a.quiet or problems:
        print(f"{a.file}: model {meta.get('model')} family {meta.get('family')} routing {meta['routing']} "
              f"workload {meta.get('workload')} T={T} H={H} E={E} k={k}: moe_out rel err {err:.3g}, "
              f"{near_ties} near ties, {len(problems)} problems")
    for p in problems[:20]:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
