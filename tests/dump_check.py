#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end check of every shipped MoE model's block through the CLI, against scripts/check_moe_dump.py.

Each configs/models/*.json with experts is shrunk to a tiny model of the same family (same routing, groups,
scaling, biases, shared experts and their gate, activation, attention kind; small widths), run by
`moebench run --backend cpu --dump-tensors` under several routing options, and the dump is recomputed by the
numpy reference. Usage: tests/dump_check.py MOEBENCH REPO_ROOT. Exit 77 (skip) without numpy.
"""
import importlib.util
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy  # noqa: F401  (the checker needs it)
except ImportError:
    print("dump_check: skipped, numpy is not installed (Debian: python3-numpy)")
    sys.exit(77)

# (name, extra flags): the family's own routing at decode and prefill, capacity drops, soft top-N, a workload.
VARIANTS = [
    ("decode", ["--mode", "decode", "--batch", "16", "--context", "8"]),
    ("prefill", ["--mode", "prefill", "--batch", "2", "--seq-len", "12"]),
    ("capacity", ["--mode", "decode", "--batch", "16", "--context", "4", "--capacity-factor", "1.0"]),
    ("soft-topn", ["--mode", "decode", "--batch", "8", "--context", "4", "--soft-topn", "3"]),
    ("zipf", ["--mode", "decode", "--batch", "16", "--context", "4", "--routing", "zipf:1.2"]),
]


def shrink(m):
    """A tiny model of m's family: widths cut, every semantic switch kept."""
    t = json.loads(json.dumps(m))
    t["name"] = "tiny-" + m["name"]
    t["unconfirmed"] = True
    t["notes"] = "Shrunk by tests/dump_check.py from " + m["name"]
    t["vocab_size"], t["hidden_size"], t["num_layers"], t["max_position_embeddings"] = 128, 64, 2, 256
    t["num_mtp_layers"] = 0
    dense = m.get("dense_layers", [])
    t["dense_layers"] = [0] if 0 in dense else []  # layer 1 is always a MoE layer
    if m.get("sliding_layers"):
        t["sliding_layers"] = [0]
    if m.get("dense_intermediate_size", 0):
        t["dense_intermediate_size"] = 96
    a = t["attention"]
    if a["kind"] == "mla":
        a.update(num_heads=4, num_kv_heads=4, head_dim=12, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                 v_head_dim=8)
        if a.get("q_lora_rank", 0):
            a["q_lora_rank"] = 32
    else:
        a.update(num_kv_heads=4 if a["num_kv_heads"] == a["num_heads"] else 2, num_heads=4, head_dim=16)
    if a.get("sliding_window", 0):
        a["sliding_window"] = 8
    if a.get("attention_chunk", 0):
        a["attention_chunk"] = 8
    moe = t["moe"]
    groups = max(1, moe.get("num_groups", 1))
    moe["num_experts"] = min(moe["num_experts"], 32)
    assert moe["num_experts"] % groups == 0 and moe["top_k"] <= moe["num_experts"]
    moe["expert_intermediate_size"] = 32
    if moe["routing"] == "sparsemixer":
        moe["router_jitter_noise"] = 0.1  # a wider band than PhiMoE's 0.01, so that other logits fall inside it
    if moe.get("shared_intermediate_size", 0):
        moe["shared_intermediate_size"] = 48
    return t


def write_safetensors(path, tensors, meta):
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name, a in tensors.items():
        b = a.tobytes()
        header[name] = {"dtype": {"float32": "F32", "int32": "I32"}[str(a.dtype)], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def negative_controls(checker, dump, tmp):
    """The checker must fail on a dump whose output, weights or routing semantics are wrong."""
    spec = importlib.util.spec_from_file_location("check_moe_dump", checker)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t, meta = mod.read_safetensors(dump)
    t = {n: v.copy() for n, v in t.items()}
    cases = []
    out = dict(t)
    out["moe_out"] = t["moe_out"].copy()
    out["moe_out"][0, 0] += 0.01 * float(abs(t["moe_out"]).max())
    cases.append(("moe_out off by 1% of its range", out, meta))
    w = dict(t)
    w["topk_weights"] = t["topk_weights"].copy()
    w["topk_weights"][1, 0] *= 1.01
    cases.append(("one combine weight off by 1%", w, meta))
    # (topk_softmax and softmax_topk with renormalisation are the same math: not a control)
    other = {"sparsemixer": "topk_softmax", "topk_softmax": "topk_sigmoid"}.get(meta["routing"], "topk_softmax")
    cases.append((f"routing {meta['routing']} read as {other}", t, dict(meta, routing=other)))
    failures = []
    for what, tensors, m in cases:
        path = os.path.join(tmp, "corrupt.safetensors")
        write_safetensors(path, tensors, m)
        r = subprocess.run([sys.executable, checker, path, "--quiet"], capture_output=True, text=True)
        print(f"negative control ({what}): checker exit {r.returncode}")
        if r.returncode != 1:
            failures.append(f"negative control '{what}' on {dump}: checker exit {r.returncode}, expected 1")
    return failures


def main():
    moebench, root = sys.argv[1], sys.argv[2]
    checker = os.path.join(root, "scripts", "check_moe_dump.py")
    models_dir = os.path.join(root, "configs", "models")
    failures, runs = [], 0
    with tempfile.TemporaryDirectory(prefix="moebench-dump-check-") as tmp:
        for fname in sorted(os.listdir(models_dir)):
            m = json.load(open(os.path.join(models_dir, fname)))
            if m.get("moe", {}).get("num_experts", 0) <= 0:
                continue
            model_file = os.path.join(tmp, "tiny-" + fname)
            with open(model_file, "w") as f:
                json.dump(shrink(m), f)
            for name, flags in VARIANTS:
                out_dir = os.path.join(tmp, f"{fname}-{name}")
                cmd = [moebench, "run", "--model", model_file, "--backend", "cpu", "--layers", "2", "--warmup", "0",
                       "--iters", "1", "--threads", "2", "--seed", "7", "--dump-tensors", out_dir,
                       "--out", os.path.join(tmp, "report.json")] + flags
                r = subprocess.run(cmd, capture_output=True, text=True)
                runs += 1
                if r.returncode != 0:
                    failures.append(f"{fname} {name}: moebench exit {r.returncode}: {r.stderr.strip()[-400:]}")
                    continue
                c = subprocess.run([sys.executable, checker, os.path.join(out_dir, "moe_layer.safetensors")],
                                   capture_output=True, text=True)
                print(f"{fname:28s} {name:10s} {c.stdout.strip().split(': ', 1)[-1]}")
                if c.returncode != 0:
                    failures.append(f"{fname} {name}: {c.stdout.strip()} {c.stderr.strip()}")
                elif name == "decode" and fname in ("mixtral-8x7b.json", "phi-3.5-moe.json"):
                    failures += negative_controls(checker, os.path.join(out_dir, "moe_layer.safetensors"), tmp)
    print(f"dump_check: {runs} runs, {len(failures)} failures")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures or runs == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
