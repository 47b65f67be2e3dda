// SPDX-License-Identifier: Apache-2.0
// The run record's roofline block (counted work per phase, ceilings, floors, MoE-block ratio) recomputed by hand
// from the model's shapes and the report's own expert loads; and `moebench run --format`.
#include "cli_helpers.hpp"
#include "config/hardware.hpp"
#include "engine/engine.hpp"
#include "metrics/roofline.hpp"
#include "report/formats.hpp"
#include "test_models.hpp"
#include "test_paths.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using moebench::test::run_cli;
using nlohmann::json;

namespace {

const std::string kTiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";  // H 64, E 4, k 2, I 32

json run_json(const std::string& extra) {
    auto r =
        run_cli("run --model " + kTiny + " --backend cpu --warmup 0 --iters 1 --batch 4 --layers 2 --json - " + extra);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
}

}  // namespace

TEST_CASE("roofline: expert phases counted from the shapes and the measured loads (cpu, fp32)", "[roofline]") {
    json rep = run_json("");
    const json& run = rep["runs"][0];
    const json& roof = run["roofline"];
    REQUIRE(roof.is_object());
    CHECK(roof["source"] == "counted");
    CHECK(roof["weight_elem_bytes"].get<double>() == 4.0);
    // No ceilings given: null rates, the reason stated, no floors.
    CHECK(roof["peak_flops_per_s"].is_null());
    CHECK(roof["mem_bw_bytes_per_s"].is_null());
    CHECK(roof.contains("floor_unavailable"));
    CHECK(roof["phases"]["expert_up"]["floor_us"].is_null());

    // By hand: one step (iters 1), 2 MoE layers, 4 tokens x k 2 = 8 assignments per layer, H 64, I 32.
    const double H = 64, I = 32;
    double up_flops = 0, up_weight_bytes = 0, down_flops = 0;
    for (const json& l : run["expert_load"]["per_layer"]) {
        double assigned = 0, touched = 0;
        for (const json& c : l["tokens_per_expert"]) {
            assigned += c.get<double>();
            touched += c.get<double>() > 0 ? 1 : 0;
        }
        CHECK(assigned == 8);
        up_flops += 2 * assigned * H * 2 * I;
        down_flops += 2 * assigned * I * H;
        up_weight_bytes += touched * 2 * I * H * 4;
    }
    const json& up = roof["phases"]["expert_up"];
    CHECK(up["flops"].get<double>() == Approx(up_flops));
    CHECK(up["weight_bytes"].get<double>() == Approx(up_weight_bytes));
    CHECK(roof["phases"]["expert_down"]["flops"].get<double>() == Approx(down_flops));
    // Achieved rates from the phase mean of latency.phases.
    const double up_us = run["latency"]["phases"]["expert_up"]["mean_us"].get<double>();
    CHECK(up["achieved_tflops"].get<double>() == Approx(up_flops / (up_us * 1e-6) / 1e12));
    CHECK(up["achieved_gbps"].get<double>() == Approx(up["bytes"].get<double>() / (up_us * 1e-6) / 1e9));
    // Every phase that ran has counted work.
    for (auto it = run["latency"]["phases"].begin(); it != run["latency"]["phases"].end(); ++it)
        CHECK(roof["phases"].contains(it.key()));
    // The MoE block sums the MoE-layer phases of the router..combine groups.
    const json& block = roof["moe_block"];
    CHECK(block["layers"] == 2);
    CHECK(block["ratio_to_floor"].is_null());
    double block_flops = 0;
    for (const json& p : block["phases"]) block_flops += roof["phases"][p.get<std::string>()]["flops"].get<double>();
    CHECK(block["flops"].get<double>() == Approx(block_flops));
}

