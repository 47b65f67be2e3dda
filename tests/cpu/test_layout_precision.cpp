// SPDX-License-Identifier: Apache-2.0
// The one layout value and the one precision value: how a request resolves (hand-worked cases), where the rules are
// checked, what each backend refuses, and that plan, run and sweep read the same flags.
#include "cli_helpers.hpp"
#include "common/error.hpp"
#include "config/layout_request.hpp"
#include "config/model_config.hpp"
#include "config/precision_request.hpp"
#include "error_helpers.hpp"
#include "model/accounting.hpp"
#include "model/phase_work.hpp"
#include "test_models.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace moebench;
using namespace moebench::test;

namespace {

Layout resolved(int64_t ep, int64_t tp, int64_t attention_dp = 0, int64_t moe_tp = 0, int64_t moe_ep = 0) {
    LayoutRequest r;
    r.ep = ep;
    r.tp = tp;
    r.attention_dp = attention_dp;
    r.moe_tp = moe_tp;
    r.moe_ep = moe_ep;
    return resolve_layout(r);
}

void check_layout(const Layout& l, int64_t attn_tp, int64_t attn_dp, int64_t moe_tp, int64_t moe_ep) {
    CHECK(l.attn_tp == attn_tp);
    CHECK(l.attn_dp == attn_dp);
    CHECK(l.moe_tp == moe_tp);
    CHECK(l.moe_ep == moe_ep);
    CHECK(l.attn_tp * l.attn_dp == l.moe_tp * l.moe_ep);
}

}  // namespace

TEST_CASE("layout: a request resolves as the deployments are named", "[layout]") {
    check_layout(resolved(1, 0), 1, 1, 1, 1);               // one GPU
    check_layout(resolved(8, 0), 1, 8, 1, 8);               // --ep 8: attention DP 8, experts EP 8
    check_layout(resolved(8, 8), 8, 1, 1, 8);               // --tp 8 --ep 8: attention TP 8, experts EP 8 (8 GPUs)
    check_layout(resolved(1, 8), 8, 1, 8, 1);               // --tp 8: every layer TP 8 (experts TP 8)
    check_layout(resolved(1, 8, 0, 0, 4), 8, 1, 2, 4);      // --tp 8 --moe-ep 4: experts TP 2 x EP 4
    check_layout(resolved(1, 1, 32, 0, 32), 1, 32, 1, 32);  // DP 32 with EP 32
    check_layout(resolved(4, 8), 8, 1, 2, 4);               // plan's rule: GPUs = max(ep, tp), experts TP = GPUs / ep
    CHECK(resolved(8, 0).num_gpus() == 8);
    // The resolved layout written back resolves to itself (what a report's config records).
    for (const Layout& l : {resolved(8, 8), resolved(1, 8, 0, 0, 4), resolved(16, 0)})
        CHECK(resolve_layout(layout_request_of(l)) == l);
}

TEST_CASE("layout: requests that cannot be are refused, naming the field", "[layout][bad_input]") {
    CHECK_THROWS_WITH(resolved(4, 3), Catch::Contains("tp (--tp)") && Catch::Contains("cannot split"));
    CHECK_THROWS_WITH(resolved(2, 0, 0, 0, 4), Catch::Contains("--moe-ep") && Catch::Contains("give one of them"));
    CHECK_THROWS_WITH(resolved(1, 1, 2, 0, 4),
                      Catch::Contains("attention_dp (--attention-dp)") && Catch::Contains("same GPUs"));
    CHECK_THROWS_WITH(resolved(1, -1), Catch::Contains("tp (--tp)"));
    CHECK_THROWS_WITH(resolved(1, 70000), Catch::Contains("65536"));
    LayoutRequest bad_a2a;
    bad_a2a.a2a = "broadcast";
    CHECK_THROWS_WITH(resolve_layout(bad_a2a), Catch::Contains("a2a (--a2a)") && Catch::Contains("per-expert"));
    // Against the model: the tiny GQA model has 4 experts and 2 heads, experts 6 wide.
    const ModelConfig m = tiny_gqa_h8();
    CHECK_THROWS_WITH(check_layout_for_model(m, resolved(3, 0)),
                      Catch::Contains("ep (--ep)") && Catch::Contains("1, 2, 4"));
    CHECK_THROWS_WITH(check_layout_for_model(m, resolved(1, 8)), Catch::Contains("tp (--tp)"));
    CHECK_NOTHROW(check_layout_for_model(m, resolved(4, 2)));
    CHECK_THROWS_WITH(check_layout_for_model(m, resolved(1, 1, 0, 4, 1)), Catch::Contains("moe_tp (--moe-tp)"));
}

