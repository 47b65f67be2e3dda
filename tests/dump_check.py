#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end check of every shipped MoE model's block through the CLI, against scripts/check_moe_dump.py.

The conformance case list (tests/conformance.py): the tiny model of each configs/models/*.json with experts (same
routing, groups, scaling, biases, shared experts and their gate, activation, attention kind; small widths), committed
in tests/data/conformance/models/, runs under each variant of tests/data/conformance/cases.json through
`moebench run --backend cpu --dump-tensors`, and the dump is recomputed by the numpy reference.
Usage: tests/dump_check.py MOEBENCH REPO_ROOT. Exit 77 (skip) without numpy.
"""
import importlib.util
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance  # noqa: E402  (the case list, next to this file)

try:
    import numpy  # noqa: F401  (the checker needs it)
except ImportError:
    print("dump_check: skipped, numpy is not installed (Debian: python3-numpy)")
    sys.exit(77)

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
    models_dir = os.path.join(root, "tests", "data", "conformance", "models")
    variants = [(v["name"], conformance.variant_flags(v)) for v in conformance.cases(root)]
    failures, runs = [], 0
    with tempfile.TemporaryDirectory(prefix="moebench-dump-check-") as tmp:
        for model_name in sorted(os.listdir(models_dir)):
            model_file = os.path.join(models_dir, model_name)
            fname = model_name[len("tiny-"):]
            for name, flags in variants:
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