TEST_CASE("roofline under expert parallelism: all-to-all rows as the run moves them, replicated weights per rank",
          "[roofline][ep]") {
    using namespace moebench;
    const ModelConfig m = test::tiny_gqa_h8();  // E 4, k 2, H 8; layer 0 is MoE
    const StepShape shape = test::decode(4, 0);
    // ep 2: experts 0-1 on rank 0, 2-3 on rank 1; tokens 0-1 on rank 0, 2-3 on rank 1.
    // t0 {0, 3}: one remote row (dedup 1, per-expert 1); t1 {2, 3}: both on rank 1 (1, 2); t2 {0, 1}: both on rank 0
    // (1, 2); t3 {3, 2}: local (0, 0). Rows across ranks: dedup 3, per-expert 5.
    MoeLayerSamples acc;
    acc.slot = 0;
    acc.layer = 0;
    acc.k = 2;
    acc.ids = {0, 3, 2, 3, 0, 1, 3, 2};
    const std::vector<PhaseEntry> plan = step_plan(m, {0}, 2, true);  // with embed and the head
    const std::vector<StepTimes> steps = {StepTimes{std::vector<double>(plan.size(), 1.0), 0, 0}};
    RooflineCeilings ceil;
    ceil.peak_flops_per_s = 1e9;
    ceil.mem_bw_bytes_per_s = 1e9;
    const auto bytes_of = [&](const json& roof, const char* phase, const char* key) {
        return roof["phases"][phase][key].get<double>();
    };
    for (const bool dedup : {true, false}) {
        WorkBasis basis{uniform_precision(DType::fp32), MlaForm::expanded_cache, "cpu"};
        basis.a2a_dedup = dedup;
        basis.dispatch_row_bytes = 100;  // e.g. an fp8 row with its scales; the combine returns H x 4 = 32 B rows
        const json roof = roofline_block(m, shape, ep_layout(2), basis, "modeled", plan, steps, {acc}, {}, ceil);
        const double rows = dedup ? 3 : 5;
        CHECK(bytes_of(roof, "dispatch_a2a", "bytes") == Approx(rows * 100));
        CHECK(bytes_of(roof, "combine_a2a", "bytes") == Approx(rows * 32));
        CHECK(roof["ranks"] == 2);
        // Both ranks hold tokens, so both read their own copy of the attention, router and shared-expert weights;
        // the routed experts' weights are split over the ranks and read once.
        for (const Phase ph : {Phase::qkv_proj, Phase::router_gemm, Phase::shared_expert}) {
            INFO(phase_name(ph));
            CHECK(bytes_of(roof, std::string(phase_name(ph)).c_str(), "weight_bytes") ==
                  Approx(2 * phase_work(m, ph, 0, shape, {}, uniform_precision(DType::fp32), 1).weight_bytes));
        }
        CHECK(bytes_of(roof, "expert_up", "weight_bytes") ==
              Approx(phase_work(m, Phase::expert_up, 0, shape, {2, 1, 3, 2}, uniform_precision(DType::fp32), 1)
                         .weight_bytes));
        // The head is read whole on each rank; embed gathers each token's row once, wherever the token lives.
        CHECK(bytes_of(roof, "lm_head", "weight_bytes") ==
              Approx(2 * phase_work(m, Phase::lm_head, -1, shape, {}, uniform_precision(DType::fp32), 1).weight_bytes));
        CHECK(bytes_of(roof, "embed", "weight_bytes") ==
              Approx(phase_work(m, Phase::embed, -1, shape, {}, uniform_precision(DType::fp32), 1).weight_bytes));
    }
    // A placement file's experts: rank 0 holds {0, 3}, rank 1 holds {1, 2}.
    const json doc = {{"schema", "moebench.placement/1"},
                      {"num_experts", 4},
                      {"num_ranks", 2},
                      {"experts_on_rank", {{0, 3}, {1, 2}}}};
    const ExpertPlacement moved = placement_from_json(doc, 4, 2, "p.json");
    WorkBasis basis{uniform_precision(DType::fp32), MlaForm::expanded_cache, "cpu"};
    basis.placement = &moved;
    basis.a2a_dedup = false;
    const json roof = roofline_block(m, shape, ep_layout(2), basis, "modeled", plan, steps, {acc}, {}, ceil);
    // Per assignment: t0 (rank 0) {0, 3} both local; t1 (rank 0) {2, 3}: expert 2 remote; t2 (rank 1) {0, 1}:
    // expert 0 remote; t3 (rank 1) {3, 2}: expert 3 remote. 3 rows of H x 4 bytes (no dispatch dtype given).
    CHECK(bytes_of(roof, "dispatch_a2a", "bytes") == Approx(3 * 32));
}

