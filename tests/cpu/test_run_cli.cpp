// SPDX-License-Identifier: Apache-2.0
// 'moebench run' on bad input: exit 2 with a message naming the flag, the value and the fix; never a crash.
#include "cli_helpers.hpp"
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "test_paths.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <fstream>

using moebench::test::run_cli;
using json = nlohmann::json;

namespace {

const std::string kTiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";
// A quick valid run; the report goes to a fresh temporary folder.
std::string quick() {
    return " --backend cpu --warmup 0 --iters 1 --batch 2 --layers 1 --out " + moebench::test::temp_dir("run") +
           "/report.json";
}

void expect_exit2(const std::string& args, const std::vector<std::string>& needles) {
    auto r = run_cli("run --model " + kTiny + " " + args);
    INFO("args: " << args << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    for (const auto& n : needles) CHECK(r.err.find(n) != std::string::npos);
}

}  // namespace

TEST_CASE("run: --layers beyond the model is exit 2 naming --layers and the model's count", "[run_cli]") {
    expect_exit2("--backend cpu --layers 5", {"--layers", "5", "2 layers"});
}

TEST_CASE("run: --first-layer picks where the layers run start; beyond the model is exit 2 naming the flag",
          "[run_cli]") {
    expect_exit2("--backend cpu --first-layer 2", {"--first-layer", "2", "layers 0 to 1", "between 0 and 1"});
    expect_exit2("--backend cpu --first-layer -1", {"--first-layer", "-1"});
    expect_exit2("--backend cpu --first-layer 1 --layers 2", {"--layers", "2", "1 layers", "from layer 1 on"});
    // A run of the second layer alone: the report says which layer ran, and the axis tells it from layer 0's run.
    auto r = run_cli("run --model " + kTiny +
                     " --backend cpu --warmup 0 --iters 1 --batch 2 --first-layer 1 --layers 1 "
                     "--check --json -");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json run = json::parse(r.out)["runs"][0];
    CHECK(run["layers"]["run"] == json::array({1}));
    CHECK(run["axes"]["first_layer"] == 1);
    CHECK(run["axes"]["layers"] == 1);
    CHECK(run["check"]["layer"] == 1);
    CHECK(run["check"]["passed"] == true);
}

TEST_CASE("compare: the first layer is an axis; a report from before it was one reads as layer 0", "[run_cli]") {
    const std::string dir = moebench::test::temp_dir("first_layer_compare");
    const std::string sim = "run --model " + kTiny + " --backend sim --warmup 0 --iters 1 --batch 2 --layers 1 ";
    REQUIRE(run_cli(sim + "--out " + dir + "/l0.json").exit_code == 0);
    REQUIRE(run_cli(sim + "--first-layer 1 --out " + dir + "/l1.json").exit_code == 0);
    json old = json::parse(moebench::test::read_text(dir + "/l0.json"));
    old["runs"][0]["axes"].erase("first_layer");
    std::ofstream(dir + "/old.json") << old.dump();
    auto r = run_cli("compare " + dir + "/old.json " + dir + "/l0.json");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, !Catch::Contains("no point"));
    // Layer 1 alone is another point than layer 0 alone (same "layers": 1).
    r = run_cli("compare " + dir + "/l0.json " + dir + "/l1.json");
    CHECK_THAT(r.out + r.err, Catch::Contains("first_layer"));
}

TEST_CASE("run: --check on dense layers only names the model's first MoE layer as the fix", "[run_cli]") {
    // tiny DeepSeek-V3: layer 0 dense, layer 1 MoE.
    const std::string model = std::string(MOEBENCH_TEST_DATA) + "/conformance/models/tiny-deepseek-v3.json";
    auto r = run_cli("run --model " + model + " --backend cpu --warmup 0 --iters 1 --batch 2 --layers 1 --check");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--check") && Catch::Contains("--layers 1") &&
                          Catch::Contains("--first-layer 1 --layers 1 (its first MoE layer)"));
}

TEST_CASE("run: negative batch, zero iterations, negative context", "[run_cli]") {
    expect_exit2("--backend cpu --batch -1", {"--batch", "-1"});
    expect_exit2("--backend cpu --iters 0", {"--iters", "0"});
    expect_exit2("--backend cpu --context -5", {"--context", "-5"});
    expect_exit2("--backend cpu --warmup -1", {"--warmup"});
    expect_exit2("--backend cpu --mode sideways", {"--mode", "sideways"});
}