TEST_CASE("precision: auto is the backend's own, and each class checks its formats", "[precision]") {
    const Precision cpu = uniform_precision(DType::fp32), gpu = uniform_precision(DType::bf16);
    CHECK(resolve_precision(PrecisionRequest{}, cpu) == cpu);
    CHECK(resolve_precision(PrecisionRequest{}, gpu) == gpu);
    PrecisionRequest fp8;
    fp8.dtype = "fp8";
    const Precision p = resolve_precision(fp8, gpu);
    CHECK(p.dense_weights == DType::fp8);
    CHECK(p.expert_weights == DType::fp8);  // the experts follow --dtype
    CHECK(p.kv_cache == DType::bf16);       // the backend's own
    CHECK(p.activations == DType::bf16);    // fp8 GEMMs quantise their inputs; the residual stream stays bf16
    CHECK(p.dispatch == DType::bf16);
    PrecisionRequest mixed = fp8;
    mixed.expert_dtype = "int4";
    mixed.kv_dtype = "fp8";
    mixed.dispatch_dtype = "fp8";
    const Precision q = resolve_precision(mixed, gpu);
    CHECK(q.expert_weights == DType::int4);
    CHECK(q.kv_cache == DType::fp8);
    CHECK(q.dispatch == DType::fp8);
    CHECK(q.combine == DType::bf16);

    PrecisionRequest bad;
    bad.kv_dtype = "int4";  // weight-only
    CHECK_THROWS_WITH(check_precision_request(bad),
                      Catch::Contains("kv_dtype (--kv-dtype)") && Catch::Contains("fp32 | bf16 | fp8"));
    bad = PrecisionRequest{};
    bad.dtype = "fp16";
    CHECK_THROWS_WITH(check_precision_request(bad),
                      Catch::Contains("dtype (--dtype)") && Catch::Contains("unknown number format"));
}

TEST_CASE("precision: block-scaled formats count their scales, and each class takes its formats", "[precision]") {
    // Storage per element: the value plus its share of one block scale (per-tensor scales are not counted).
    CHECK(dtype_info(DType::fp8).bytes_per_elem() == 1.0);
    CHECK(dtype_info(DType::fp8_block).bytes_per_elem() == 1.0 + 4.0 / 16384);  // fp32 scale per 128 x 128 block
    CHECK(dtype_info(DType::nvfp4).bytes_per_elem() == 0.5625);                 // fp8 e4m3 scale per 16
    CHECK(dtype_info(DType::mxfp4).bytes_per_elem() == 0.53125);                // e8m0 scale per 32
    CHECK(dtype_info(DType::int4).bytes_per_elem() == 0.515625);                // bf16 scale per 128
    // The rate each computes at: block-scaled fp8 at fp8; the fp4 formats at fp4; int4 weight-only at bf16.
    CHECK(dtype_info(DType::fp8_block).weight_compute == ComputeRate::fp8);
    CHECK(dtype_info(DType::nvfp4).weight_compute == ComputeRate::fp4);
    CHECK(dtype_info(DType::mxfp4).weight_compute == ComputeRate::fp4);
    CHECK(dtype_info(DType::int4).weight_compute == ComputeRate::bf16);

    PrecisionRequest r;
    r.dtype = "fp8-block";
    r.expert_dtype = "nvfp4";
    r.kv_dtype = "fp8";
    r.dispatch_dtype = "fp8";
    const Precision p = resolve_precision(r, uniform_precision(DType::bf16));
    CHECK(p.dense_weights == DType::fp8_block);
    CHECK(p.expert_weights == DType::nvfp4);
    CHECK(p.activations == DType::bf16);
    CHECK(p.combine == DType::bf16);
    r.expert_dtype = "mxfp4";
    CHECK(resolve_precision(r, uniform_precision(DType::bf16)).expert_weights == DType::mxfp4);
    // The block formats are weight formats: not for the KV cache or the wire.
    PrecisionRequest kv;
    kv.kv_dtype = "nvfp4";
    CHECK_THAT(test::config_error_of([&] { check_precision_request(kv); }),
               Catch::Contains("kv_dtype (--kv-dtype)") && Catch::Contains("fp32 | bf16 | fp8"));
    PrecisionRequest wire;
    wire.dispatch_dtype = "fp8-block";
    CHECK_THAT(test::config_error_of([&] { check_precision_request(wire); }),
               Catch::Contains("dispatch_dtype (--dispatch-dtype)"));
    CHECK(dtype_names_for(TensorClass::expert_weights) == "fp32 | bf16 | fp8 | fp8-block | nvfp4 | mxfp4 | int4");
}

