// SPDX-License-Identifier: Apache-2.0
// `moebench deploy` (docs/deploy.md): the steady state's arithmetic by hand over step times a test chooses, the
// figures against the sim's own run reports for the same steps, cost and energy by hand, the fit refusal, bad input,
// the Pareto frontier of a hand-built set, the search and the disaggregated pools.
#include "cli_helpers.hpp"
#include "serving/deploy.hpp"
#include "serving/steady_state.hpp"
#include "test_paths.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <set>

using moebench::test::run_cli;
using json = nlohmann::json;
using namespace moebench;

namespace {

// step(D, p) = 1000 + 10 D + p microseconds, all of it attention: every figure below follows by hand.
PhaseTimes fake_step(int64_t decode, int64_t prefill) {
    PhaseTimes t;
    t.us[static_cast<size_t>(Phase::attention)] =
        1000.0 + 10.0 * static_cast<double>(decode) + static_cast<double>(prefill);
    return t;
}

json cli_json(const std::string& args) {
    auto r = run_cli(args);
    INFO("moebench " << args << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
}

// The modeled end-to-end step of `moebench run --backend sim` for one shape, in ms.
double sim_step_ms(const std::string& args) {
    const json rep = cli_json("run --backend sim --layers 0 --record brief --warmup 0 --iters 1 --json - " + args);
    return rep["runs"][0]["latency"]["step"]["mean_us"].get<double>() / 1e3;
}

const std::string kPoint = "deploy --model olmoe-1b-7b --hardware h200-sxm --format json ";

}  // namespace

TEST_CASE("deploy's steady state by hand: chunks under the budget, the cycle, p90, TTFT", "[deploy]") {
    // I 100, O 10, C 4, B 150: the cycle's 400 prompt tokens fill 3 steps (150, 150, 100) of S = 10, D = 4.
    const SteadyState s = steady_state({.isl = 100, .osl = 10, .concurrency = 4, .max_prefill_tokens = 150}, fake_step);
    CHECK(s.prefill_steps == 3);
    CHECK(s.last_chunk_tokens == 100);
    CHECK(s.steps == 10);
    CHECK(s.decode_batch == 4);
    CHECK_FALSE(s.prefill_bound);
    CHECK(s.decode_step_us == 1040);
    CHECK(s.full_chunk_step_us == 1190);
    CHECK(s.last_chunk_step_us == 1140);
    CHECK(s.cycle_us == Approx(2 * 1190 + 1140 + 7 * 1040));  // 10800
    CHECK(s.tpot_us == Approx(1080));
    // Steps sorted: 1040 x 7, 1140, 1190, 1190; rank 0.9 x 9 = 8.1 between the 9th and 10th (both 1190).
    CHECK(s.tpot_p90_us == Approx(1190));
    CHECK(s.output_tokens_per_s == Approx(40 / 10800e-6));
    CHECK(s.input_tokens_per_s == Approx(400 / 10800e-6));
    // The request's one chunk of 100 beside the 3 others decoding: 1000 + 30 + 100.
    CHECK(s.ttft_us == Approx(1130));
    CHECK(s.queue_us == 0);
    CHECK(s.mean_step.total_us() == Approx(s.tpot_us));

    // p90 between two values: I 100, O 10, C 1, B 100: steps 1110 (the prompt beside D = 1) and 1010 x 9;
    // rank 8.1: 1010 + 0.1 x (1110 - 1010) = 1020.
    const SteadyState one =
        steady_state({.isl = 100, .osl = 10, .concurrency = 1, .max_prefill_tokens = 100}, fake_step);
    CHECK(one.tpot_p90_us == Approx(1020));
    CHECK(one.ttft_us == Approx(1100));  // C = 1: the prompt alone, step(0, 100)

    // A prompt longer than the budget: I 250, B 100: chunks 100, 100, 50, each beside D - 1 = 0 others (C 1).
    const SteadyState chunked =
        steady_state({.isl = 250, .osl = 1000, .concurrency = 1, .max_prefill_tokens = 100}, fake_step);
    CHECK(chunked.ttft_us == Approx(2 * 1100 + 1050));

    // Prefill-bound: I 100, O 2, C 4, B 100: 4 steps of prompt chunks > O; S 4, D round(8 / 4) = 2.
    const SteadyState bound =
        steady_state({.isl = 100, .osl = 2, .concurrency = 4, .max_prefill_tokens = 100}, fake_step);
    CHECK(bound.prefill_bound);
    CHECK(bound.steps == 4);
    CHECK(bound.decode_batch == 2);
    CHECK(bound.cycle_us == Approx(4 * 1120));
    CHECK(bound.output_tokens_per_s == Approx(8 / 4480e-6));
    // Own chunk beside 1 other (1110) + queue of S - O - k = 1 mean step (1120).
    CHECK(bound.queue_us == Approx(1120));
    CHECK(bound.ttft_us == Approx(1110 + 1120));
}

TEST_CASE("the Pareto frontier of a hand-built set: no point on it dominated, every other point dominated",
          "[deploy]") {
    // (x = tokens/s/user, y = tokens/s/GPU)
    const std::vector<std::pair<double, double>> pts = {{10, 100}, {20, 90}, {15, 80}, {30, 50}, {30, 40},
                                                        {5, 100},  {40, 10}, {20, 90}, {25, 20}};
    const std::vector<size_t> f = pareto_frontier(pts);
    // By hand: (10,100), (20,90), (30,50), (40,10); (5,100) is dominated by (10,100), the second (20,90) is a tie.
    CHECK(f == std::vector<size_t>{0, 1, 3, 6});
    for (size_t i : f)
        for (size_t j = 0; j < pts.size(); ++j) {
            const bool dominates = pts[j].first >= pts[i].first && pts[j].second >= pts[i].second &&
                                   (pts[j].first > pts[i].first || pts[j].second > pts[i].second);
            CHECK_FALSE(dominates);
        }
    CHECK(pareto_frontier({}).empty());
}

TEST_CASE("deploy's figures are the sim's own steps: C = 1 TTFT is the prompt's prefill, TPOT the cycle's steps",
          "[deploy]") {
    const json d = cli_json(kPoint + "--isl 512 --osl 64 --concurrency 1");
    CHECK(d["schema"] == "moebench.deploy/1");
    CHECK(d["kind"] == "point");
    const double prefill =
        sim_step_ms("--model olmoe-1b-7b --hardware h200-sxm --mode prefill --batch 1 --seq-len 512");
    const double decode = sim_step_ms("--model olmoe-1b-7b --hardware h200-sxm --batch 1 --context 544");
    CHECK(d["ttft_ms"].get<double>() == Approx(prefill).epsilon(1e-9));
    CHECK(d["cycle"]["decode_context"] == 544);  // isl + osl / 2
    CHECK(d["cycle"]["decode_step_ms"].get<double>() == Approx(decode).epsilon(1e-9));
    // One step carries the prompt beside the one decoding sequence, 63 are pure decode steps.
    const double mixed = d["cycle"]["last_chunk_step_ms"].get<double>();
    CHECK(d["tpot_ms"].get<double>() == Approx((mixed + 63 * decode) / 64).epsilon(1e-9));
    CHECK(d["output_tokens_per_s_per_gpu"].get<double>() == Approx(1000.0 / d["tpot_ms"].get<double>()));
    CHECK(d["output_tokens_per_s_per_user"].get<double>() == Approx(1000.0 / d["tpot_ms"].get<double>()));
    double groups = 0;
    for (const auto& [k, v] : d["phase_groups_us"].items()) groups += v.get<double>();
    CHECK(groups / 1e3 == Approx(d["tpot_ms"].get<double>()));
    for (const char* k : {"ttft_ms", "tpot_ms", "tpot_p90_ms", "output_tokens_per_s_per_gpu",
                          "usd_per_million_output_tokens", "joules_per_output_token"})
        CHECK(d["sources"][k] == "modeled");
    CHECK(d["sources"]["memory_per_gpu_bytes"] == "counted");
}

TEST_CASE("deploy: throughput is C / TPOT when the cycle is pure decode steps, over the GPUs", "[deploy]") {
    // A prompt of 1 token per request: n_p = ceil(C / B) = 1 step whose chunk is C tokens, the rest pure decode.
    const json d = cli_json(kPoint + "--isl 16 --osl 256 --concurrency 8 --ep 2");
    CHECK(d["num_gpus"] == 2);
    const double decode = sim_step_ms("--model olmoe-1b-7b --hardware h200-sxm --ep 2 --batch 8 --context 144");
    CHECK(d["cycle"]["decode_step_ms"].get<double>() == Approx(decode).epsilon(1e-9));
    const double tpot = d["tpot_ms"].get<double>();
    CHECK(tpot == Approx((d["cycle"]["last_chunk_step_ms"].get<double>() + 255 * decode) / 256).epsilon(1e-9));
    CHECK(d["output_tokens_per_s_per_gpu"].get<double>() == Approx(8 * 1000.0 / tpot / 2));
    CHECK(d["input_tokens_per_s_per_gpu"].get<double>() == Approx(8 * 16 * 1000.0 / (256 * tpot) / 2));
}

TEST_CASE("deploy: cost and energy by hand from the profile's fields and --price", "[deploy]") {
    const json d = cli_json(kPoint + "--isl 128 --osl 128 --concurrency 4");
    const double tps = d["output_tokens_per_s_per_gpu"].get<double>() * 1;  // one GPU
    // h200-sxm: 1.6 USD per GPU-hour, tdp_w 700.
    CHECK(d["price_per_gpu_hour"].get<double>() == 1.6);
    CHECK(d["usd_per_million_output_tokens"].get<double>() == Approx(1.6 / 3600 / tps * 1e6));
    CHECK(d["joules_per_output_token"].get<double>() == Approx(700 / tps));
    const json p = cli_json(kPoint + "--isl 128 --osl 128 --concurrency 4 --price 3.6");
    CHECK(p["price_source"] == "--price");
    CHECK(p["usd_per_million_output_tokens"].get<double>() == Approx(1000.0 / tps));  // 3.6 / 3600 = 0.001 USD/s
}

TEST_CASE("deploy refuses a point that does not fit, naming what fits, unless --allow-no-fit", "[deploy]") {
    auto r = run_cli("deploy --model deepseek-v3 --hardware h200-sxm --isl 1024 --osl 1024 --concurrency 8");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--allow-no-fit") != std::string::npos);
    CHECK(r.err.find("GPUs") != std::string::npos);
    // The weights fit, the KV cache of 100000 requests does not: the advice speaks of --concurrency.
    auto kv = run_cli(kPoint + "--isl 8192 --osl 8192 --concurrency 100000");
    INFO(kv.err);
    CHECK(kv.exit_code == 2);
    CHECK(kv.err.find("--concurrency") != std::string::npos);
    CHECK(kv.err.find("--batch") == std::string::npos);
    const json d = cli_json(kPoint + "--isl 8192 --osl 8192 --concurrency 100000 --allow-no-fit");
    CHECK(d["fits"] == false);
}

TEST_CASE("deploy on bad input: exit 2 naming the flag, the value and the fix", "[deploy][robust]") {
    const auto refused = [](const std::string& args, const std::vector<std::string>& needles) {
        auto r = run_cli("deploy --model olmoe-1b-7b " + args);
        INFO(args << "\n" << r.err);
        CHECK(r.exit_code == 2);
        for (const auto& n : needles) CHECK(r.err.find(n) != std::string::npos);
    };
    refused("--isl 0 --osl 8 --concurrency 1", {"--isl", "0", "at least 1"});
    refused("--isl 8 --osl 0 --concurrency 1", {"--osl", "0", "at least 1"});
    refused("--isl 8 --osl 8 --concurrency 0", {"--concurrency", "0", "at least 1"});
    refused("--isl 8 --osl 8 --concurrency 1 --hardware h200-sx", {"--hardware", "h200-sx", "did you mean h200-sxm"});
    refused("--isl 8 --osl 8 --concurrency 1 --ep 3", {"ep", "3"});
    refused("--isl 8 --osl 8 --concurrency x", {"--concurrency", "x"});
    refused("--isl 8 --osl 8 --concurrency 1 --format xml", {"--format", "xml", "text"});
    refused("--isl 8 --osl 8 --concurrency 1 --ttft-ms 10", {"--ttft-ms", "--gpus"});
    refused("--isl 8 --osl 8 --gpus 2 --ep 2", {"--gpus", "layout"});
    refused("--isl 8 --osl 8 --concurrency 1 --disagg --prefill-gpus 1 --decode-gpus 2 --decode-layout ep=4",
            {"--decode-layout", "4 GPUs", "2"});
    refused("--isl 8 --osl 8 --concurrency 1 --disagg --prefill-gpus 1 --decode-gpus 1 --decode-layout pp=1",
            {"--decode-layout", "pp=1"});
    refused("--isl 8 --osl 8 --concurrency 1 --price -1", {"--price", "-1"});
    refused("--isl 8 --osl 8 --concurrency 1 --request-overhead-ms -5", {"--request-overhead-ms", "-5", "0 to 1e6"});
    refused("--isl 8 --osl 8 --concurrency 1 --request-overhead-ms nan", {"--request-overhead-ms", "nan"});
    refused("--isl 8 --osl 8 --concurrency 1 --max-prefill-tokens 0", {"--max-prefill-tokens", "0"});
    refused("--isl 8 --osl 8 --gpus 0", {"--gpus", "0"});
    refused("--isl 8 --osl 8 --concurrency 1 --disagg", {"--prefill-gpus"});
    refused("--isl 8 --osl 8 --concurrency 1 --prefill-gpus 2", {"--prefill-gpus", "--disagg"});
    // Numbers and lists read as on every command: INT and FLOAT flags by the one parser, a list flag in a sweep axis's
    // syntax with its forms named, a format the deploy document lacks named with the ones it has.
    refused("--isl 1.5 --osl 8 --concurrency 1", {"--isl", "1.5", "whole number"});
    refused("--isl 99999999999999999999 --osl 8 --concurrency 1", {"--isl", "out of range"});
    refused("--isl 8 --osl 8 --concurrency 1 --price abc", {"--price", "abc", "must be a number"});
    refused("--isl 8 --osl 8 --gpus 1 --concurrency 1-64", {"--concurrency", "1-64", "1,2,4", "write 1..64"});
    refused("--isl 8 --osl 8 --gpus 1,x", {"--gpus", "x", "1..64"});
    refused("--isl 8 --osl 8 --gpus 1 --concurrency 1,,2", {"--concurrency", "empty value"});
    refused("--isl 8 --osl 8 --concurrency 1,2", {"--concurrency", "one value", "--gpus"});
    refused("--isl 8 --osl 8 --concurrency 1 --hardware h100-sxm,h200-sxm", {"--hardware", "one profile", "--gpus"});
    refused("--isl 8 --osl 8 --gpus 1 --hardware h100-sxm,", {"--hardware", "empty name", "h100-sxm,h200-sxm"});
    refused("--isl 8 --osl 8 --concurrency 1 --format md",
            {"--format", "a deploy document has no md view", "use one of: text, csv, html, json"});
    auto no_model = run_cli("deploy --isl 8 --osl 8 --concurrency 1");
    CHECK(no_model.exit_code == 2);
    CHECK(no_model.err.find("--model") != std::string::npos);
}

TEST_CASE("deploy search: the frontier per hardware is undominated, the best point meets the limits", "[deploy]") {
    const std::string search =
        "deploy --model olmoe-1b-7b --isl 256 --osl 128 --gpus 1,2 --hardware h100-sxm,h200-sxm "
        "--concurrency 1,4,16 ";
    const json d = cli_json(search + "--format json");
    CHECK(d["kind"] == "search");
    const json& pts = d["points"];
    REQUIRE(pts.size() >= 6);
    for (const auto& [hw, idx] : d["frontier"].items()) {
        REQUIRE_FALSE(idx.empty());
        for (const json& i : idx) {
            const json& p = pts[i.get<size_t>()];
            CHECK(p["hardware"] == hw);
            for (const json& q : pts) {
                if (q["hardware"] != hw) continue;
                const double px = p["output_tokens_per_s_per_user"], py = p["output_tokens_per_s_per_gpu"];
                const double qx = q["output_tokens_per_s_per_user"], qy = q["output_tokens_per_s_per_gpu"];
                CHECK_FALSE((qx >= px && qy >= py && (qx > px || qy > py)));
            }
        }
    }
    // The limits: the best point is the most tokens/s/GPU among those under them.
    const json lim = cli_json(search + "--format json --tpot-ms 1000");
    REQUIRE(lim["best"].is_number());
    const json& best = lim["points"][lim["best"].get<size_t>()];
    for (const json& q : lim["points"])
        if (q["tpot_ms"].get<double>() <= 1000)
            CHECK(q["output_tokens_per_s_per_gpu"].get<double>() <= best["output_tokens_per_s_per_gpu"].get<double>());
    // None meets a TTFT of 1 microsecond: exit 0 and a clear line.
    auto none = run_cli("deploy --model olmoe-1b-7b --isl 256 --osl 128 --gpus 1 --concurrency 1 --ttft-ms 0.001");
    CHECK(none.exit_code == 0);
    CHECK(none.out.find("none") != std::string::npos);
    // CSV: a header and one row per configuration.
    auto csv = run_cli(search + "--format csv");
    REQUIRE(csv.exit_code == 0);
    CHECK(static_cast<size_t>(std::count(csv.out.begin(), csv.out.end(), '\n')) == pts.size() + 1);
    auto html = run_cli(search + "--format html");
    REQUIRE(html.exit_code == 0);
    CHECK(html.out.find("<svg") != std::string::npos);
    CHECK(html.out.find("<title>") != std::string::npos);
    CHECK(html.out.find("<script") == std::string::npos);
}

TEST_CASE("deploy --disagg: TPOT from the decode pool's step, TTFT the prompt plus the KV transfer", "[deploy]") {
    const json d = cli_json(kPoint +
                            "--isl 512 --osl 64 --concurrency 8 --disagg --prefill-gpus 1 --prefill-layout tp=1 "
                            "--decode-gpus 2 --decode-layout ep=2");
    CHECK(d["kind"] == "disagg");
    CHECK(d["num_gpus"] == 3);
    const double prefill =
        sim_step_ms("--model olmoe-1b-7b --hardware h200-sxm --mode prefill --batch 1 --seq-len 512");
    CHECK(d["prefill_pool"]["prompt_ms"].get<double>() == Approx(prefill).epsilon(1e-9));
    CHECK(d["ttft_ms"].get<double>() == Approx(prefill + d["kv_transfer_ms"].get<double>()));
    const int64_t batch = d["decode_pool"]["decode_batch"];
    const double decode = sim_step_ms("--model olmoe-1b-7b --hardware h200-sxm --ep 2 --batch " +
                                      std::to_string(batch) + " --context 544");
    CHECK(d["tpot_ms"].get<double>() == Approx(decode).epsilon(1e-9));
    CHECK(d["kv_transfer_ms"].get<double>() > 0);
}

TEST_CASE("deploy -o writes the view to a file", "[deploy]") {
    const std::string dir = moebench::test::temp_dir("deploy"), path = dir + "/point.csv";
    auto r = run_cli("deploy --model olmoe-1b-7b --isl 64 --osl 64 --concurrency 2 --format csv -o " + path);
    REQUIRE(r.exit_code == 0);
    const std::string csv = moebench::test::read_text(path);
    CHECK(csv.rfind("hardware,num_gpus,", 0) == 0);
    CHECK(std::count(csv.begin(), csv.end(), '\n') == 2);
    // The same view as stdout's, by --out as by -o.
    auto out =
        run_cli("deploy --model olmoe-1b-7b --isl 64 --osl 64 --concurrency 2 --format csv --out " + dir + "/b.csv");
    REQUIRE(out.exit_code == 0);
    CHECK(moebench::test::read_text(dir + "/b.csv") == run_cli("deploy --model olmoe-1b-7b --isl 64 --osl 64 "
                                                               "--concurrency 2 --format csv")
                                                           .out);
    // An input as the output is refused before anything is written: the model file (a copy) stays as it was.
    const std::string model =
        moebench::test::read_text(std::string(MOEBENCH_SOURCE_DIR) + "/configs/models/olmoe-1b-7b.json");
    const std::string copy = moebench::test::write_temp("olmoe.json", model);
    auto over = run_cli("deploy --model " + copy + " --isl 64 --osl 64 --concurrency 2 -o " + copy);
    INFO(over.err);
    CHECK(over.exit_code == 2);
    CHECK(over.err.find("--model") != std::string::npos);
    CHECK(moebench::test::read_text(copy) == model);
}

TEST_CASE("deploy search: --concurrency and --gpus take a sweep axis's lists and ranges", "[deploy]") {
    const json d =
        cli_json("deploy --model olmoe-1b-7b --isl 64 --osl 64 --gpus 1..2 --concurrency 1..4 --format json");
    CHECK(d["gpus"] == json::array({1, 2}));
    CHECK(d["concurrency"] == json::array({1, 2, 4}));
    std::set<int64_t> seen;
    for (const json& p : d["points"]) seen.insert(p["concurrency"].get<int64_t>());
    CHECK(seen == std::set<int64_t>{1, 2, 4});
}

TEST_CASE("the serving groups of moebench deploy", "[deploy]") {
    // By hand from the vocabulary: the all-to-alls, the tensor-parallel collectives, the experts (routed and shared),
    // attention's own phases; the rest (embedding, router, permutation, dense MLP, head) other.
    CHECK(serving_group(Phase::dispatch_a2a) == ServingGroup::all_to_all);
    CHECK(serving_group(Phase::combine_a2a) == ServingGroup::all_to_all);
    for (Phase q : {Phase::attn_allreduce, Phase::moe_allgather, Phase::moe_allreduce, Phase::dense_allreduce})
        CHECK(serving_group(q) == ServingGroup::collectives);
    for (Phase q : {Phase::expert_up, Phase::activation, Phase::expert_down, Phase::shared_expert})
        CHECK(serving_group(q) == ServingGroup::moe_experts);
    for (Phase q : {Phase::attn_norm, Phase::qkv_proj, Phase::attention, Phase::linear_attention, Phase::o_proj})
        CHECK(serving_group(q) == ServingGroup::attention);
    for (Phase q : {Phase::embed, Phase::ffn_norm, Phase::router_gemm, Phase::topk, Phase::permute,
                    Phase::unpermute_reduce, Phase::dense_mlp, Phase::final_norm, Phase::lm_head})
        CHECK(serving_group(q) == ServingGroup::other);
    CHECK(serving_group_name(Phase::dispatch_a2a) == "all_to_all");
}

TEST_CASE("a sim run report's cost and energy per token, by hand from the profile", "[deploy]") {
    const json rep = cli_json(
        "run --backend sim --model olmoe-1b-7b --hardware h200-sxm --ep 2 --batch 16 --context 512 --layers 0 "
        "--record brief --warmup 0 --iters 1 --json -");
    const json& r = rep["runs"][0];
    const double tps = r["latency"]["whole_model"]["tokens_per_s"].get<double>();
    const json& c = r["cost_energy"];
    CHECK(c["source"] == "modeled");
    CHECK(c["num_gpus"] == 2);
    // h200-sxm: 1.6 USD per GPU-hour, 700 W.
    CHECK(c["usd_per_million_tokens"].get<double>() == Approx(1.6 * 2 / 3600 / tps * 1e6));
    CHECK(c["joules_per_token"].get<double>() == Approx(700.0 * 2 / tps));
}

TEST_CASE("deploy --disagg: a prefill pool that caps arrivals leaves the decode pool at Little's law's fixed point",
          "[deploy]") {
    // Long prompts, short answers, one prefill GPU: the prefill pool sets the pace.
    const json d = cli_json(kPoint + "--isl 8192 --osl 16 --concurrency 64 --disagg --prefill-gpus 1 --decode-gpus 1");
    CHECK(d["balance"].get<std::string>().find("prefill pool") != std::string::npos);
    const double arrivals = d["prefill_pool"]["requests_per_s"].get<double>();
    const int64_t batch = d["decode_pool"]["decode_batch"];
    const double tpot_s = d["tpot_ms"].get<double>() / 1e3;
    CHECK(batch == std::max<int64_t>(1, std::llround(arrivals * 16 * tpot_s)));
    // Throughput: the arrivals' tokens over both pools' GPUs.
    CHECK(d["output_tokens_per_s_per_gpu"].get<double>() == Approx(arrivals * 16 / 2));
}

TEST_CASE(
    "deploy --disagg: a prefill step of several whole prompts is the sim's prefill of that batch, spread over "
    "the attention replicas",
    "[deploy]") {
    // Budget 4 x 512 tokens: each prefill step carries 4 whole prompts, which the EP 4 pool's 4 attention replicas
    // hold one each; the pool's input rate is 2048 tokens over the sim's own prefill step of batch 4.
    const json d = cli_json(kPoint +
                            "--isl 512 --osl 64 --concurrency 64 --max-prefill-tokens 2048 --disagg --prefill-gpus 4 "
                            "--prefill-layout ep=4 --decode-gpus 2 --decode-layout ep=2");
    const double step_ms =
        sim_step_ms("--model olmoe-1b-7b --hardware h200-sxm --ep 4 --mode prefill --batch 4 --seq-len 512");
    CHECK(d["prefill_pool"]["input_tokens_per_s"].get<double>() == Approx(2048 / (step_ms / 1e3)).epsilon(1e-9));
    // One sequence of 2048 tokens on one replica is what this replaced: slower than the 4 prompts spread.
    const double one_sequence_ms =
        sim_step_ms("--model olmoe-1b-7b --hardware h200-sxm --ep 4 --mode prefill --batch 1 --seq-len 2048");
    CHECK(one_sequence_ms > step_ms);
}

TEST_CASE("deploy --request-overhead-ms: added to every TTFT as given, nothing else moves", "[deploy]") {
    const auto figures = [](const std::string& extra) {
        return cli_json(kPoint + "--isl 512 --osl 64 --concurrency 8 " + extra);
    };
    const json base = figures(""), over = figures("--request-overhead-ms 150");
    CHECK(base["request_overhead_ms"] == 0.0);
    CHECK(over["request_overhead_ms"] == 150.0);
    const auto text = run_cli(kPoint.substr(0, kPoint.find("--format")) +
                              "--isl 512 --osl 64 --concurrency 8 "
                              "--request-overhead-ms 150");
    CHECK(text.out.find("(of which 150.0 ms --request-overhead-ms)") != std::string::npos);
    CHECK(over["ttft_ms"].get<double>() == Approx(base["ttft_ms"].get<double>() + 150.0).epsilon(1e-12));
    for (const char* k : {"tpot_ms", "tpot_p90_ms", "output_tokens_per_s_per_gpu", "input_tokens_per_s_per_gpu"})
        CHECK(over[k].get<double>() == base[k].get<double>());
    // Disaggregated: the prompt, the KV transfer and the overhead.
    const std::string disagg = "--disagg --prefill-gpus 1 --prefill-layout tp=1 --decode-gpus 2 --decode-layout ep=2";
    const json d0 = figures(disagg), d1 = figures(disagg + " --request-overhead-ms 40");
    CHECK(d1["ttft_ms"].get<double>() == Approx(d0["ttft_ms"].get<double>() + 40.0).epsilon(1e-12));
    CHECK(d1["tpot_ms"].get<double>() == d0["tpot_ms"].get<double>());
}