TEST_CASE("run: unknown and unbuilt backends", "[run_cli]") { expect_exit2("--backend tpu", {"--backend", "tpu"}); }

TEST_CASE("run: --backend sim is either not built (exit 2 saying so) or labelled modeled", "[run_cli]") {
    auto r = run_cli("run --model " + kTiny + " --backend sim --json - --warmup 0 --iters 1 --batch 2 --layers 1");
    INFO(r.err);
    if (r.exit_code == 2) {
        CHECK(r.err.find("--backend") != std::string::npos);
        CHECK(r.err.find("not built") != std::string::npos);
    } else {
        REQUIRE(r.exit_code == 0);
        auto rep = nlohmann::json::parse(r.out);
        CHECK(rep["runs"][0]["backend"] == "sim");
        CHECK(rep["runs"][0]["latency"]["source"] == "modeled");  // never presented as measured
        CHECK(rep["runs"][0]["throughput"]["source"] == "modeled");
        // Its steps are modeled, not measured, and a model has no measurement noise. Before: "measured": 1 and a
        // noise taken from the host time of computing the model; the summary said "1 measured".
        const auto& it = rep["runs"][0]["iterations"];
        CHECK(it["measured"] == 0);
        CHECK(it["modeled"] == 1);
        CHECK_FALSE(it.contains("noise"));
        CHECK_FALSE(it.contains("measured_time_s"));
        CHECK_THAT(r.err, Catch::Contains("1 modeled step"));
        CHECK_THAT(r.err, !Catch::Contains("+ 1 measured"));
        // One layer of two: the whole model is extrapolated from the modeled layer, and says so.
        const auto& whole = rep["runs"][0]["latency"]["whole_model"];
        CHECK(whole["extrapolated"] == true);
        CHECK(whole["source"] == "extrapolated");
        CHECK(whole["extrapolated_from"] == "modeled");
    }
}

TEST_CASE("run: --check on the cpu backend self-checks the reference path; sim has nothing to check", "[run_cli]") {
    auto r =
        run_cli("run --model " + kTiny + " --backend cpu --check --json - --warmup 0 --iters 1 --batch 4 --layers 1");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto rep = nlohmann::json::parse(r.out);
    const auto& c = rep["runs"][0]["check"];
    CHECK(c["source"] == "measured");
    CHECK(c["passed"] == true);
    CHECK(c["layer"] == 0);
    CHECK(c["tokens"] == 4);
    CHECK(c["ids_mismatched"] == 0);
    CHECK(c["tolerance"].get<double>() == Approx(1e-4));
    CHECK(c["rel_l2_error"].get<double>() < 1e-4);
    CHECK(r.err.find("check (layer 0") != std::string::npos);
    expect_exit2("--backend sim --check", {"--check", "sim"});
}

TEST_CASE("run: cuda run flags are validated and name the flag", "[run_cli]") {
    expect_exit2("--backend cpu --ep 0", {"--ep", "0"});
    expect_exit2("--backend cpu --ep 2", {"--ep", "2"});
    expect_exit2("--backend cpu --expert-gemm fast", {"--expert-gemm", "fast"});
    expect_exit2("--backend cpu --expert-gemm grouped", {"--expert-gemm", "cuda"});
    expect_exit2("--backend sim --expert-gemm panel", {"--expert-gemm", "panel", "--backend cpu"});
    expect_exit2("--backend cpu --attention-kernel flash", {"--attention-kernel", "flash", "cuda"});
    expect_exit2("--backend sim --attention-kernel fastest", {"--attention-kernel", "fastest", "split"});
    expect_exit2("--backend cpu --cuda-graph", {"--cuda-graph", "cuda"});
    expect_exit2("--backend cpu --cold-l2", {"--cold-l2", "cuda"});
    expect_exit2("--backend cpu --hardware no-such-gpu", {"--hardware", "no-such-gpu"});
}

TEST_CASE("run: a run config with an unknown field or a missing file", "[run_cli]") {
    std::string cfg = moebench::test::write_temp("bad-run.json", R"({"model": "x", "bacth": 8})");
    auto r = run_cli("run --config " + cfg);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("bacth") != std::string::npos);
    auto missing = run_cli("run --config /nonexistent/run.json");
    CHECK(missing.exit_code == 2);
    CHECK(missing.err.find("--config") != std::string::npos);
}