TEST_CASE("roofline: --hardware gives datasheet ceilings and floors", "[roofline]") {
    json rep = run_json("--hardware h200-sxm");
    const json& run = rep["runs"][0];
    const json& roof = run["roofline"];
    moebench::HardwareProfile hw = moebench::load_hardware("h200-sxm");
    CHECK(roof["peak_flops_per_s"].get<double>() == Approx(hw.fp32_flops));  // cpu computes in fp32
    CHECK(roof["mem_bw_bytes_per_s"].get<double>() == Approx(hw.memory_bw_bytes_per_s));
    CHECK(roof["ceiling_source"] == "hardware profile h200-sxm");
    const json& up = roof["phases"]["expert_up"];
    const double floor_us =
        std::max(up["bytes"].get<double>() / hw.memory_bw_bytes_per_s, up["flops"].get<double>() / hw.fp32_flops) * 1e6;
    CHECK(up["floor_us"].get<double>() == Approx(floor_us));
    const double us = run["latency"]["phases"]["expert_up"]["mean_us"].get<double>();
    CHECK(up["fraction_of_floor"].get<double>() == Approx(floor_us / us));
    CHECK(up["fraction_of_peak_flops"].get<double>() ==
          Approx(up["flops"].get<double>() / (us * 1e-6) / hw.fp32_flops));
    CHECK(up["fraction_of_mem_bw"].get<double>() ==
          Approx(up["bytes"].get<double>() / (us * 1e-6) / hw.memory_bw_bytes_per_s));
    const json& block = roof["moe_block"];
    const double bfloor = std::max(block["bytes"].get<double>() / hw.memory_bw_bytes_per_s,
                                   block["flops"].get<double>() / hw.fp32_flops) *
                          1e6;
    CHECK(block["floor_us"].get<double>() == Approx(bfloor));
    CHECK(block["ratio_to_floor"].get<double>() == Approx(block["measured_us"].get<double>() / bfloor));
}

TEST_CASE("roofline: --measure-ceilings measures this machine and the summary shows the MoE-block ratio",
          "[roofline][slow]") {
    auto r = run_cli("run --model " + kTiny +
                     " --backend cpu --warmup 0 --iters 1 --batch 4 --layers 1 --threads 2 "
                     "--measure-ceilings --out " +
                     moebench::test::temp_dir("roof") + "/r.json --format json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    json rep = json::parse(r.out);
    const json& roof = rep["runs"][0]["roofline"];
    CHECK(roof["ceiling_source"] == "measured on this machine");
    CHECK(roof["peak_flops_per_s"].get<double>() > 1e8);    // any CPU does > 0.1 GFLOP/s in sgemm
    CHECK(roof["mem_bw_bytes_per_s"].get<double>() > 1e8);  // and reads > 100 MB/s
    CHECK(roof["moe_block"]["ratio_to_floor"].get<double>() > 0);
    CHECK(r.err.find("MoE block:") != std::string::npos);
    CHECK(r.err.find("the floor") != std::string::npos);
}

TEST_CASE("run --format: the report to --out, the chosen view on stdout, the summary on stderr", "[roofline]") {
    std::string dir = moebench::test::temp_dir("fmt");
    auto r = run_cli("run --model " + kTiny +
                     " --backend cpu --warmup 0 --iters 1 --batch 2 --layers 1 --format csv --out " + dir + "/r.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.rfind("point,status,", 0) == 0);
    CHECK(r.err.find("tokens/s") != std::string::npos);
    json file = json::parse(moebench::test::read_text(dir + "/r.json"));
    CHECK(file["schema"] == "moebench.report/1");
    // The CSV is exactly what `moebench report` would render from that file.
    CHECK(r.out == moebench::render_report(file, "csv"));

    auto h = run_cli("run --model " + kTiny +
                     " --backend cpu --warmup 0 --iters 1 --batch 2 --layers 1 --hardware h200-sxm "
                     "--format html --out " +
                     dir + "/h.json");
    REQUIRE(h.exit_code == 0);
    CHECK(h.out.find("<html") != std::string::npos);
    const auto roof_at = h.out.find("id=\"chart-roofline\"");
    REQUIRE(roof_at != std::string::npos);
    CHECK(h.out.find("not available", roof_at) > h.out.find("</svg>", roof_at));  // the chart is drawn

    auto clash = run_cli("run --model " + kTiny + " --backend cpu --json - --format csv");
    CHECK(clash.exit_code == 2);
    CHECK(clash.err.find("--format") != std::string::npos);
    auto bad = run_cli("run --model " + kTiny + " --backend cpu --format pdf");
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("--format") != std::string::npos);
    CHECK(bad.err.find("pdf") != std::string::npos);
}