TEST_CASE("precision: counted bytes follow each class", "[precision]") {
    const ModelConfig m = tiny_gqa_h8();
    StepShape s;
    s.batch = 4;
    s.context = 64;
    const std::vector<int64_t> tpe = {2, 2, 2, 2};
    const Precision bf16 = uniform_precision(DType::bf16);
    Precision fp8_experts = bf16;
    fp8_experts.expert_weights = DType::fp8;
    // The routed experts' weights halve, nothing else moves.
    CHECK(phase_work(m, Phase::expert_up, 0, s, tpe, fp8_experts, 1).weight_bytes ==
          Approx(phase_work(m, Phase::expert_up, 0, s, tpe, bf16, 1).weight_bytes / 2));
    CHECK(phase_work(m, Phase::qkv_proj, 0, s, tpe, fp8_experts, 1).weight_bytes ==
          Approx(phase_work(m, Phase::qkv_proj, 0, s, tpe, bf16, 1).weight_bytes));
    // nvfp4 experts: 0.5625 bytes per weight instead of 2.
    Precision nvfp4_experts = bf16;
    nvfp4_experts.expert_weights = DType::nvfp4;
    CHECK(phase_work(m, Phase::expert_up, 0, s, tpe, nvfp4_experts, 1).weight_bytes ==
          Approx(phase_work(m, Phase::expert_up, 0, s, tpe, bf16, 1).weight_bytes * 0.5625 / 2));
    // An fp8 KV cache halves the cache read of decode attention: 4 sequences x 64 cached tokens x (k and v of one
    // 4-wide head) elements, 2 bytes each in bf16 and 1 in fp8.
    Precision fp8_kv = bf16;
    fp8_kv.kv_cache = DType::fp8;
    const double cache_elems = 4.0 * 64 * kv_elems_per_token_per_layer(m);
    CHECK(phase_work(m, Phase::attention, 0, s, tpe, bf16, 1).activation_bytes -
              phase_work(m, Phase::attention, 0, s, tpe, fp8_kv, 1).activation_bytes ==
          Approx(cache_elems * (2 - 1)));
    // fp8 dense weights leave the LM head and the embedding in bf16.
    Precision fp8_dense = bf16;
    fp8_dense.dense_weights = DType::fp8;
    CHECK(phase_work(m, Phase::lm_head, -1, s, {}, fp8_dense, 1).weight_bytes ==
          Approx(phase_work(m, Phase::lm_head, -1, s, {}, bf16, 1).weight_bytes));
}

