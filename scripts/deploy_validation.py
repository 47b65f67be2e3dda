#!/usr/bin/env python3
"""Reproduce published serving measurements with `moebench deploy` and write docs/deploy-validation.md.

Each row of tests/data/deploy/measurements.csv (public measurements, each with its source, URL and locator) is mapped
to one `moebench deploy` command: the model to a shipped config (configs/models), the GPU to a hardware profile
(configs/hardware), the checkpoint's formats to --dtype/--expert-dtype/--kv-dtype, the engine's TP/EP/DP-attention
to --tp/--attention-dp/--moe-tp/--moe-ep, and ISL/OSL/concurrency as measured. A row that cannot be mapped is
skipped with its reason (speculative decoding, no fixed concurrency, no profile, ...). The rows run two at a time;
the modeled TTFT and TPOT sit beside the measured ones with the error, and the error's median, 90th percentile and
share within 30% per hardware and per engine.

Calibration (--fit): per hardware profile at most, never per row. The sim's memory_efficiency and phase_overhead_us
(within physical bounds) are fitted on the training split (the rows of source S01 with an odd
number: M0001, M0003, ...) by Gauss-Newton on the log error of TPOT (Huber-weighted), and the errors are reported
separately on the held-out rows (S01's even rows and every other source), on the training rows and on all. --write-profiles puts the fitted values into the profiles' `sim` objects.

Python 3 standard library only. Usage:
  scripts/deploy_validation.py [--moebench build/moebench] [--jobs 2] [--fit [--write-profiles]] [--out docs/deploy-validation.md]
"""

import argparse
import concurrent.futures
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "deploy", "measurements.csv")
DOC = os.path.join(ROOT, "docs", "deploy-validation.md")
MISSES_BEGIN = "<!-- misses: written by hand from the numbers; scripts/deploy_validation.py keeps this block -->"
MISSES_END = "<!-- end misses -->"

# The published model name (prefix, lower case) -> the shipped config that has its architecture.
MODEL_MAP = [
    ("deepseek-v3.2", "deepseek-v3.2", None),
    ("deepseek-r1", "deepseek-v3", "DeepSeek-R1 has DeepSeek-V3's architecture"),
    ("deepseek-v3", "deepseek-v3", None),
    ("glm-4.5-air", "glm-4.5-air", None),
    ("glm-4.6", "glm-4.5", "GLM-4.6 has GLM-4.5's architecture (355B, 32B active)"),
    ("glm-4.5", "glm-4.5", None),
    ("glm-5", "glm-5", None),
    ("qwen3-235b-a22b", "qwen3-235b-a22b", None),
    ("qwen3-30b-a3b", "qwen3-30b-a3b", None),
    ("gpt-oss-120b", "gpt-oss-120b", None),
    ("gpt-oss-20b", "gpt-oss-20b", None),
    ("mixtral-8x7b", "mixtral-8x7b", None),
    ("llama-4-maverick", "llama4-maverick", None),
    ("llama-4-scout", "llama4-scout", None),
    ("kimi-k2", "kimi-k2", None),
]

# The published GPU name (prefix, lower case) -> the hardware profile.
HARDWARE_MAP = [
    ("gb200", "gb200"),
    ("gb300", "gb300"),
    ("b200", "b200"),
    ("b300", "b300"),
    ("h200", "h200-sxm"),
    ("h100", "h100-sxm"),
    ("h800", "h800"),
    ("a100", "a100-sxm-80gb"),
    ("mi300x", "mi300x"),
    ("mi355x", "mi355x"),
]

# Models whose dense part ships in block FP8 beside FP4 experts (DeepSeek's FP4 checkpoints keep attention in FP8).
FP8_BLOCK_MODELS = {"deepseek-v3", "deepseek-v3.2"}

TARGET_TPOT_MEDIAN = 15.0
TARGET_WITHIN = 30.0
TARGET_SHARE = 80.0


def load_profiles(root=ROOT):
    """name -> parsed hardware profile of configs/hardware."""
    out = {}
    folder = os.path.join(root, "configs", "hardware")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                out[name[:-5]] = json.load(f)
    return out


def shipped_models(root=ROOT):
    folder = os.path.join(root, "configs", "models")
    return {n[:-5] for n in os.listdir(folder) if n.endswith(".json")}


def row_number(row_id):
    m = re.match(r"[A-Z]+0*(\d+)$", row_id)
    return int(m.group(1)) if m else 0


FIT_SOURCE = "S01"


def split_of(row_id, source_id):
    """The deterministic split: the rows of S01 (InferenceX: one harness, engines of 2025-10 to 2026-06) with an odd
    number fit; every other row (S01's even rows, every other source) is held out."""
    return "fit" if source_id == FIT_SOURCE and row_number(row_id) % 2 == 1 else "held-out"


def _int(text):
    text = (text or "").strip()
    if not text:
        return None
    try:
        v = float(text)
    except ValueError:
        return None
    return int(v) if v == int(v) else None


def _float(text):
    try:
        return float((text or "").strip())
    except ValueError:
        return None


def map_model(name):
    low = name.strip().lower()
    for prefix, config, note in MODEL_MAP:
        if low.startswith(prefix):
            return config, note
    return None, None


def map_hardware(name):
    low = name.strip().lower()
    for prefix, profile in HARDWARE_MAP:
        if low.startswith(prefix):
            return profile
    return None


