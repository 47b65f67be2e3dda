#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# PyTorch peers for the CUDA backend's MoE block on the same shapes and routing: (1) eager loop over experts (the
# transformers style), (2) torch._grouped_mm over expert-sorted tokens. bf16, one GPU, CUDA-event timing.
# Skips cleanly (writes {"skipped": reason}, exit 0) without torch, without a GPU, or without torch._grouped_mm.
"""Usage: torch_moe_peer.py [--out FILE] [--iters N] [--shapes mixtral-8x7b,deepseek-v3] [--tokens 1,8,64,256,4096]

Routing: each model's own family semantics, as moebench's core/moe_core.cuh route_row: Mixtral = top-k of the
logits then softmax over the k (equal to softmax -> top-k -> renormalise); DeepSeek-V3 = sigmoid scores + score
correction bias for selection, 8 groups ranked by the sum of their top-2, best 4 groups kept, top-8 experts, weights
= un-biased sigmoid scores renormalised and scaled by 2.5. Weights are uniform with moebench's scales
(router / gate / up: +-sqrt(3/H), down: +-sqrt(3/I), correction bias +-0.1), inputs N(0, 1) as moebench's RMS-normed
activations, so the expert load is statistically the same (not the same ids: moebench's RNG is its own). The same
ids and weights feed both peers. The MoE block timed is router GEMM + top-k + sort by expert + expert GEMMs +
activation + weighted combine (+ the shared expert where the model has one), i.e. moebench's phases router_gemm ..
unpermute_reduce. Timing: CUDA events around `iters` calls after 3 warm-up calls."""
import argparse
import json
import sys
import time

SHAPES = {
    # hidden, expert intermediate, experts, top-k, shared intermediate (0 = none); configs/models/*.json
    "mixtral-8x7b": (4096, 14336, 8, 2, 0),
    "deepseek-v3": (7168, 2048, 256, 8, 2048),
}
# Group-limited sigmoid routing (DeepSeek-V3): groups, groups kept, scaling factor; None = top-k then softmax.
ROUTING = {
    "mixtral-8x7b": None,
    "deepseek-v3": (8, 4, 2.5),
}