TEST_CASE("layout and precision flags: run, plan and sweep read the same ones", "[layout][precision][cli]") {
    const std::string tiny = std::string(MOEBENCH_TEST_DATA) + "/conformance/models/tiny-mixtral-8x7b.json";
    const std::string dir = temp_dir("layoutcli");
    // cpu computes fp32 only, and no tensor parallelism: refused by name, with the way out (the sim models it).
    CliResult r = run_cli("run --backend cpu --model " + tiny + " --layers 1 --iters 1 --warmup 0 --dtype bf16 --out " +
                          dir + "/a.json");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("dtype (--dtype)") && Catch::Contains("computes fp32"));
    r = run_cli("run --backend cpu --model " + tiny + " --layers 1 --iters 1 --warmup 0 --tp 2 --out " + dir +
                "/b.json");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("tp (--tp)") && Catch::Contains("--backend sim"));
    r = run_cli("run --backend cpu --model " + tiny + " --kv-dtype int4 --out " + dir + "/c.json");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("kv_dtype (--kv-dtype)"));

    // The sim counts what it is told: fp8 experts halve the expert weights the roofline counts.
    const std::string sim = "run --backend sim --hardware h200-sxm --model " + tiny +
                            " --layers 1 --batch 8 --iters 2 "
                            "--warmup 0 ";
    r = run_cli(sim + "--out " + dir + "/bf16.json");
    REQUIRE(r.exit_code == 0);
    r = run_cli(sim + "--expert-dtype fp8 --out " + dir + "/fp8.json");
    REQUIRE(r.exit_code == 0);
    const json bf16 = json::parse(read_text(dir + "/bf16.json"))["runs"][0];
    const json fp8 = json::parse(read_text(dir + "/fp8.json"))["runs"][0];
    CHECK(fp8["precision"]["expert_weights"] == "fp8");
    CHECK(fp8["precision"]["dense_weights"] == "bf16");
    CHECK(fp8["axes"]["expert_dtype"] == "fp8");
    CHECK(fp8["roofline"]["phases"]["expert_up"]["weight_bytes"].get<double>() ==
          Approx(bf16["roofline"]["phases"]["expert_up"]["weight_bytes"].get<double>() / 2));
    // The layout as the report records it: every size given.
    CHECK(bf16["axes"]["tp"] == 1);
    CHECK(bf16["axes"]["moe_ep"] == 1);
    CHECK(bf16["layout"]["num_gpus"] == 1);

    // A report written before the layout and format axes existed still matches a new one of the same point.
    json old = json::parse(read_text(dir + "/bf16.json"));
    for (const char* k : {"tp", "attention_dp", "moe_tp", "moe_ep", "dtype", "expert_dtype", "kv_dtype"})
        old["runs"][0]["axes"].erase(k);
    std::ofstream(dir + "/old.json") << old.dump();
    r = run_cli("compare " + dir + "/old.json " + dir + "/bf16.json");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, !Catch::Contains("no point"));

    // plan takes the same flags.
    r = run_cli("plan --model mixtral-8x7b --hardware h100-sxm --expert-dtype int4 --format json");
    REQUIRE(r.exit_code == 0);
    const json plan = json::parse(r.out);
    CHECK(plan["inputs"]["expert_dtype"] == "int4");
    CHECK(plan["inputs"]["dtype"] == "bf16");
    r = run_cli("plan --model mixtral-8x7b --tp 3");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("tp (--tp)"));

    // sweep: the formats are axes.
    r = run_cli("sweep --backend sim --model " + tiny +
                " --layers 1 --batch 8 --iters 1 "
                "--warmup 0 --dtype bf16,fp8 --out " +
                dir + "/sweep.json --journal " + dir + "/sweep.jsonl");
    REQUIRE(r.exit_code == 0);
    const json sweep = json::parse(read_text(dir + "/sweep.json"));
    REQUIRE(sweep["runs"].size() == 2);
    CHECK(sweep["runs"][1]["precision"]["dense_weights"] == "fp8");
}

