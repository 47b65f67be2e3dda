// SPDX-License-Identifier: Apache-2.0
// What expert offload costs: plan's memory with N resident experts (by hand), expert_fetch's counted bytes, the sim's
// pricing of each fetched expert over the host link, the cpu backend's host-analogue copies, and the refusals of the
// run fields resident_experts, offload_ratio and offload_policy.
#include "cli_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "config/model_config.hpp"
#include "core/phase.hpp"
#include "model/phase_work.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace moebench;
using moebench::test::expect_refused;
using moebench::test::run_cli;

namespace {

// One Mixtral-8x7B expert: gate, up and down of 4096 x 14336.
constexpr double kMixtralExpertParams = 3.0 * 4096 * 14336;

nlohmann::json run_json(const std::string& args) {
    auto r = run_cli(args + " --out -");
    INFO("moebench " << args << "\n" << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("expert_fetch is a row of the phase table, bound by the host link, before expert_up", "[offload]") {
    const PhaseInfo& row = phase_info(Phase::expert_fetch);
    CHECK(row.name == "expert_fetch");
    CHECK(row.bound == PhaseBound::host);
    CHECK(row.side == PhaseSide::experts);
    CHECK(static_cast<int>(Phase::expert_fetch) + 1 == static_cast<int>(Phase::expert_up));
}

TEST_CASE("expert_fetch counts the fetched experts' bytes in the expert format", "[offload]") {
    const ModelConfig m = load_model("mixtral-8x7b");
    StepShape shape;
    shape.batch = 1;
    PhaseWorkOptions o;
    o.fetched_experts = 5;
    Precision p = uniform_precision(DType::bf16);
    CHECK(phase_work(m, Phase::expert_fetch, 0, shape, std::vector<int64_t>(8, 0), p, 1, o).bytes() ==
          5 * kMixtralExpertParams * 2);
    p.expert_weights = DType::fp8;
    CHECK(phase_work(m, Phase::expert_fetch, 0, shape, std::vector<int64_t>(8, 0), p, 1, o).bytes() ==
          5 * kMixtralExpertParams * 1);
    o.fetched_experts = -1;  // nothing replayed: nothing counted
    CHECK(phase_work(m, Phase::expert_fetch, 0, shape, std::vector<int64_t>(8, 0), p, 1, o).bytes() == 0);
}

TEST_CASE("plan --resident-experts: N experts per layer on the GPU plus 2 x top-k fetch buffers, the rest on the host",
          "[offload][cli]") {
    // Mixtral-8x7B bf16: 32 MoE layers x 8 experts x 176,160,768 parameters x 2 bytes. With N = 6: 6/8 of them,
    // plus 4 experts of fetch buffers; the host holds 2 x 32 experts.
    const double expert_bytes = kMixtralExpertParams * 2;
    const double all_experts = 32 * 8 * expert_bytes;
    for (const std::string flag : {"--resident-experts 6", "--offload-ratio 0.3"}) {  // 8 - round(2.4) = 6
        INFO(flag);
        auto r = run_cli("plan --model mixtral-8x7b --hardware h100-sxm --format json " + flag);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        const auto j = nlohmann::json::parse(r.out);
        const auto& mem = j.at("memory");
        CHECK(mem["per_gpu"]["weights_by_component_bytes"]["routed_experts"].get<double>() ==
              Approx(all_experts * 6 / 8 + 4 * expert_bytes).epsilon(1e-12));
        CHECK(mem["expert_offload"]["resident_experts"] == 6);
        CHECK(mem["expert_offload"]["fetch_buffer_experts"] == 4);
        CHECK(mem["expert_offload"]["host_bytes"].get<double>() == Approx(2 * 32 * expert_bytes).epsilon(1e-12));
    }
    // Without offload every expert is on the GPU (fp8: bf16 Mixtral needs two H100s, and plan would choose them).
    auto whole =
        nlohmann::json::parse(run_cli("plan --model mixtral-8x7b --hardware h100-sxm --dtype fp8 --format json").out);
    CHECK(whole["memory"]["per_gpu"]["weights_by_component_bytes"]["routed_experts"].get<double>() ==
          Approx(all_experts / 2).epsilon(1e-12));
    CHECK(whole["memory"]["expert_offload"].is_null());
    auto text = run_cli("plan --model mixtral-8x7b --hardware h100-sxm --resident-experts 6");
    CHECK_THAT(text.out, Catch::Contains("host memory (offloaded experts)"));
    CHECK_THAT(text.out, Catch::Contains("of which fetch buffers"));
}

TEST_CASE("the sim prices each fetched expert over the host link and replays the cache over the run's routing",
          "[offload][sim]") {
    const std::string trace = moebench::test::temp_dir("offload") + "/gsm8k.safetensors";
    REQUIRE(run_cli("trace convert " + std::string(MOEBENCH_TEST_DATA) + "/traces/mixtral-8x7b-gsm8k.jsonl -o " + trace)
                .exit_code == 0);
    const auto doc = run_json(
        "run --backend sim --hardware h100-sxm --model mixtral-8x7b --dtype fp8 --layers 2 "
        "--batch 1 --iters 40 --warmup 2 --routing trace:" +
        trace + " --resident-experts 2 --offload-policy lru");
    const auto& run = doc.at("runs").at(0);
    const auto& phases = run.at("latency").at("phases");
    REQUIRE(phases.contains("expert_fetch"));
    const auto& off = run.at("backend_info").at("expert_offload");
    CHECK(off.at("resident_experts") == 2);
    CHECK(off.at("hits").get<int64_t>() < off.at("accesses").get<int64_t>());
    // One fp8 expert over 64 GB/s x 0.78, plus 10 us per copy: every step's expert_fetch is a whole number of them.
    const double per_copy_us = kMixtralExpertParams / (64e9 * 0.78) * 1e6 + 10.0;
    CHECK(off.at("expert_bytes").get<double>() == kMixtralExpertParams);
    for (const char* key : {"min_us", "max_us"}) {
        const double copies = phases["expert_fetch"].at(key).get<double>() / per_copy_us;
        INFO(key << " = " << copies << " copies");
        CHECK(std::abs(copies - std::round(copies)) < 1e-6);
    }
    CHECK(phases["expert_fetch"].at("max_us").get<double>() > 0);
    // The tail is the story: a step that fetches is slower than one that hits.
    CHECK(run.at("latency").at("step").at("p99_us").get<double>() >
          run.at("latency").at("step").at("p50_us").get<double>());
}

TEST_CASE("offload keeps the sim on the per-token routing path, with the reason", "[offload][sim]") {
    // zipf routes each token independently: without offload the sim draws it statistically (no token ids, so no cache
    // to replay them through); with offload it routes every token and says why.
    const std::string base =
        "run --backend sim --hardware h100-sxm --model mixtral-8x7b --dtype fp8 --layers 2 "
        "--batch 4 --iters 6 --warmup 1 --routing zipf:1.2";
    CHECK(run_json(base).at("runs").at(0).at("routing").at("path") == "statistical");
    const auto run = run_json(base + " --resident-experts 2").at("runs").at(0);
    CHECK(run.at("routing").at("path") == "per-token");
    CHECK_THAT(run.at("routing").at("path_reason").get<std::string>(), Catch::Contains("expert offload"));
    const auto& off = run.at("backend_info").at("expert_offload");
    CHECK(off.at("accesses").get<int64_t>() > 0);
    CHECK(off.at("hits").get<int64_t>() < off.at("accesses").get<int64_t>());
    expect_refused(base + " --resident-experts 2 --routing-path statistical", {"routing_path", "expert offload"});
}

TEST_CASE("the cpu backend copies the missed experts as the host analogue", "[offload][cpu]") {
    const auto doc = run_json(
        "run --backend cpu --model olmoe-1b-7b --layers 1 --batch 1 --iters 3 --warmup 1 "
        "--resident-experts 4 --threads 1");
    const auto& run = doc.at("runs").at(0);
    REQUIRE(run.at("latency").at("phases").contains("expert_fetch"));
    const auto& off = run.at("backend_info").at("expert_offload");
    CHECK_THAT(off.at("what").get<std::string>(), Catch::Contains("host analogue"));
    // OLMoE: gate, up and down of 2048 x 1024 in fp32.
    CHECK(off.at("expert_bytes") == 3 * 2048 * 1024 * 4);
    CHECK(off.at("fetched_bytes").get<int64_t>() ==
          off.at("fetched_experts").get<int64_t>() * off.at("expert_bytes").get<int64_t>());
    CHECK(off.at("fetched_experts").get<int64_t>() > 0);
}

TEST_CASE("offload run fields refuse bad input by field, value and fix", "[offload][cli][robust]") {
    const std::string sim = "run --backend sim --hardware h100-sxm --model mixtral-8x7b --dtype fp8 --layers 1 --out -";
    expect_refused(sim + " --resident-experts -1", {"resident_experts", "--resident-experts", "-1"});
    expect_refused(sim + " --offload-ratio 1.5", {"offload_ratio", "1.5", "[0, 1)"});
    expect_refused(sim + " --resident-experts 4 --offload-ratio 0.3", {"offload_ratio", "give one of them"});
    expect_refused(sim + " --resident-experts 4 --offload-policy lruu",
                   {"--offload-policy", "lruu", "did you mean lru?"});
    expect_refused(sim + " --resident-experts 4 --offload-policy optimal",
                   {"--offload-policy", "optimal", "use lru or lfu", "moebench offload"});
    expect_refused(sim + " --resident-experts 4 --ep 2", {"--resident-experts", "one GPU", "drop --ep"});
    expect_refused("plan --model mixtral-8x7b --resident-experts 4 --ep 2", {"--resident-experts", "one GPU"});
}