def map_precision(row, model, profile):
    """(dtype, expert_dtype, kv_dtype, notes) or raises ValueError(reason)."""
    wp = row["weights_precision"].lower()
    kv_col = row["kv_precision"].lower()
    engine = row["engine"].lower()
    has_fp4 = (profile.get("fp4_tflops") or 0) > 0
    has_fp8 = (profile.get("fp8_tflops") or 0) > 0
    notes = []
    if "int8" in wp:
        raise ValueError("INT8 weights: moebench has no int8 format")
    if "mxfp4 moe" in wp or (model.startswith("gpt-oss") and ("fp4" in wp or "fp8" in wp)):
        # gpt-oss ships MXFP4 experts beside BF16 attention whatever the table's column says.
        dense = "bf16"
        if has_fp4:
            expert = "mxfp4"
        else:
            expert = "int4"
            notes.append("MXFP4 experts run weight-only on a GPU without FP4 units: modeled as int4 (4-bit weights, bf16 math)")
    elif "bf16 (lmsys" in wp:
        dense, expert = "bf16", "bf16"
    elif "nvfp4" in wp or "mxfp4" in wp or "fp4" in wp:
        expert = "mxfp4" if "mxfp4" in wp else "nvfp4"
        if not has_fp4:
            raise ValueError(f"{expert} weights on {profile['name']}, whose profile has no FP4 rate")
        dense = "fp8-block" if model in FP8_BLOCK_MODELS else "bf16"
        notes.append(f"FP4 checkpoint: routed experts {expert}, the dense part {dense}")
    elif "fp8" in wp:
        if not has_fp8:
            raise ValueError(f"FP8 weights on {profile['name']}, whose profile has no FP8 rate")
        dense = expert = "fp8-block" if ("block" in wp or model in FP8_BLOCK_MODELS) else "fp8"
    elif "bf16" in wp or "fp16" in wp:
        dense = expert = "bf16"
    else:
        raise ValueError(f"weights precision '{row['weights_precision']}' not mapped")
    if "fp8" in kv_col:
        kv = "fp8"
    elif "bf16" in kv_col or "fp16" in kv_col:
        kv = "bf16"
    elif "tensorrt" in engine and has_fp8 and model in FP8_BLOCK_MODELS:
        kv = "fp8"
        notes.append("KV cache not stated: TensorRT-LLM's DeepSeek recipes use an FP8 KV cache")
    else:
        kv = "bf16"
        if not kv_col:
            notes.append("KV cache not stated: the engine's default (bf16)")
    return dense, expert, kv, notes


