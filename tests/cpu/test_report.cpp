// SPDX-License-Identifier: Apache-2.0
// The moebench.report/1 document from the real binary on tiny models: keys and sources, arithmetic between fields,
// reproducibility for a seed, extrapolation labels, and --dump-tensors checked against a plain reference loop.
#include "cli_helpers.hpp"
#include "common/tensor_file.hpp"
#include "test_paths.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

using moebench::test::run_cli;
using json = nlohmann::json;

namespace {

std::string tiny(const std::string& name) { return std::string(MOEBENCH_TEST_DATA) + "/models/" + name + ".json"; }

json run_json(const std::string& args) {
    auto r = run_cli("run --backend cpu --json - " + args);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
}

}  // namespace

TEST_CASE("report: top-level keys, sources and per-phase statistics", "[report]") {
    json rep = run_json("--model " + tiny("tiny-gqa") + " --layers 2 --batch 4 --context 16 --warmup 1 --iters 3");
    CHECK(rep["schema"] == "moebench.report/1");
    CHECK(rep["tool"]["name"] == "moebench");
    for (const char* k : {"version", "git_rev", "build_type"}) CHECK(rep["tool"][k].is_string());
    CHECK(rep["command"].get<std::string>().find("--json -") != std::string::npos);
    CHECK(rep["created_utc"].get<std::string>().size() == 20);
    for (const char* k : {"host", "cpu_model", "num_cpus", "memory_bytes", "threads", "blas", "backend"})
        CHECK(rep["environment"].contains(k));
    CHECK(rep["environment"]["backend"] == "cpu");
    CHECK(rep["config"]["run"]["batch"] == 4);
    CHECK(rep["config"]["model"]["name"] == "tiny-gqa");

    REQUIRE(rep["runs"].size() == 1);
    const json& run = rep["runs"][0];
    CHECK(run["status"] == "ok");
    CHECK(run["mode"] == "decode");
    CHECK(run["batch"] == 4);
    CHECK(run["context"] == 16);
    CHECK(run["num_tokens"] == 4);
    CHECK(run["iterations"]["warmup"] == 1);
    CHECK(run["iterations"]["measured"].get<int>() >= 3);
    CHECK(run["layers"]["extrapolated"] == false);

    const json& lat = run["latency"];
    CHECK(lat["source"] == "measured");
    for (const char* k : {"mean_us", "p50_us", "p95_us", "p99_us", "min_us", "max_us", "stdev_us", "cv"})
        CHECK(lat["step"].contains(k));
    CHECK(lat["step"]["mean_us"].get<double>() > 0);
    // Every phase of a Mixtral-like step, each with its statistics; shares add up to 1 and the sum matches.
    std::vector<std::string> expected = {
        "embed",   "attn_norm", "qkv_proj",   "attention",   "o_proj",           "ffn_norm",   "router_gemm", "topk",
        "permute", "expert_up", "activation", "expert_down", "unpermute_reduce", "final_norm", "lm_head"};
    CHECK(lat["phases"].size() == expected.size());
    double share_sum = 0, mean_sum = 0;
    for (const auto& name : expected) {
        INFO(name);
        REQUIRE(lat["phases"].contains(name));
        const json& p = lat["phases"][name];
        for (const char* k : {"mean_us", "p50_us", "p95_us", "p99_us", "cv", "share"}) CHECK(p.contains(k));
        CHECK(p["min_us"].get<double>() <= p["p50_us"].get<double>());
        CHECK(p["p50_us"].get<double>() <= p["max_us"].get<double>());
        share_sum += p["share"].get<double>();
        mean_sum += p["mean_us"].get<double>();
    }
    CHECK(share_sum == Approx(1.0));
    CHECK(lat["phase_sum_us"].get<double>() == Approx(mean_sum));
    // The step is timed around the phases: it cannot be shorter than their sum on a synchronous backend.
    CHECK(lat["step"]["mean_us"].get<double>() >= 0.99 * mean_sum);
    CHECK(lat["per_layer"].size() == 2);
    CHECK(lat["per_layer"][1]["kind"] == "moe");
    CHECK(lat["step_samples_us"].size() == run["iterations"]["measured"].get<size_t>());

    CHECK(run["throughput"]["source"] == "measured");
    CHECK(run["throughput"]["tokens_per_s"].get<double>() ==
          Approx(4.0 / (lat["step"]["mean_us"].get<double>() * 1e-6)));

    // Expert load: every measured token chose top_k = 2 experts (dropless), in both layers.
    const json& load = run["expert_load"];
    CHECK(load["source"] == "counted");
    REQUIRE(load["per_layer"].size() == 2);
    int64_t steps = run["iterations"]["measured"].get<int64_t>();
    for (const json& l : load["per_layer"]) {
        auto tpe = l["tokens_per_expert"].get<std::vector<int64_t>>();
        CHECK(tpe.size() == 4);
        CHECK(std::accumulate(tpe.begin(), tpe.end(), int64_t{0}) == steps * 4 * 2);
        CHECK(l["dropped"] == 0);
        for (const char* k : {"max_over_mean", "cv", "gini", "top3_share", "idle_experts", "windows", "coactivation"})
            CHECK(l.contains(k));
    }
    const json& routing = run["routing"];
    CHECK(routing["source"] == "counted");
    CHECK(routing["workload"] == "router");
    REQUIRE(routing["per_layer"].size() == 2);
    for (const json& r : routing["per_layer"]) {
        double h = r["entropy_bits_mean"].get<double>();
        CHECK(h >= 0.0);
        CHECK(h <= 2.0 + 1e-9);  // log2(4 experts)
        CHECK(r["top1_prob_mean"].get<double>() >= 0.25 - 1e-9);
        CHECK(r["logit_min"].get<double>() <= r["logit_max"].get<double>());
    }
}