def write(out, obj):
    text = json.dumps(obj, indent=2)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    print(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--shapes", default="mixtral-8x7b,deepseek-v3")
    ap.add_argument("--tokens", default="1,8,64,256,4096")
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
        write(args.out, {"skipped": "PyTorch is not importable: %s" % e})
        return 0
    if not torch.cuda.is_available():
        write(args.out, {"skipped": "torch.cuda.is_available() is False (no GPU or no driver)"})
        return 0
    has_gmm = hasattr(torch, "_grouped_mm")
    dev = torch.device("cuda")
    torch.manual_seed(0)
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "date_utc":
              time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "source": "measured", "points": [],
              "grouped_mm": "available" if has_gmm else "torch._grouped_mm not in this torch"}

    def timed(fn, iters):
        for _ in range(3):
            fn()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) * 1e3 / iters  # us

    for name in args.shapes.split(","):
        H, I, E, K, SI = SHAPES[name]
        s = (3.0 / H) ** 0.5  # moebench's core::linear_init_scale(fan_in): variance 1 / fan_in
        w_router = (torch.rand(E, H, device=dev, dtype=torch.bfloat16) * 2 - 1) * s
        w_gu = (torch.rand(E, 2 * I, H, device=dev, dtype=torch.bfloat16) * 2 - 1) * s   # [gate; up] per expert
        w_down = (torch.rand(E, H, I, device=dev, dtype=torch.bfloat16) * 2 - 1) * (3.0 / I) ** 0.5
        w_sgu = (torch.rand(2 * SI, H, device=dev, dtype=torch.bfloat16) * 2 - 1) * s if SI else None
        w_sdown = (torch.rand(H, SI, device=dev, dtype=torch.bfloat16) * 2 - 1) * (3.0 / SI) ** 0.5 if SI else None
        corr = (torch.rand(E, device=dev, dtype=torch.float32) * 2 - 1) * 0.1
        group_routing = ROUTING[name]
        # _grouped_mm wants [E, K, N] right operands: transposed views made contiguous once (weights, not timed).
        w_gu_t = w_gu.transpose(1, 2).contiguous() if has_gmm else None
        w_down_t = w_down.transpose(1, 2).contiguous() if has_gmm else None

        def route(x):
            logits = (x @ w_router.t()).float()
            if group_routing is None:  # top-k of the logits, softmax over the k
                top, ids = torch.topk(logits, K, dim=-1)
                return ids, torch.softmax(top, dim=-1)
            groups, keep, scale = group_routing
            scores = torch.sigmoid(logits)
            choice = scores + corr
            gsc = choice.view(-1, groups, E // groups).topk(2, dim=-1).values.sum(-1)
            gidx = gsc.topk(keep, dim=-1).indices
            mask = torch.zeros_like(gsc).scatter_(1, gidx, 1.0)
            mask = mask.unsqueeze(-1).expand(-1, groups, E // groups).reshape(-1, E)
            ids = choice.masked_fill(mask == 0, float("-inf")).topk(K, dim=-1).indices
            w = scores.gather(1, ids)
            return ids, w / (w.sum(-1, keepdim=True) + 1e-20) * scale

        def shared(x):
            if not SI:
                return 0
            h = x @ w_sgu.t()
            return (F.silu(h[:, :SI]) * h[:, SI:]) @ w_sdown.t()

        def eager(x):
            ids, w = route(x)
            out = torch.zeros_like(x, dtype=torch.float32)
            for e in range(E):
                tok, slot = torch.where(ids == e)
                if tok.numel() == 0:
                    continue
                h = x[tok] @ w_gu[e].t()
                y = (F.silu(h[:, :I]) * h[:, I:]) @ w_down[e].t()
                out.index_add_(0, tok, y.float() * w[tok, slot, None])
            return (out + shared(x)).to(torch.bfloat16)

        def grouped(x):
            ids, w = route(x)
            flat = ids.reshape(-1)
            order = torch.argsort(flat, stable=True)
            counts = torch.bincount(flat, minlength=E)
            offs = torch.cumsum(counts, 0).to(torch.int32)
            xs = x[order // K]
            h = torch._grouped_mm(xs, w_gu_t, offs=offs)
            a = F.silu(h[:, :I]) * h[:, I:]
            y = torch._grouped_mm(a, w_down_t, offs=offs)
            out = torch.zeros_like(x, dtype=torch.float32)
            out.index_add_(0, order // K, y.float() * w.reshape(-1)[order, None])
            return (out + shared(x)).to(torch.bfloat16)

        for T in [int(t) for t in args.tokens.split(",")]:
            x = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
            point = {"shape": name, "tokens": T, "hidden": H, "inter": I, "experts": E, "top_k": K, "shared_inter": SI,
                     "routing": "top-k then softmax" if group_routing is None else "sigmoid group-limited (%d groups, "
                     "keep %d, scale %g)" % group_routing}
            try:
                with torch.no_grad():
                    ref = eager(x)
                    point["eager_loop_us"] = round(timed(lambda: eager(x), args.iters), 1)
                    if has_gmm:
                        got = grouped(x)
                        point["grouped_vs_eager_rel_l2"] = float((got.float() - ref.float()).norm() / ref.float().norm())
                        point["grouped_mm_us"] = round(timed(lambda: grouped(x), args.iters), 1)
                    else:
                        point["grouped_mm_us"] = None
            except Exception as e:  # noqa: BLE001 - record and go on (e.g. out of memory at one point)
                point["error"] = str(e)[:300]
            result["points"].append(point)
            print(json.dumps(point), file=sys.stderr)
        del w_gu, w_down, w_gu_t, w_down_t
        torch.cuda.empty_cache()
    write(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