def map_layout(row):
    """{'tp', 'attention_dp', 'moe_tp', 'moe_ep', 'gpus'} or raises ValueError(reason)."""
    pp = _int(row["pp"])
    if pp and pp > 1:
        raise ValueError(f"pipeline parallel {pp}: not modeled")
    tp = _int(row["tp"])
    gpus = _int(row["num_gpus"])
    if tp is None:
        if gpus is None:
            raise ValueError("layout not stated")
        tp = gpus
    ep = _int(row["ep"]) or 1
    if tp < 1 or ep < 1 or tp % ep:
        raise ValueError(f"TP {tp} with EP {ep}: EP does not divide the GPUs")
    dp = row["dp_attention"].strip().lower().startswith("yes")
    if dp:
        layout = {"tp": 1, "attention_dp": tp, "moe_tp": tp // ep, "moe_ep": ep}
    else:
        layout = {"tp": tp, "attention_dp": 1, "moe_tp": tp // ep, "moe_ep": ep}
    layout["gpus"] = tp
    return layout


POOL_RE = re.compile(r"^\s*(\d+)\s*x\s*\(?\s*([^)=]*?)\s*\)?\s*=\s*(\d+)\s*GPUs\s*$", re.I)


def parse_pool(text):
    """'4x(TP8 EP8) = 32 GPUs' -> (instances 4, layout of one instance). Raises ValueError(reason)."""
    m = POOL_RE.match(text or "")
    if not m:
        raise ValueError(f"pool '{text}' not understood")
    count, inner, total = int(m.group(1)), m.group(2), int(m.group(3))
    if count < 1 or total % count:
        raise ValueError(f"pool '{text}': {total} GPUs do not split into {count} instances")
    gpus = total // count
    tp = re.search(r"TP(\d+)", inner, re.I)
    ep = re.search(r"EP(\d+)", inner, re.I)
    tp = int(tp.group(1)) if tp else gpus
    ep = int(ep.group(1)) if ep else 1
    if tp != gpus:
        raise ValueError(f"pool '{text}': TP {tp} on instances of {gpus} GPUs: the layout is ambiguous")
    lay = map_layout({"pp": "", "tp": str(tp), "num_gpus": str(gpus), "ep": str(ep),
                      "dp_attention": "yes" if re.search(r"DP", inner) else "no"})
    return count, lay


def compact_layout(lay):
    return ",".join(f"{k}={lay[k]}" for k in ("tp", "attention_dp", "moe_tp", "moe_ep"))


def describe_layout(lay):
    attn = f"DP{lay['attention_dp']}" if lay["attention_dp"] > 1 else f"TP{lay['tp']}"
    if lay["moe_ep"] > 1 and lay["moe_tp"] > 1:
        moe = f"TP{lay['moe_tp']}xEP{lay['moe_ep']}"
    elif lay["moe_ep"] > 1:
        moe = f"EP{lay['moe_ep']}"
    else:
        moe = f"TP{lay['moe_tp']}"
    return f"attn {attn}, experts {moe}"


def map_row(row, profiles, models, disagg=False):
    """The deploy point of a measured row: a dict, or ('skip', reason)."""
    if row["has_ttft_and_tpot"].strip().upper() != "Y":
        return ("skip", "no TTFT and TPOT in the source (throughput only)")
    spec = row["spec_decoding"].strip().lower()
    if spec not in ("", "none"):
        return ("skip", f"speculative decoding ({row['spec_decoding'].strip()}): deploy models one token per step")
    is_disagg = row["disaggregated"].strip().lower().startswith("yes")
    if is_disagg and not disagg:
        return ("skip", "disaggregated serving: deploy --disagg does not exist yet")
    conc = _int(row["concurrency"])
    if conc is None or conc < 1:
        return ("skip", f"no fixed concurrency ({row['concurrency'].strip()}): TTFT holds the queue of a burst")
    model, model_note = map_model(row["model"])
    if model is None or model not in models:
        return ("skip", f"model {row['model']} not shipped in configs/models")
    hw = map_hardware(row["hardware"])
    if hw is None or hw not in profiles:
        return ("skip", f"no hardware profile for {row['hardware']}")
    pools = None
    try:
        if is_disagg:
            n_p, lay_p = parse_pool(row["prefill_pool"])
            n_d, lay_d = parse_pool(row["decode_pool"])
            # One prefill instance and one decode instance with its share of the requests: the instances of a pool
            # run side by side, each with C / (decode instances) sequences (at these concurrencies the prefill pool
            # is not what sets the pace).
            pools = {"prefill": lay_p, "decode": lay_d, "prefill_instances": n_p, "decode_instances": n_d}
            layout = lay_d
        else:
            layout = map_layout(row)
    except ValueError as e:
        return ("skip", str(e))
    try:
        dense, expert, kv, notes = map_precision(row, model, profiles[hw])
    except ValueError as e:
        return ("skip", str(e))
    isl, osl = _float(row["isl"]), _float(row["osl"])
    if not isl or not osl:
        return ("skip", "ISL/OSL not stated")
    actual = re.search(r"actual mean output = ([0-9.]+) tokens", row["seq_len_note"])
    if actual:
        osl = float(actual.group(1))
        notes.append("OSL: the outputs' actual mean where the benchmark did not force the nominal length")
    if row["source_id"] == "S01":
        # bench_serving --random-range-ratio 0.8: lengths uniform in [0.8, 1.0] x nominal, mean 0.9 x.
        isl, osl = 0.9 * isl, 0.9 * osl
        notes.append("ISL/OSL: the mean of lengths drawn in [0.8, 1.0] x nominal")
    ttft = _float(row["ttft_median_ms"]) or _float(row["ttft_mean_ms"])
    tpot = _float(row["tpot_median_ms"]) or _float(row["tpot_mean_ms"])
    if not ttft or not tpot:
        return ("skip", "TTFT or TPOT missing")
    if model_note:
        notes.append(model_note)
    if pools:
        share = max(1, int(round(conc / pools["decode_instances"])))
        notes.append("disaggregated: one prefill and one decode instance, the decode instance with C / (decode "
                     "instances) requests")
        conc = share
    return {
        "row_id": row["row_id"],
        "source_id": row["source_id"],
        "engine": engine_family(row["engine"]),
        "hardware": hw,
        "model": model,
        "layout": layout,
        "dtype": dense,
        "expert_dtype": expert,
        "kv_dtype": kv,
        "isl": int(round(isl)),
        "osl": int(round(osl)),
        "concurrency": conc,
        "measured_ttft_ms": ttft,
        "measured_tpot_ms": tpot,
        "ttft_stat": "median" if _float(row["ttft_median_ms"]) else "mean",
        "notes": notes,
        "pools": pools,
        "split": split_of(row["row_id"], row["source_id"]),
    }


def engine_family(name):
    low = name.lower()
    for key, label in (("tensorrt", "TensorRT-LLM"), ("sglang", "SGLang"), ("vllm", "vLLM"), ("atom", "ATOM")):
        if key in low:
            return label
    return name.strip()


def describe_point_layout(point):
    pools = point.get("pools")
    if not pools:
        return describe_layout(point["layout"])
    return (f"disagg: prefill {pools['prefill_instances']}x[{pools['prefill']['gpus']} GPUs: "
            f"{describe_layout(pools['prefill'])}], decode {pools['decode_instances']}x[{pools['decode']['gpus']} GPUs: "
            f"{describe_layout(pools['decode'])}]")


def layout_flags(lay):
    return ["--tp", str(lay["tp"]), "--attention-dp", str(lay["attention_dp"]),
            "--moe-tp", str(lay["moe_tp"]), "--moe-ep", str(lay["moe_ep"])]


def deploy_command(moebench, point, hardware=None):
    """The `moebench deploy` command line of a mapped point (hardware: a profile name or file). --allow-no-fit: the
    engines measured ran C requests whatever the memory said (holding fewer at once and queueing the rest); the row is
    modeled anyway and marked as not fitting."""
    if point.get("pools"):
        pools = point["pools"]
        layout = ["--disagg", "--prefill-gpus", str(pools["prefill"]["gpus"]),
                  "--prefill-layout", compact_layout(pools["prefill"]),
                  "--decode-gpus", str(pools["decode"]["gpus"]), "--decode-layout", compact_layout(pools["decode"])]
    else:
        layout = layout_flags(point["layout"])
    return [moebench, "deploy", "--model", point["model"], "--hardware", hardware or point["hardware"],
            "--isl", str(point["isl"]), "--osl", str(point["osl"]), "--concurrency", str(point["concurrency"])] + \
        layout + \
        ["--dtype", point["dtype"], "--expert-dtype", point["expert_dtype"], "--kv-dtype", point["kv_dtype"],
         "--allow-no-fit", "--format", "json"]


# ---------------------------------------------------------------------------------------------------------------
# Runners


class DeployRunner:
    """`moebench deploy ... --format json`: ttft_ms and tpot_ms at the top level."""
    name = "deploy"

    def __init__(self, moebench):
        self.moebench = moebench

    def command(self, point, hardware=None):
        return deploy_command(self.moebench, point, hardware)

    def run(self, point, hardware=None):
        cmd = self.command(point, hardware)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
        doc = json.loads(p.stdout)
        out = {"ttft_ms": doc["ttft_ms"], "tpot_ms": doc["tpot_ms"]}
        if "fits" in doc:
            out["fits"] = doc["fits"]
        return out


def deploy_available(moebench):
    try:
        p = subprocess.run([moebench, "deploy", "--help"], capture_output=True, text=True, timeout=60)
    except OSError:
        return False, False
    ok = p.returncode == 0 and "--isl" in p.stdout
    return ok, ok and "--disagg" in p.stdout


# ---------------------------------------------------------------------------------------------------------------
# Calibration

SIM_PARAMS = [  # key, default, lower, upper: physical ranges, so that a missing term shows as a miss, not as an
    # efficiency no GPU has. compute_efficiency is not fitted: TPOT hardly depends on it (a fit of it on TPOT ran to
    # its bounds, 0.3 on one profile and 0.95 on another, absorbing other terms).
    ("memory_efficiency", 0.85, 0.4, 0.95),
    ("phase_overhead_us", 3.0, 0.5, 30.0),
]


def profile_with(profile, params, folder):
    doc = json.loads(json.dumps(profile))
    sim = dict(doc.get("sim", {}))
    sim.update(params)
    doc["sim"] = sim
    fd, path = tempfile.mkstemp(prefix=profile["name"] + "-", suffix=".json", dir=folder)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
    return path


def run_points(runner, jobs, tasks):
    """tasks: list of (key, point, hardware) -> {key: result}."""
    out = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futs = {pool.submit(runner.run, point, hw): key for key, point, hw in tasks}
        for fut in concurrent.futures.as_completed(futs):
            try:
                out[futs[fut]] = fut.result()
            except Exception as e:  # a crash of one point is reported, not fatal
                out[futs[fut]] = {"error": f"{type(e).__name__}: {e}"}
    return out


def huber_weight(r, delta=0.3):
    a = abs(r)
    return 1.0 if a <= delta else delta / a


def residuals(points, results):
    """log(modeled / measured) of TPOT. TTFT is not fitted: the measured TTFT holds what no GPU parameter is (the
    request's way through the server, the queue of prefills that arrive together), and fitting the GPU's efficiencies
    to it would make TPOT wrong to make TTFT less wrong."""
    res = []
    for p in points:
        r = results.get(p["row_id"])
        if not r or "error" in r:
            continue
        res.append((math.log(r["tpot_ms"] / p["measured_tpot_ms"]), 1.0))
    return res


def solve(a, b):
    """Least squares a x = b by the normal equations (3 unknowns at most)."""
    n = len(a[0])
    ata = [[sum(row[i] * row[j] for row in a) for j in range(n)] for i in range(n)]
    atb = [sum(row[i] * bb for row, bb in zip(a, b)) for i in range(n)]
    for i in range(n):
        ata[i][i] += 1e-6 + 1e-3 * ata[i][i]  # Levenberg damping
    m = [ata[i] + [atb[i]] for i in range(n)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[piv] = m[piv], m[c]
        if abs(m[c][c]) < 1e-15:
            return [0.0] * n
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_profile(runner, jobs, profile, points, folder, iterations=4, log=print):
    """Gauss-Newton over the sim's parameters in log space on the points' TPOT, with a step-halving line search:
    a step is taken only where it lowers the cost, and the best parameters seen are returned."""
    params = {k: (profile.get("sim", {}) or {}).get(k, d) for k, d, _, _ in SIM_PARAMS}
    params = {k: min(hi, max(lo, params[k])) for k, _, lo, hi in SIM_PARAMS}

    def evaluate(pvals):
        path = profile_with(profile, pvals, folder)
        return residuals(points, run_points(runner, jobs, [(p["row_id"], p, path) for p in points]))

    def cost_of(res):
        return sum(w * huber_weight(r) * r * r for r, w in res)

    r0 = evaluate(params)
    if not r0:
        return params, None
    cost = cost_of(r0)
    for it in range(iterations):
        log(f"  {profile['name']} iteration {it}: {params} cost {cost:.3f} over {len(r0)} rows")
        cols = []
        for key, _, lo, hi in SIM_PARAMS:
            trial = dict(params)
            trial[key] = params[key] * 1.15 if params[key] * 1.15 <= hi else params[key] / 1.15
            ratio = math.log(trial[key] / params[key])
            rj = evaluate(trial)
            cols.append([(a[0] - b[0]) / ratio for a, b in zip(rj, r0)] if len(rj) == len(r0) else [0.0] * len(r0))
        a = [[cols[j][i] * math.sqrt(w * huber_weight(r)) for j in range(len(cols))] for i, (r, w) in enumerate(r0)]
        b = [-r * math.sqrt(w * huber_weight(r)) for r, w in r0]
        dx = [max(-0.7, min(0.7, d)) for d in solve(a, b)]  # at most a factor 2 per iteration
        improved = False
        for scale in (1.0, 0.5, 0.25):
            new = {key: min(hi, max(lo, params[key] * math.exp(scale * d)))
                   for (key, _, lo, hi), d in zip(SIM_PARAMS, dx)}
            rn = evaluate(new)
            if len(rn) == len(r0) and cost_of(rn) < cost:
                params, r0, cost, improved = new, rn, cost_of(rn), True
                break
        if not improved or all(abs(scale * d) < 0.01 for d in dx):
            break
    log(f"  {profile['name']} fitted: {params} cost {cost:.3f}")
    return {k: round(v, 3) for k, v in params.items()}, cost


def write_profile_sim(root, name, params, note):
    path = os.path.join(root, "configs", "hardware", name + ".json")
    with open(path) as f:
        doc = json.load(f)
    sim = dict(doc.get("sim", {}))
    sim.update(params)
    doc["sim"] = sim
    sources = [s for s in doc.get("sources", []) if not s.startswith("sim: ")]
    sources.append(note)
    doc["sources"] = sources
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(path + ".tmp", path)


# ---------------------------------------------------------------------------------------------------------------
# The seeds' scenarios (configs/deploy/*.json): each a claim beside what moebench answers, from runs made here.


def run_scenario_step(moebench, step):
    """One step of a scenario: `plan` (counted parameters, memory, fit) or a sim `run` step (modeled)."""
    if step["kind"] == "plan":
        cmd = [moebench, "plan"] + step["args"] + ["--format", "json"]
    else:
        cmd = [moebench, "run", "--backend", "sim", "--layers", "0", "--record", "brief", "--iters", "1",
               "--warmup", "0", "--json", "-"] + step["args"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    shown = "moebench " + " ".join(cmd[1:])
    if p.returncode != 0:
        return {"command": shown, "refused": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
    doc = json.loads(p.stdout)
    if step["kind"] == "plan":
        mem = doc["memory"]["per_gpu"]
        return {"command": shown, "params_total": doc["params"]["total"], "params_active": doc["params"]["active"],
                "flops_per_token": doc["flops_per_token"]["total"], "context": doc["flops_per_token"]["context"],
                "weights_gib": mem["weights_bytes"] / 2**30, "fits": doc["memory"]["fits"]}
    run = doc["runs"][0]
    step_us = run["latency"]["step"]["mean_us"]
    out = {"command": shown, "step_ms": step_us / 1000.0, "tokens": run["num_tokens"], "fits": run.get("fits", True),
           "tokens_per_s_per_gpu": run["num_tokens"] / (step_us / 1e6) / step["gpus"]}
    groups = run["latency"]["groups"]
    out["a2a_share"] = sum(groups.get(g, {}).get("share", 0.0) for g in ("dispatch", "combine"))
    return out


def run_scenarios(moebench, runner, folder):
    out = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(folder, name)) as f:
            sc = json.load(f)
        sc["file"] = "configs/deploy/" + name
        sc["results"] = [run_scenario_step(moebench, st) for st in sc["steps"]]
        if sc.get("deploy") and isinstance(runner, DeployRunner):
            cmd = [moebench, "deploy"] + sc["deploy"] + ["--format", "json"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            sc["deploy_result"] = json.loads(p.stdout) if p.returncode == 0 else \
                {"refused": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
        out.append(sc)
    return out


def render_scenarios(scenarios):
    lines = ["## The seeds' scenarios", "",
             "Each `configs/deploy/*.json` holds a deployment the project's seeds asked about, the published claims about it,",
             "the `moebench deploy` arguments that model it whole, and the plan and sim steps that show its parts. Every",
             "moebench figure below comes from those runs (`counted` by plan, `modeled` by the sim and deploy); a step's tokens/s",
             "per GPU = its tokens / its time / the GPUs; a decode step's time is the TPOT of its sequences.", ""]
    for sc in scenarios:
        lines += [f"### {sc['name']} (`{sc['file']}`)", "", sc["question"], ""]
        if sc.get("notes"):
            lines += [sc["notes"], ""]
        lines += ["Claims:", ""]
        for c in sc["claims"]:
            lines.append(f"- {c['claim']} ({c['source']})")
        lines += ["", "moebench:", "", "| step | result |", "| --- | --- |"]
        for st, r in zip(sc["steps"], sc["results"]):
            if "refused" in r:
                res = "refused (exit 2): " + r["refused"].replace("|", "/")
            elif st["kind"] == "plan":
                res = (f"{r['params_total'] / 1e9:.1f}B parameters, {r['params_active'] / 1e9:.1f}B active per token, "
                       f"{r['flops_per_token'] / 1e9:.0f} GFLOP per token at context {r['context']} (counted); "
                       f"{r['weights_gib']:.1f} GiB of weights per GPU, fits: {str(r['fits']).lower()}")
            else:
                res = (f"step {r['step_ms']:.1f} ms for {r['tokens']} token{'s' if r['tokens'] != 1 else ''}: {r['tokens_per_s_per_gpu']:,.0f} tokens/s "
                       f"per GPU" + (f", {1000.0 / r['step_ms']:.1f} tokens/s per user" if "decode" in st["args"] else "")
                       + f"; dispatch and combine groups (permute, all-to-all, unpermute) {100 * r['a2a_share']:.0f}% of the "
                       f"step; fits: {str(r['fits']).lower()} (modeled)")
            lines.append(f"| {st['label']} | {res} |")
        lines.append("")
        lines.append("Commands: " + "; ".join(f"`{r['command']}`" for r in sc["results"]))
        lines.append("")
        if sc.get("deploy"):
            dr = sc.get("deploy_result")
            cmd = "moebench deploy " + " ".join(sc["deploy"])
            if sc.get("deploy_note"):
                lines += ["Deploy's point: " + sc["deploy_note"] + ".", ""]
            if dr is None:
                lines += [f"Deploy (not run: no deploy in this build): `{cmd}`", ""]
            elif "refused" in dr:
                lines += [f"Deploy: `{cmd}`: refused: {dr['refused']}", ""]
            else:
                keys = ["ttft_ms", "tpot_ms", "tpot_p90_ms", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user",
                        "input_tokens_per_s_per_gpu", "kv_transfer_ms", "memory_per_gpu_bytes", "fits", "balance"]
                shown = []
                for k in keys:
                    if k in dr:
                        v = dr[k]
                        if k == "memory_per_gpu_bytes":
                            shown.append(f"memory per GPU {v / 2**30:.1f} GiB")
                        elif isinstance(v, float):
                            shown.append(f"{k} {v:,.1f}")
                        else:
                            shown.append(f"{k} {json.dumps(v)}")
                lines += [f"Deploy (modeled): `{cmd} --format json`: " + ", ".join(shown), ""]
        else:
            lines += [f"Deploy: {sc.get('deploy_pending', 'not expressible yet')}", ""]
    return lines


# ---------------------------------------------------------------------------------------------------------------
# Statistics and the document


def err_pct(modeled, measured):
    return 100.0 * (modeled - measured) / measured


def percentile(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    pos = (len(v) - 1) * q
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarize(rows):
    """median / p90 absolute error and share within 30% of TPOT and TTFT."""
    out = {"n": len(rows)}
    for key in ("tpot", "ttft"):
        errs = [abs(r[key + "_err"]) for r in rows]
        out[key] = {
            "median": statistics.median(errs) if errs else float("nan"),
            "p90": percentile(errs, 0.9),
            "within30": 100.0 * sum(e <= TARGET_WITHIN for e in errs) / len(errs) if errs else float("nan"),
            "bias": statistics.median([r[key + "_err"] for r in rows]) if rows else float("nan"),
        }
    return out


def fmt_summary_row(label, s):
    t, f = s["tpot"], s["ttft"]
    return (f"| {label} | {s['n']} | {t['median']:.0f}% | {t['p90']:.0f}% | {t['within30']:.0f}% | {t['bias']:+.0f}% "
            f"| {f['median']:.0f}% | {f['p90']:.0f}% | {f['within30']:.0f}% | {f['bias']:+.0f}% |")


SUMMARY_HEAD = ("| rows | n | TPOT median abs err | TPOT p90 | TPOT within 30% | TPOT median signed | "
                "TTFT median abs err | TTFT p90 | TTFT within 30% | TTFT median signed |\n"
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def grouped(rows, key):
    groups = {}
    for r in rows:
        groups.setdefault(r[key], []).append(r)
    return sorted(groups.items())


def render_doc(done, skipped, failed, runner_name, fitted, sources, old_doc, command_line, scenarios=()):
    lines = []
    add = lines.append
    add("# `moebench deploy` against published serving measurements")
    add("")
    add("Generated by `scripts/deploy_validation.py` (" + command_line + "); do not edit the tables by hand: the section")
    add("\"Where it misses and why\" is written by hand and kept by the script. The data: `tests/data/deploy/measurements.csv`,")
    add("public measurements, each row with its source, URL and locator (`tests/data/deploy/SOURCES.md`).")
    add("")
    add("Every modeled figure is `modeled`; every measured one is `measured` as its source states it. Error = (modeled -")
    add("measured) / measured. Measured TTFT and TPOT are the median over requests where the source gives one (else the mean):")
    add("the median leaves out the queue of the start-up burst that a benchmark with a fixed concurrency has and a steady")
    add("state does not.")
    add("")
    fit_names = sorted(fitted)
    if fit_names:
        add("## Calibration")
        add("")
        add("Per hardware profile only (no constant per row): the sim's `memory_efficiency` and `phase_overhead_us`, within")
        add("physical bounds (0.4-0.95, 0.5-30 us), fitted on the **fit split: the rows of")
        add("S01 (InferenceX) with an odd number** (M0001, M0003, ...) by Gauss-Newton on the log error of TPOT (Huber-weighted).")
        add("Everything else is **held out**: S01's even rows and every row of the other sources. TTFT is not fitted (see the")
        add("misses). Profiles with fewer than 5 fit rows keep their values. The fitted values are in the profiles' `sim`")
        add("objects (their `sources` name this script and split).")
        add("")
        add("| profile | fit rows | memory_efficiency (default 0.85) | phase_overhead_us (default 3) |")
        add("| --- | --- | --- | --- |")
        for name in fit_names:
            p, n = fitted[name]
            add(f"| {name} | {n} | {p['memory_efficiency']} | {p['phase_overhead_us']} |")
        add("")
        carried = []  # profiles whose `sim` values a source line says were carried over from a fitted profile
        for name, prof in load_profiles().items():
            for line in prof.get("sources", []):
                m = re.match(r"sim: .*carried over from ([\w.-]+)'s fit", line)
                if m and isinstance(prof.get("sim"), dict):
                    carried.append((name, m.group(1), prof["sim"]))
        if carried:
            add("Carried over, not fitted: a profile without its own fit takes the values of the fitted profile of the same")
            add("chip or generation (its `sources` say which and why); its rows were in no fit and stay held out, so they test")
            add("whether a calibration transfers.")
            add("")
            add("| profile | values of | memory_efficiency | phase_overhead_us |")
            add("| --- | --- | --- | --- |")
            for name, src, sim in carried:
                add(f"| {name} | {src} | {sim.get('memory_efficiency')} | {sim.get('phase_overhead_us')} |")
            add("")
    add("## Summary")
    add("")
    add(f"Targets (issue 32): TPOT within {TARGET_TPOT_MEDIAN:.0f}% median absolute error and within {TARGET_WITHIN:.0f}% on at")
    add(f"least {TARGET_SHARE:.0f}% of rows; TTFT reported the same way. {len(done)} rows reproduced, {len(skipped)} skipped,")
    add(f"{len(failed)} refused or failed.")
    add("")
    add(SUMMARY_HEAD)
    add(fmt_summary_row("all", summarize(done)))
    for split in ("fit", "held-out"):
        part = [r for r in done if r["split"] == split]
        if part:
            add(fmt_summary_row(split + " split", summarize(part)))
    add("")
    for title, key in (("Per hardware", "hardware"), ("Per engine", "engine"), ("Per source", "source_id"),
                       ("Per model", "model")):
        add(f"### {title}")
        add("")
        add(SUMMARY_HEAD)
        for name, part in grouped(done, key):
            add(fmt_summary_row(name, summarize(part)))
            held = [r for r in part if r["split"] == "held-out"]
            if held and fit_names:
                add(fmt_summary_row(name + " (held-out)", summarize(held)))
        add("")
    add("## Where it misses and why")
    add("")
    block = None
    if old_doc and MISSES_BEGIN in old_doc and MISSES_END in old_doc:
        block = old_doc[old_doc.index(MISSES_BEGIN):old_doc.index(MISSES_END) + len(MISSES_END)]
    add(block or (MISSES_BEGIN + "\n\n(to be written from the numbers)\n\n" + MISSES_END))
    add("")
    if scenarios:
        lines.extend(render_scenarios(scenarios))
    add("## Rows")
    add("")
    add("| row | source | split | engine | hardware | model | layout | formats (dense/experts/KV) | ISL/OSL/conc | "
        "measured TTFT ms | modeled TTFT ms | TTFT err | measured TPOT ms | modeled TPOT ms | TPOT err |")
    add("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in sorted(done, key=lambda r: r["row_id"]):
        add(f"| {r['row_id']} | {r['source_id']} | {r['split']} | {r['engine']} | {r['hardware']} | {r['model']} | "
            f"{describe_point_layout(r)} | {r['dtype']}/{r['expert_dtype']}/{r['kv_dtype']} | "
            f"{r['isl']}/{r['osl']}/{r['concurrency']} | {r['measured_ttft_ms']:.1f} | {r['modeled_ttft_ms']:.1f} | "
            f"{r['ttft_err']:+.0f}% | {r['measured_tpot_ms']:.2f} | {r['modeled_tpot_ms']:.2f} | {r['tpot_err']:+.0f}% |")
    add("")
    if failed:
        add("## Refused or failed")
        add("")
        add("| row | hardware | model | layout | reason |")
        add("| --- | --- | --- | --- | --- |")
        for p, reason in sorted(failed, key=lambda x: x[0]["row_id"]):
            add(f"| {p['row_id']} | {p['hardware']} | {p['model']} | {describe_point_layout(p)} | {reason} |")
        add("")
    add("## Skipped rows")
    add("")
    reasons = {}
    for row_id, reason in skipped:
        reasons.setdefault(reason, []).append(row_id)
    add("| reason | rows |")
    add("| --- | --- |")
    for reason, ids in sorted(reasons.items(), key=lambda x: -len(x[1])):
        add(f"| {reason} | {len(ids)}: {', '.join(sorted(ids))} |")
    add("")
    add("## Sources")
    add("")
    add("| id | title | URL |")
    add("| --- | --- | --- |")
    for sid, (title, url) in sorted(sources.items()):
        add(f"| {sid} | {title} | {url} |")
    add("")
    add("Mapping notes: " + "; ".join(sorted({n for r in done for n in r["notes"]})) + ".")
    add("")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--moebench", default=os.path.join(ROOT, "build", "moebench"))
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--out", default=DOC)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rows", default="", help="comma-separated row ids (default: all)")
    ap.add_argument("--fit", action="store_true", help="fit the sim parameters per hardware profile on the odd rows of S01")
    ap.add_argument("--write-profiles", action="store_true", help="with --fit: write the fitted values into configs/hardware")
    ap.add_argument("--min-fit-rows", type=int, default=5)
    ap.add_argument("--results", default="", help="also write every point's mapping and result as JSON here")
    ap.add_argument("--no-scenarios", action="store_true", help="leave out configs/deploy's scenarios")
    ap.add_argument("--dry-run", action="store_true", help="print the mapped commands and skip reasons, run nothing")
    args = ap.parse_args(argv)

    profiles = load_profiles()
    models = shipped_models()
    have_deploy, have_disagg = deploy_available(args.moebench) if not args.dry_run else (True, True)
    if not have_deploy:
        sys.exit(f"deploy_validation: error: --moebench {args.moebench}: no `deploy` command there; build moebench "
                 "(ninja -C build moebench) or name another binary")
    runner = DeployRunner(args.moebench)

    with open(args.data, newline="") as f:
        rows = list(csv.DictReader(f))
    wanted = {x for x in args.rows.split(",") if x}
    sources = {}
    points, skipped = [], []
    for row in rows:
        sources[row["source_id"]] = (row["source_title"], row["source_url"])
        if wanted and row["row_id"] not in wanted:
            continue
        m = map_row(row, profiles, models, disagg=have_disagg)
        if isinstance(m, tuple):
            skipped.append((row["row_id"], m[1]))
        else:
            points.append(m)
    if args.dry_run:
        for p in points:
            print(p["row_id"], " ".join(deploy_command("moebench", p)))
        for row_id, reason in skipped:
            print(row_id, "skip:", reason)
        return 0

    print(f"deploy_validation: {len(points)} rows to model with moebench deploy, {len(skipped)} skipped",
          file=sys.stderr)
    fitted = {}
    if args.fit:
        with tempfile.TemporaryDirectory() as folder:
            for hw in sorted({p["hardware"] for p in points}):
                train = [p for p in points if p["hardware"] == hw and p["split"] == "fit"]
                if len(train) < args.min_fit_rows:
                    print(f"deploy_validation: {hw}: {len(train)} fit rows, keeps its parameters", file=sys.stderr)
                    continue
                params, _ = fit_profile(runner, args.jobs, profiles[hw], train, folder,
                                        log=lambda s: print(s, file=sys.stderr))
                fitted[hw] = (params, len(train))
                profiles[hw] = json.loads(json.dumps(profiles[hw]))
                profiles[hw].setdefault("sim", {}).update(params)
                if args.write_profiles:
                    write_profile_sim(ROOT, hw, params,
                                      "sim: memory_efficiency and phase_overhead_us fitted by "
                                      "scripts/deploy_validation.py --fit to the TPOT of the odd-numbered S01 rows of "
                                      f"tests/data/deploy/measurements.csv ({len(train)} rows of this profile); "
                                      "every other row is held out (docs/deploy-validation.md)")
            folder_profiles = {hw: profile_with(profiles[hw], fitted[hw][0], folder) for hw in fitted}
            results = run_points(runner, args.jobs,
                                 [(p["row_id"], p, folder_profiles.get(p["hardware"])) for p in points])
    else:
        results = run_points(runner, args.jobs, [(p["row_id"], p, None) for p in points])

    if not fitted:
        # The profiles calibrated by an earlier --fit --write-profiles (their sources say so).
        for hw in sorted({p["hardware"] for p in points}):
            prof = profiles[hw]
            if any(src.startswith("sim: ") and "deploy_validation.py" in src for src in prof.get("sources", [])):
                n = sum(1 for p in points if p["hardware"] == hw and p["split"] == "fit")
                fitted[hw] = ({k: prof["sim"][k] for k, _, _, _ in SIM_PARAMS if k in prof.get("sim", {})}, n)
    done, failed = [], []
    for p in points:
        r = results.get(p["row_id"], {"error": "not run"})
        if "error" in r:
            failed.append((p, r["error"].replace("|", "/")))
            continue
        if r.get("fits") is False:
            p["notes"].append("does not fit the profile's memory (modeled anyway)")
        p["modeled_ttft_ms"] = r["ttft_ms"]
        p["modeled_tpot_ms"] = r["tpot_ms"]
        p["ttft_err"] = err_pct(r["ttft_ms"], p["measured_ttft_ms"])
        p["tpot_err"] = err_pct(r["tpot_ms"], p["measured_tpot_ms"])
        done.append(p)
    scenarios = [] if args.no_scenarios else run_scenarios(args.moebench, runner, os.path.join(ROOT, "configs", "deploy"))
    old = open(args.out).read() if os.path.exists(args.out) else ""
    cmd = "scripts/deploy_validation.py" + (" --fit" if args.fit else "")
    text = render_doc(done, skipped, failed, runner.name, fitted, sources, old, cmd, scenarios)
    with open(args.out + ".tmp", "w") as f:
        f.write(text)
    os.replace(args.out + ".tmp", args.out)
    if args.results:
        with open(args.results, "w") as f:
            json.dump({"done": done, "failed": [[p, e] for p, e in failed], "skipped": skipped,
                       "fitted": fitted, "runner": runner.name}, f, indent=1)
    s = summarize(done) if done else None
    if s:
        print(f"deploy_validation: {len(done)} rows: TPOT median {s['tpot']['median']:.1f}% p90 {s['tpot']['p90']:.1f}% "
              f"within 30% {s['tpot']['within30']:.0f}%; TTFT median {s['ttft']['median']:.1f}% "
              f"p90 {s['ttft']['p90']:.1f}% within 30% {s['ttft']['within30']:.0f}%", file=sys.stderr)
    print(f"deploy_validation: wrote {os.path.relpath(args.out, ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