TEST_CASE("report: the same seed gives the same routing and expert load", "[report]") {
    for (const std::string routing : {"router", "zipf:1.2"}) {
        std::string args = "--model " + tiny("tiny-gqa") +
                           " --layers 2 --batch 6 --warmup 1 --iters 3 --min-time 0 "
                           "--routing " +
                           routing + " --seed 7";
        json a = run_json(args), b = run_json(args);
        INFO(routing);
        // Everything counted must match; the per-expert GEMM times are measured and may differ.
        auto strip_time = [](json l) {
            for (auto& x : l) x.erase("expert_gemm_us");
            return l;
        };
        CHECK(strip_time(a["runs"][0]["expert_load"]["per_layer"]) ==
              strip_time(b["runs"][0]["expert_load"]["per_layer"]));
        CHECK(a["runs"][0]["routing"]["per_layer"] == b["runs"][0]["routing"]["per_layer"]);
    }
}

TEST_CASE("report: --out writes the same document atomically; a subset of layers is labelled extrapolated",
          "[report]") {
    std::string dir = moebench::test::temp_dir("report");
    std::string path = dir + "/sub/r.json";
    auto r = run_cli("run --backend cpu --model " + tiny("tiny-dense-first") +
                     " --layers 1 --warmup 0 --iters 2 --out " + path);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find(path) != std::string::npos);
    json rep = json::parse(moebench::test::read_text(path));
    const json& run = rep["runs"][0];
    CHECK(run["layers"]["extrapolated"] == true);
    CHECK(run["layers"]["kinds"][0] == "dense");
    CHECK(run["latency"]["phases"].contains("dense_mlp"));
    CHECK_FALSE(run["latency"]["phases"].contains("expert_up"));
    // Only a dense layer ran, so the MoE layers of the model cannot be extrapolated: said, not guessed.
    CHECK(run["latency"]["whole_model"].contains("unavailable"));
    CHECK(run["expert_load"]["per_layer"].empty());

    auto r2 =
        run_cli("run --backend cpu --json - --model " + tiny("tiny-dense-first") + " --layers 2 --warmup 0 --iters 2");
    REQUIRE(r2.exit_code == 0);
    json full = json::parse(r2.out);
    const json& whole = full["runs"][0]["latency"]["whole_model"];
    CHECK(whole["extrapolated"] == false);
    CHECK(whole["step_us"].get<double>() == Approx(full["runs"][0]["latency"]["phase_sum_us"].get<double>()));
    CHECK(r2.err.find("tokens/s") != std::string::npos);  // with --json -, the summary goes to stderr
    std::filesystem::remove_all(dir);
}

namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

