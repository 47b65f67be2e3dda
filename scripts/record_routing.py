#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Record a moebench routing trace from a Hugging Face transformers MoE model.

Hooks the router (gate) of every MoE layer, runs the model over a text file, computes each token's top-k
with the family's own rule and writes the safetensors trace described in docs/trace-format.md.
Needs torch and transformers; without them it prints "skipped: ..." and exits 0. The writer itself is
plain Python (struct + json), so the file needs neither the safetensors package nor numpy.

Example:
  scripts/record_routing.py --model mistralai/Mixtral-8x7B-v0.1 --text prompts.txt -o mixtral.safetensors
"""
import argparse
import json
import struct
import sys

TRACE_VERSION = "1"

# How each family turns router logits into (ids, weights); mirrors moebench's RoutingKind.
SOFTMAX_TOPK = {"qwen2_moe", "qwen3_moe", "olmoe", "dbrx", "deepseek", "deepseek_v1", "granitemoe"}
TOPK_SOFTMAX = {"mixtral", "gpt_oss", "phimoe", "grok-1", "minimax"}
SIGMOID_GROUP = {"deepseek_v3", "kimi_k2", "glm4_moe"}
SOFTMAX_GROUP = {"deepseek_v2"}
TOPK_SIGMOID = {"llama4", "llama4_text"}


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, dtype, shape, raw little-endian bytes). Writes the format by hand."""
    header, offset, blobs = {}, 0, []
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    import os
    os.replace(tmp, path)


def write_trace(path, topk_ids, topk_weights, seq_starts, num_experts, model, source, token_ids=None):
    """topk_ids / topk_weights: nested lists [layers][tokens][k] (weights may be None); seq_starts: list of ints."""
    layers, tokens, k = len(topk_ids), len(topk_ids[0]), len(topk_ids[0][0])
    flat_ids = [e for layer in topk_ids for tok in layer for e in tok]
    tensors = [("topk_ids", "I32", (layers, tokens, k), struct.pack("<%di" % len(flat_ids), *flat_ids))]
    if topk_weights is not None:
        flat_w = [w for layer in topk_weights for tok in layer for w in tok]
        tensors.append(("topk_weights", "F32", (layers, tokens, k), struct.pack("<%df" % len(flat_w), *flat_w)))
    if token_ids is not None:
        tensors.append(("token_ids", "I32", (tokens,), struct.pack("<%di" % tokens, *token_ids)))
    tensors.append(("seq_starts", "I64", (len(seq_starts),), struct.pack("<%dq" % len(seq_starts), *seq_starts)))
    metadata = {"model": model, "num_experts": num_experts, "num_layers": layers, "top_k": k, "source": source,
                "moebench_trace_version": TRACE_VERSION}
    write_safetensors(path, tensors, metadata)


