#!/usr/bin/env python3
"""scripts/deploy_validation.py's mapping of published rows to deploy points, checked by hand-read rows of
tests/data/deploy/measurements.csv, and every mapped layout accepted by `moebench plan` (GPU-free, seconds).

Usage: deploy_validation_check.py MOEBENCH ROOT
"""

import csv
import importlib.util
import os
import subprocess
import sys
import unittest

MOEBENCH, ROOT = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("deploy_validation",
                                              os.path.join(ROOT, "scripts", "deploy_validation.py"))
dv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dv)

with open(os.path.join(ROOT, "tests", "data", "deploy", "measurements.csv"), newline="") as f:
    ROWS = {r["row_id"]: r for r in csv.DictReader(f)}
PROFILES = dv.load_profiles(ROOT)
MODELS = dv.shipped_models(ROOT)


def mapped(row_id):
    return dv.map_row(ROWS[row_id], PROFILES, MODELS)


class Mapping(unittest.TestCase):
    def test_tp8_ep8_fp4_on_b200(self):
        # M0001: InferenceX SGLang, DeepSeek-R1-0528 NVFP4 on 8 B200, TP8 EP8 no DP attention, 1k/1k nominal, conc 1.
        p = mapped("M0001")
        self.assertEqual((p["model"], p["hardware"]), ("deepseek-v3", "b200"))
        self.assertEqual(p["layout"], {"tp": 8, "attention_dp": 1, "moe_tp": 1, "moe_ep": 8, "gpus": 8})
        self.assertEqual((p["dtype"], p["expert_dtype"], p["kv_dtype"]), ("fp8-block", "nvfp4", "bf16"))
        self.assertEqual((p["isl"], p["osl"], p["concurrency"]), (922, 922, 1))  # 0.9 x 1024: range ratio 0.8
        self.assertEqual((p["measured_ttft_ms"], p["measured_tpot_ms"]), (165.15, 5.87))  # the medians
        self.assertEqual(p["split"], "fit")

    def test_trtllm_dep8_is_attention_dp_with_expert_parallel(self):
        # M0014: TensorRT-LLM TP8 EP8 with attention DP (DEP8): attention DP 8, experts EP 8; FP8 KV by its recipe.
        p = mapped("M0014")
        self.assertEqual(p["layout"], {"tp": 1, "attention_dp": 8, "moe_tp": 1, "moe_ep": 8, "gpus": 8})
        self.assertEqual(p["kv_dtype"], "fp8")
        self.assertEqual(p["split"], "held-out")

    def test_sglang_dp_attention_with_tp_experts(self):
        # M0223: dstack SGLang TP8 + DP attention (no EP): attention DP 8, experts TP 8; BF16 KV stated; 3200/800.
        p = mapped("M0223")
        self.assertEqual(p["layout"], {"tp": 1, "attention_dp": 8, "moe_tp": 8, "moe_ep": 1, "gpus": 8})
        self.assertEqual((p["dtype"], p["kv_dtype"]), ("fp8-block", "bf16"))
        self.assertEqual((p["isl"], p["osl"], p["concurrency"]), (3200, 800, 128))
        self.assertEqual(p["split"], "held-out")  # odd, but only S01's odd rows fit

    def test_trtllm_tp8_ep4(self):
        p = mapped("M0241")
        self.assertEqual(p["layout"], {"tp": 8, "attention_dp": 1, "moe_tp": 2, "moe_ep": 4, "gpus": 8})

    def test_mxfp4_experts_on_hopper_run_weight_only(self):
        # M0197: vLLM gpt-oss-120b on one H100: MXFP4 experts without FP4 units -> int4 (4-bit weights, bf16 math).
        p = mapped("M0197")
        self.assertEqual((p["model"], p["hardware"]), ("gpt-oss-120b", "h100-sxm"))
        self.assertEqual((p["dtype"], p["expert_dtype"]), ("bf16", "int4"))
        self.assertEqual(p["layout"]["gpus"], 1)

    def test_mxfp4_deepseek_on_mi355x(self):
        p = mapped("M0057")
        self.assertEqual((p["hardware"], p["dtype"], p["expert_dtype"]), ("mi355x", "fp8-block", "mxfp4"))

    def test_skips_name_their_reason(self):
        cases = {
            "M0081": "speculative decoding",      # MTP
            "M0160": "no fixed concurrency",      # burst 1000
            "M0051": "no hardware profile",       # MI325X
            "M0093": "disaggregated",             # Dynamo disaggregated
            "M0156": "no TTFT and TPOT",          # offline throughput table
        }
        for row_id, reason in cases.items():
            m = mapped(row_id)
            self.assertIsInstance(m, tuple, row_id)
            self.assertIn(reason, m[1], row_id)

    def test_at_least_100_rows_map_and_every_point_is_consistent(self):
        points = [m for m in (dv.map_row(r, PROFILES, MODELS) for r in ROWS.values()) if not isinstance(m, tuple)]
        self.assertGreaterEqual(len(points), 100)
        for p in points:
            lay = p["layout"]
            self.assertEqual(lay["tp"] * lay["attention_dp"], lay["gpus"], p["row_id"])
            self.assertEqual(lay["moe_tp"] * lay["moe_ep"], lay["gpus"], p["row_id"])
            self.assertIn(p["model"], MODELS)
            self.assertIn(p["hardware"], PROFILES)
            self.assertGreater(p["measured_tpot_ms"], 0)
        # both splits are populated, and the split is the row number's parity
        self.assertEqual({p["split"] for p in points}, {"fit", "held-out"})

    def test_disaggregated_pools(self):
        # M0093: Dynamo + TensorRT-LLM on GB200: prefill 1x(TP4 EP4 DP-attn) = 4 GPUs, decode 4x(TP8 EP8) = 32 GPUs,
        # concurrency 24: one decode instance with 24 / 4 = 6 requests.
        p = dv.map_row(ROWS["M0093"], PROFILES, MODELS, disagg=True)
        self.assertEqual(p["pools"]["prefill"], {"tp": 1, "attention_dp": 4, "moe_tp": 1, "moe_ep": 4, "gpus": 4})
        self.assertEqual(p["pools"]["decode"], {"tp": 8, "attention_dp": 1, "moe_tp": 1, "moe_ep": 8, "gpus": 8})
        self.assertEqual((p["pools"]["prefill_instances"], p["pools"]["decode_instances"]), (1, 4))
        self.assertEqual(p["concurrency"], 6)
        text = " ".join(dv.deploy_command("moebench", p))
        self.assertIn("--disagg --prefill-gpus 4 --prefill-layout tp=1,attention_dp=4,moe_tp=1,moe_ep=4 "
                      "--decode-gpus 8 --decode-layout tp=8,attention_dp=1,moe_tp=1,moe_ep=8", text)
        # dstack PD ratio, gpt-oss: outputs not forced to the nominal OSL: the actual mean (714) is used
        p = dv.map_row(ROWS["M0262"], PROFILES, MODELS, disagg=True)
        self.assertEqual((p["isl"], p["osl"], p["concurrency"]), (128, 714, 64))
        # a pool whose TP does not cover its instance's GPUs is ambiguous, and skipped
        m = dv.map_row(ROWS["M0094"], PROFILES, MODELS, disagg=True)
        self.assertIn("ambiguous", m[1])
        self.assertIn("does not exist yet", mapped("M0093")[1])

    def test_deploy_command(self):
        cmd = dv.deploy_command("moebench", mapped("M0014"))
        self.assertEqual(cmd[:2], ["moebench", "deploy"])
        text = " ".join(cmd)
        for part in ("--model deepseek-v3", "--hardware b200", "--isl 922", "--osl 922", "--concurrency 128",
                     "--tp 1 --attention-dp 8 --moe-tp 1 --moe-ep 8", "--dtype fp8-block", "--expert-dtype nvfp4",
                     "--kv-dtype fp8", "--format json"):
            self.assertIn(part, text)