TEST_CASE("--dump-tensors: a readable file whose moe_out a plain reference loop reproduces (Mixtral-like)",
          "[report]") {
    std::string dir = moebench::test::temp_dir("dump");
    const int64_t T = 5;
    auto r = run_cli("run --backend cpu --model " + tiny("tiny-gqa") +
                     " --layers 2 --batch 5 --warmup 1 --iters 2 "
                     "--seed 3 --out " +
                     dir + "/r.json --dump-tensors " + dir);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    moebench::TensorFile f = moebench::read_safetensors(dir + "/moe_layer.safetensors");
    const int64_t H = 64, E = 4, I = 32, K = 2;
    auto shape_of = [&](const std::string& n) {
        const moebench::NamedTensor* t = f.find(n);
        REQUIRE(t != nullptr);
        return t->shape;
    };
    CHECK(shape_of("moe_in") == std::vector<int64_t>{T, H});
    CHECK(shape_of("router_weight") == std::vector<int64_t>{E, H});
    CHECK(shape_of("w_gate") == std::vector<int64_t>{E, I, H});
    CHECK(shape_of("w_up") == std::vector<int64_t>{E, I, H});
    CHECK(shape_of("w_down") == std::vector<int64_t>{E, H, I});
    CHECK(shape_of("topk_ids") == std::vector<int64_t>{T, K});
    CHECK(shape_of("topk_weights") == std::vector<int64_t>{T, K});
    CHECK(shape_of("moe_out") == std::vector<int64_t>{T, H});
    CHECK(f.find("topk_ids")->dtype == "I32");
    CHECK(f.metadata.at("routing") == "topk_softmax");
    CHECK(f.metadata.at("activation") == "swiglu");
    CHECK(f.metadata.at("model") == "tiny-gqa");
    CHECK(f.metadata.at("seed") == "3");
    CHECK(f.metadata.count("norm_topk_prob") == 1);
    CHECK(f.metadata.count("routed_scaling_factor") == 1);

    auto x = f.find("moe_in")->as_f32(), wr = f.find("router_weight")->as_f32();
    auto wg = f.find("w_gate")->as_f32(), wu = f.find("w_up")->as_f32(), wd = f.find("w_down")->as_f32();
    auto ids = f.find("topk_ids")->as_i32();
    auto wts = f.find("topk_weights")->as_f32();
    auto out = f.find("moe_out")->as_f32();
    double err2 = 0, ref2 = 0;
    for (int64_t t = 0; t < T; ++t) {
        // Mixtral: logits = W_r x; top-2 on logits (higher wins, ties to the lower id); softmax over the two.
        std::vector<double> logit(E);
        for (int64_t e = 0; e < E; ++e) {
            double s = 0;
            for (int64_t h = 0; h < H; ++h) s += double(wr[e * H + h]) * x[t * H + h];
            logit[e] = s;
        }
        std::vector<int> order(E);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logit[a] > logit[b]; });
        double m = logit[order[0]], z = 0;
        for (int j = 0; j < K; ++j) z += std::exp(logit[order[j]] - m);
        std::vector<double> y(H, 0.0);
        for (int j = 0; j < K; ++j) {
            int e = order[j];
            double w = std::exp(logit[e] - m) / z;
            CHECK(ids[t * K + j] == e);
            CHECK(wts[t * K + j] == Approx(w).epsilon(1e-4));
            std::vector<double> act(I);
            for (int64_t i = 0; i < I; ++i) {
                double g = 0, u = 0;
                for (int64_t h = 0; h < H; ++h) {
                    g += double(wg[(e * I + i) * H + h]) * x[t * H + h];
                    u += double(wu[(e * I + i) * H + h]) * x[t * H + h];
                }
                act[i] = silu(float(g)) * u;
            }
            for (int64_t h = 0; h < H; ++h) {
                double d = 0;
                for (int64_t i = 0; i < I; ++i) d += double(wd[(e * H + h) * I + i]) * act[i];
                y[h] += w * d;
            }
        }
        for (int64_t h = 0; h < H; ++h) {
            err2 += (out[t * H + h] - y[h]) * (out[t * H + h] - y[h]);
            ref2 += y[h] * y[h];
        }
    }
    REQUIRE(ref2 > 0);
    CHECK(std::sqrt(err2 / ref2) < 1e-5);  // fp32 against a double reference
    std::filesystem::remove_all(dir);
}