def select(logits, family, cfg, torch, gate):
    """Top-k of one layer's router logits [T, E] with the family's rule; returns (ids [T,k], weights [T,k])."""
    k = getattr(cfg, "num_experts_per_tok", None) or getattr(cfg, "top_k", None) or getattr(cfg, "moe_topk", 2)
    logits = logits.float()
    if family in TOPK_SOFTMAX:
        vals, ids = torch.topk(logits, k, dim=-1)
        return ids, torch.softmax(vals, dim=-1)
    if family in TOPK_SIGMOID:
        vals, ids = torch.topk(logits, k, dim=-1)
        return ids, torch.sigmoid(vals)
    if family in SIGMOID_GROUP or family in SOFTMAX_GROUP:
        scores = torch.sigmoid(logits) if family in SIGMOID_GROUP else torch.softmax(logits, dim=-1)
        sel = scores.clone()
        bias = getattr(gate, "e_score_correction_bias", None)
        if bias is not None:
            sel = sel + bias.float()
        groups = getattr(cfg, "n_group", 1) or 1
        topk_groups = getattr(cfg, "topk_group", groups) or groups
        t, e = sel.shape
        grouped = sel.view(t, groups, e // groups)
        if family in SIGMOID_GROUP:
            group_score = grouped.topk(2, dim=-1).values.sum(-1)
        else:
            group_score = grouped.max(dim=-1).values
        keep = torch.zeros_like(group_score).scatter_(1, group_score.topk(topk_groups, dim=-1).indices, 1.0)
        mask = keep.unsqueeze(-1).expand(t, groups, e // groups).reshape(t, e)
        ids = sel.masked_fill(mask == 0, float("-inf")).topk(k, dim=-1).indices
        w = scores.gather(1, ids)
        if getattr(cfg, "norm_topk_prob", family in SIGMOID_GROUP):
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return ids, w * float(getattr(cfg, "routed_scaling_factor", 1.0) or 1.0)
    # Default: softmax over all experts, then top-k, optional renormalisation (Qwen, OLMoE, DBRX, ...).
    probs = torch.softmax(logits, dim=-1)
    w, ids = torch.topk(probs, k, dim=-1)
    if getattr(cfg, "norm_topk_prob", False):
        w = w / w.sum(-1, keepdim=True)
    return ids, w


def find_gates(model, num_experts):
    """MoE router modules: named *.gate or *.router, holding a weight of shape [num_experts, hidden]."""
    gates = []
    for name, mod in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        w = getattr(mod, "weight", None)
        if leaf in ("gate", "router") and w is not None and w.dim() == 2 and w.shape[0] == num_experts:
            gates.append((name, mod))
    return gates


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="Hugging Face model id or local folder")
    p.add_argument("--text", required=True, help="text file; each non-empty line (or blank-line paragraph) is one sequence")
    p.add_argument("-o", "--out", required=True, help="output .safetensors trace")
    p.add_argument("--max-tokens", type=int, default=4096, help="stop after this many tokens in total")
    p.add_argument("--max-seq-len", type=int, default=1024, help="truncate each sequence to this many tokens")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:0, ...)")
    p.add_argument("--dtype", default="bfloat16", help="torch dtype of the weights")
    p.add_argument("--random-weights", action="store_true",
                   help="build the model from its config with random weights (tests the hooks without a download)")
    args = p.parse_args(argv)

    try:
        import torch
        import transformers
    except ImportError as e:
        print("skipped: torch/transformers not installed (%s); install them to record a routing trace" % e)
        return 0

    cfg = transformers.AutoConfig.from_pretrained(args.model)
    text_cfg = getattr(cfg, "text_config", None) or cfg
    family = getattr(text_cfg, "model_type", "") or getattr(cfg, "model_type", "")
    num_experts = (getattr(text_cfg, "num_local_experts", None) or getattr(text_cfg, "num_experts", None)
                   or getattr(text_cfg, "n_routed_experts", None))
    if not num_experts:
        print("error: %s has no routed experts in its config" % args.model, file=sys.stderr)
        return 2
    dtype = getattr(torch, args.dtype)
    if args.random_weights:
        model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype)
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype)
    model.to(args.device).eval()
    tok = transformers.AutoTokenizer.from_pretrained(args.model)

    gates = find_gates(model, num_experts)
    if not gates:
        print("error: found no router modules (*.gate / *.router with %d outputs)" % num_experts, file=sys.stderr)
        return 2
    captured = {i: [] for i in range(len(gates))}

    def hook(i, mod):
        def fn(module, inputs, output):
            x = inputs[0].reshape(-1, inputs[0].shape[-1])
            logits = torch.nn.functional.linear(x.float(), module.weight.float(),
                                                None if getattr(module, "bias", None) is None else module.bias.float())
            captured[i].append(logits.detach().cpu())
        return fn

    handles = [mod.register_forward_hook(hook(i, mod)) for i, (_, mod) in enumerate(gates)]
    with open(args.text) as f:
        raw = f.read()
    seqs = [s.strip() for s in (raw.split("\n\n") if "\n\n" in raw else raw.splitlines()) if s.strip()]
    token_ids, seq_starts, total = [], [], 0
    with torch.no_grad():
        for s in seqs:
            if total >= args.max_tokens:
                break
            ids = tok(s, return_tensors="pt").input_ids[:, : min(args.max_seq_len, args.max_tokens - total)]
            seq_starts.append(total)
            token_ids.extend(int(t) for t in ids[0])
            total += ids.shape[1]
            model(ids.to(args.device))
    for h in handles:
        h.remove()

    all_ids, all_w = [], []
    for i, (_, gate) in enumerate(gates):
        logits = torch.cat(captured[i], dim=0)
        ids, w = select(logits, family, text_cfg, torch, gate)
        all_ids.append(ids.int().tolist())
        all_w.append(w.float().tolist())
    write_trace(args.out, all_ids, all_w, seq_starts, num_experts, args.model,
                "scripts/record_routing.py %s (%s routing)" % (args.model, family or "unknown"), token_ids)
    print("wrote %s: %d layers x %d tokens, %d sequences" % (args.out, len(gates), total, len(seq_starts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