TEST_CASE("plan and the sim count the same weight bytes per GPU in every format", "[precision][plan][sim][cli]") {
    // The same model, layout, batch, context and formats through `moebench plan` and a sim run: the weights per GPU
    // the plan reports and the sim's backend_info.memory_per_gpu agree (both block-scale counts included).
    struct Case {
        std::string model, layout, formats;
    };
    const std::vector<Case> cases = {
        {"deepseek-v3", "--ep 8", "--dtype fp8"},
        {"deepseek-v3", "--ep 8", "--dtype fp8-block"},
        {"deepseek-v3", "--ep 8", "--dtype nvfp4"},
        {"deepseek-v3", "--ep 8", "--dtype int4"},
        {"deepseek-v3", "--ep 8", "--dtype fp8-block --expert-dtype nvfp4"},
        {"qwen3-30b-a3b", "--ep 2", "--dtype fp8"},
        {"qwen3-30b-a3b", "--ep 2", "--dtype fp8-block"},
        {"qwen3-30b-a3b", "--ep 2", "--dtype nvfp4"},
        {"qwen3-30b-a3b", "--ep 2", "--dtype mxfp4"},
        {"qwen3-30b-a3b", "--ep 2", "--dtype int4"},
    };
    for (const Case& c : cases) {
        const std::string point =
            "--hardware b200 --model " + c.model + " " + c.layout + " " + c.formats + " --batch 16 --context 2048";
        INFO(point);
        const CliResult plan = run_cli("plan --format json " + point);
        REQUIRE(plan.exit_code == 0);
        const CliResult sim = run_cli("run --backend sim --layers 1 --iters 1 --warmup 0 --json - " + point);
        REQUIRE(sim.exit_code == 0);
        const json mem = json::parse(sim.out)["runs"][0]["backend_info"]["memory_per_gpu"];
        const json per_gpu = json::parse(plan.out)["memory"]["per_gpu"];
        CHECK(mem["weights_bytes"].get<double>() == Approx(per_gpu["weights_bytes"].get<double>()).margin(1));
        for (const auto& [component, bytes] : per_gpu["weights_by_component_bytes"].items()) {
            INFO(component);
            CHECK(mem["weights_by_component_bytes"][component].get<double>() == Approx(bytes.get<double>()).margin(1));
        }
        CHECK(mem["kv_cache_bytes"].get<double>() == Approx(per_gpu["kv_cache_bytes"].get<double>()).margin(1));
    }
    // By hand: DeepSeek-V3's routed experts, 58 MoE layers x 256 experts x 3 x 7168 x 2048 = 653,908,770,816 weights,
    // in nvfp4 (0.5 + 1/16 bytes each) over 8 GPUs: 45,977,960,448 bytes per GPU.
    const CliResult nvfp4 = run_cli(
        "run --backend sim --hardware b200 --model deepseek-v3 --ep 8 --dtype nvfp4 "
        "--layers 1 --iters 1 --warmup 0 --json -");
    REQUIRE(nvfp4.exit_code == 0);
    CHECK(json::parse(
              nvfp4.out)["runs"][0]["backend_info"]["memory_per_gpu"]["weights_by_component_bytes"]["routed_experts"]
              .get<double>() == Approx(45977960448.0));

    // The plan's text names both weight formats.
    const CliResult text =
        run_cli("plan --hardware b200 --model deepseek-v3 --ep 8 --dtype fp8-block --expert-dtype nvfp4");
    REQUIRE(text.exit_code == 0);
    CHECK_THAT(text.out, Catch::Contains("weights (fp8-block, experts nvfp4)") && Catch::Contains("nvfp4 9000"));

    // DeepSeek-V3 at EP 8 on H200s: fp8 fits; bf16 (about 180 GiB per GPU) does not, and the sim says so.
    const std::string h200 =
        "run --backend sim --hardware h200-sxm --model deepseek-v3 --ep 8 --first-layer 3 "
        "--layers 1 --iters 1 --warmup 0 --json - ";
    const CliResult fp8 = run_cli(h200 + "--dtype fp8");
    REQUIRE(fp8.exit_code == 0);
    CHECK_FALSE(json::parse(fp8.out)["runs"][0].contains("sim_fit_warning"));
    const CliResult bf16 = run_cli(h200 + "--dtype bf16");
    CHECK(bf16.exit_code == 2);
    CHECK_THAT(bf16.err, Catch::Contains("GiB per GPU") && Catch::Contains("use --dtype fp8"));
    // nvfp4 on a GPU without fp4 units: refused by name, with the formats it does compute.
    const CliResult no_fp4 = run_cli(h200 + "--expert-dtype nvfp4");
    CHECK(no_fp4.exit_code == 2);
    CHECK_THAT(no_fp4.err, Catch::Contains("expert_dtype (--expert-dtype)") && Catch::Contains("fp4_tflops") &&
                               Catch::Contains("fp8-block"));
    const CliResult plan_no_fp4 = run_cli(
        "plan --hardware h200-sxm --model deepseek-v3 --ep 8 --dtype fp8 "
        "--expert-dtype mxfp4");
    CHECK(plan_no_fp4.exit_code == 2);
    CHECK_THAT(plan_no_fp4.err, Catch::Contains("expert_dtype (--expert-dtype)") && Catch::Contains("fp4_tflops"));
}