TEST_CASE("report: stopping rule by time, by noise cap, and prefill token counts", "[report]") {
    // --min-time: keeps measuring past --iters until the measured steps add up to the time.
    // The cap is raised in a run config: 1000 steps of this tiny layer can take less than 0.05 s.
    std::string time_cfg = moebench::test::write_temp("time.json", R"({"max_iters": 1000000})");
    json a = run_json("--config " + time_cfg + " --model " + tiny("tiny-gqa") +
                      " --layers 1 --batch 2 --warmup 0 --iters 1 --min-time 0.05");
    const json& it = a["runs"][0]["iterations"];
    CHECK(it["measured_time_s"].get<double>() >= 0.05);
    CHECK(it["measured"].get<int>() > 1);
    CHECK(it["stop_reason"] == "min_time");

    // An unreachable noise target stops at max_iters (from a run config, with flags on top).
    std::string cfg = moebench::test::write_temp(
        "noise.json", R"({"model": "tiny-gqa", "max_noise": 1e-12, "max_iters": 4, "warmup": 0, "iters": 2})");
    json b = run_json("--config " + cfg + " --model " + tiny("tiny-gqa") + " --layers 1 --batch 2");
    CHECK(b["runs"][0]["iterations"]["measured"] == 4);
    CHECK(b["runs"][0]["iterations"]["stop_reason"] == "max_iters");
    CHECK(b["config"]["run"]["max_iters"] == 4);

    // Prefill: batch x seq_len tokens per step, each choosing top_k = 2 experts.
    json p = run_json("--model " + tiny("tiny-gqa") +
                      " --layers 2 --mode prefill --batch 2 --seq-len 8 --context 0 "
                      "--warmup 0 --iters 2 --routing zipf:1.0");
    const json& run = p["runs"][0];
    CHECK(run["num_tokens"] == 16);
    CHECK(run["seq_len"] == 8);
    for (const json& l : run["expert_load"]["per_layer"]) {
        auto tpe = l["tokens_per_expert"].get<std::vector<int64_t>>();
        CHECK(std::accumulate(tpe.begin(), tpe.end(), int64_t{0}) == 2 * 16 * 2);
    }
    // 2 steps x 2 sequences of 8 tokens: 7 consecutive pairs per sequence.
    CHECK(run["routing"]["per_layer"][0]["switch_pairs"] == 4 * 7);
    CHECK(run["routing"]["workload"] == "zipf:1.0");
}

TEST_CASE("--dump-tensors: shared experts and the correction bias of a DeepSeek-V3-like model", "[report]") {
    std::string dir = moebench::test::temp_dir("dump-mla");
    auto r = run_cli("run --backend cpu --model " + tiny("tiny-mla") +
                     " --layers 2 --batch 3 --warmup 0 --iters 1 "
                     "--out " +
                     dir + "/r.json --dump-tensors " + dir);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    moebench::TensorFile f = moebench::read_safetensors(dir + "/moe_layer.safetensors");
    for (const char* n : {"moe_in", "router_weight", "e_score_correction_bias", "w_gate", "w_up", "w_down",
                          "shared_w_gate", "shared_w_up", "shared_w_down", "topk_ids", "topk_weights", "moe_out"})
        CHECK(f.find(n) != nullptr);
    CHECK(f.metadata.at("routing") == "sigmoid_group_topk");
    CHECK(f.metadata.at("routed_scaling_factor") == "2.5");
    CHECK(f.metadata.at("num_groups") == "2");
    CHECK(f.metadata.at("topk_groups") == "1");
    std::filesystem::remove_all(dir);

    // A dump needs a MoE layer among those run.
    auto none = run_cli("run --backend cpu --model " + tiny("tiny-dense-first") + " --layers 1 --dump-tensors " + dir);
    CHECK(none.exit_code == 2);
    CHECK(none.err.find("--dump-tensors") != std::string::npos);
}

TEST_CASE("report: capacity drops are counted and consistent with the ids", "[report]") {
    // capacity = ceil(0.5 * 8 * 2 / 4) = 2 per expert: at most 8 of the 16 assignments per step survive.
    json rep = run_json("--model " + tiny("tiny-gqa") +
                        " --layers 1 --batch 8 --warmup 0 --iters 2 "
                        "--capacity-factor 0.5 --routing hot:1:0.5");
    const json& l = rep["runs"][0]["expert_load"]["per_layer"][0];
    auto tpe = l["tokens_per_expert"].get<std::vector<int64_t>>();
    for (int64_t c : tpe) CHECK(c <= 2 * 2);  // 2 steps x capacity 2
    int64_t kept = std::accumulate(tpe.begin(), tpe.end(), int64_t{0});
    CHECK(kept + l["dropped"].get<int64_t>() == 2 * 8 * 2);
    CHECK(l["dropped"].get<int64_t>() > 0);
    CHECK(l["capacity_dropped"] == l["dropped"]);
}