class Statistics(unittest.TestCase):
    def test_summary_by_hand(self):
        rows = [{"tpot_err": e, "ttft_err": -e} for e in (-10.0, 20.0, -40.0, 5.0, 50.0)]
        s = dv.summarize(rows)
        self.assertAlmostEqual(s["tpot"]["median"], 20.0)
        self.assertAlmostEqual(s["tpot"]["p90"], 46.0)  # sorted 5 10 20 40 50: 40 + 0.6 x 10
        self.assertAlmostEqual(s["tpot"]["within30"], 60.0)
        self.assertAlmostEqual(s["tpot"]["bias"], 5.0)
        self.assertAlmostEqual(s["ttft"]["bias"], -5.0)

    def test_least_squares(self):
        x = dv.solve([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], [1.0, 4.0, 3.0])
        self.assertAlmostEqual(x[0], 1.0, places=2)
        self.assertAlmostEqual(x[1], 2.0, places=2)


class LayoutsAccepted(unittest.TestCase):
    def test_plan_accepts_every_mapped_layout_and_format(self):
        seen = set()
        for r in ROWS.values():
            p = dv.map_row(r, PROFILES, MODELS)
            if isinstance(p, tuple):
                continue
            key = (p["model"], p["hardware"], tuple(sorted(p["layout"].items())), p["dtype"], p["expert_dtype"],
                   p["kv_dtype"])
            if key in seen:
                continue
            seen.add(key)
            cmd = [MOEBENCH, "plan", "--model", p["model"], "--hardware", p["hardware"],
                   "--dtype", p["dtype"], "--expert-dtype", p["expert_dtype"], "--kv-dtype", p["kv_dtype"],
                   "--batch", "1", "--context", "1024", "--format", "json"] + dv.layout_flags(p["layout"])
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            self.assertEqual(res.returncode, 0, f"{p['row_id']}: {' '.join(cmd)}: {res.stderr.strip()}")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