TEST_CASE("run: a bad routing spec names --routing", "[run_cli]") {
    expect_exit2(quick() + " --routing zipf:banana", {"--routing", "zipf:banana"});
}

TEST_CASE("run: a good quick run exits 0 and prints the summary", "[run_cli]") {
    auto r = run_cli("run --model " + kTiny + quick());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("tokens/s") != std::string::npos);
    CHECK(r.out.find("expert_up") != std::string::npos);
    CHECK(r.out.find("report: ") != std::string::npos);
}

TEST_CASE("run: options checked against the model before allocation", "[run_cli]") {
    expect_exit2("--backend cpu --soft-topn 9", {"--soft-topn", "9", "4 experts"});
    expect_exit2("--backend cpu --routing hot:9:0.5", {"--routing"});
    std::string cfg = moebench::test::write_temp("ep.json", R"({"ep": 3})");
    auto r = run_cli("run --config " + cfg + " --model " + kTiny + " --backend cpu");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("ep") != std::string::npos);
}

TEST_CASE("run: every shipped run config parses, validates and fits its model", "[run_cli]") {
    namespace fs = std::filesystem;
    int seen = 0;
    for (const auto& e : fs::directory_iterator(fs::path(MOEBENCH_SOURCE_DIR) / "configs" / "runs")) {
        if (e.path().extension() != ".json") continue;
        INFO(e.path().string());
        moebench::RunConfig cfg = moebench::run_config_from_json(moebench::load_json_file(e.path().string()), "");
        CHECK_NOTHROW(moebench::validate(cfg));
        moebench::ModelConfig m = moebench::load_model(cfg.model);
        CHECK(cfg.layers <= m.num_layers);
        // Round trip: what the report records reads back to the same config.
        CHECK(moebench::run_config_to_json(moebench::run_config_from_json(moebench::run_config_to_json(cfg), "")) ==
              moebench::run_config_to_json(cfg));
        ++seen;
    }
    CHECK(seen >= 1);
}

TEST_CASE("run --config REPORT re-runs what the report ran, without overwriting it", "[run_cli][hardening]") {
    const std::string dir = moebench::test::temp_dir("rerun");
    const std::string first = dir + "/first.json", second = dir + "/second.json";
    auto r = run_cli("run --model " + kTiny +
                     " --backend cpu --routing zipf:1.2 --seed 7 --batch 3 --layers 2 --warmup 0 "
                     "--iters 2 --out " +
                     first);
    REQUIRE(r.exit_code == 0);
    const std::string before = moebench::test::read_text(first);
    r = run_cli("run --config " + first + " --out " + second);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("re-running the run config of " + first) != std::string::npos);
    CHECK(moebench::test::read_text(first) == before);
    const json a = json::parse(before), b = json::parse(moebench::test::read_text(second));
    json run_a = a["config"]["run"], run_b = b["config"]["run"];
    run_a.erase("out");
    run_b.erase("out");
    CHECK(run_a == run_b);
    CHECK(a["config"]["model"] == b["config"]["model"]);
    // The same seed and workload route the same tokens: the counted expert load is identical.
    for (size_t l = 0; l < 2; ++l)
        for (const char* key : {"tokens_per_expert", "coactivation", "windows"})
            CHECK(a["runs"][0]["expert_load"]["per_layer"][l][key] == b["runs"][0]["expert_load"]["per_layer"][l][key]);
    CHECK(b["runs"][0]["seed"] == 7);
    CHECK(b["runs"][0]["routing"]["workload"] == "zipf:1.2");
    // Flags still override the report's fields.
    r = run_cli("run --config " + first + " --batch 5 --json -");
    REQUIRE(r.exit_code == 0);
    CHECK(json::parse(r.out)["runs"][0]["batch"] == 5);
}

TEST_CASE("run --config of a sweep report or a report without its run config is exit 2", "[run_cli][hardening]") {
    const std::string dir = moebench::test::temp_dir("rerun-bad");
    auto s = run_cli("sweep --model " + kTiny +
                     " --backend sim --batch 1,2 --set warmup=0 --set iters=1 --quiet --out " + dir + "/s.json");
    REQUIRE(s.exit_code == 0);
    auto r = run_cli("run --config " + dir + "/s.json");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("report of 2 points") != std::string::npos);
    const std::string bare =
        moebench::test::write_temp("bare.json", R"({"schema": "moebench.report/1", "runs": [{"status": "ok"}]})");
    r = run_cli("run --config " + bare);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("config.run") != std::string::npos);
}
