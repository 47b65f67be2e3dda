// SPDX-License-Identifier: Apache-2.0
// Robustness of the routing trace readers: safetensors traces (read_trace), and the JSONL and text recordings that
// trace convert imports. A count that would size an allocation, a repeated or out-of-range expert id, a bad weight,
// NUL bytes or the wrong format are refused (or skipped as a malformed record) with the reason, never a crash or
// gigabytes allocated; each failed before its fix.
#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "common/error.hpp"
#include "common/tensor_file.hpp"
#include "workload/trace.hpp"
#include "workload/trace_import.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

namespace fs = std::filesystem;
using moebench::test::config_error_of;
using moebench::test::expect_exit2;
using moebench::test::expect_refused;
using moebench::test::expect_refused_bounded;
using moebench::test::fuzz_file;
using moebench::test::read_text;
using moebench::test::run_capped;
using moebench::test::run_cli;
using moebench::test::seconds_since;
using moebench::test::temp_dir;
using moebench::test::write_bytes;
using moebench::test::write_temp;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";

// A trace file written with raw metadata, as a foreign tool (or a hand edit) could.
std::string write_raw_trace(const std::string& dir, std::vector<int64_t> shape, std::vector<int32_t> ids,
                            std::map<std::string, std::string> metadata) {
    TensorFile f;
    f.tensors.push_back(NamedTensor::i32("topk_ids", std::move(shape), ids.data()));
    f.metadata = std::move(metadata);
    const std::string path = dir + "/raw.safetensors";
    write_safetensors(path, f);
    return path;
}

}  // namespace

TEST_CASE("a tiny trace claiming 2e9 experts is refused by name, without allocating", "[robust][cli]") {
    const std::string dir = temp_dir("experts");
    const std::vector<int32_t> ids = {0, 1, 1, 0};
    const std::string path = write_raw_trace(dir, {1, 2, 2}, ids, {{"num_experts", "2000000000"}});
    REQUIRE(fs::file_size(path) < 400);
    // 2 GB of address space is far below what the old reader touched (~24 GB), far above what the fix needs.
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_capped("trace info " + path, 2'000'000);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(path) && Catch::Contains("num_experts") && Catch::Contains("2000000000"));
    CHECK_THAT(r.err, !Catch::Contains("--num-experts"));  // trace info has no such flag
    CHECK(seconds_since(t0) < 10);
    // The limit is the published one, and a trace at it still reads.
    CHECK_THAT(config_error_of([&] {
                   read_trace(write_raw_trace(dir, {1, 2, 2}, ids, {{"num_experts", "4097"}}));
               }),
               Catch::Contains("4096"));
    CHECK(read_trace(write_raw_trace(dir, {1, 2, 2}, ids, {{"num_experts", "4096"}})).num_experts == 4096);
    // Unparseable counts (beyond int64) are not read as the largest value.
    CHECK_THAT(config_error_of([&] {
                   read_trace(write_raw_trace(dir, {1, 2, 2}, ids, {{"num_experts", "99999999999999999999999"}}));
               }),
               Catch::Contains("num_experts"));
    fs::remove_all(dir);
}

TEST_CASE("trace shapes and imports cannot size what the file does not hold", "[robust][cli]") {
    const std::string dir = temp_dir("shapes");
    // 10^8 layers of zero tokens: no data, yet every layer was summarised (per-expert vectors per layer).
    const std::string empty_layers = write_raw_trace(dir, {100'000'000, 0, 2}, {}, {{"num_experts", "4"}});
    auto r = run_capped("trace info " + empty_layers, 2'000'000);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("layers") && Catch::Contains("100000000"));

    const std::string jsonl = dir + "/in.jsonl";
    expect_refused_bounded("trace convert " + jsonl + " -o " + dir + "/o.safetensors --num-experts 2000000000",
                           {"--num-experts", "2000000000", "4096"});
    // JSONL: one record at layer 4095 and 200000 single-layer tokens made a 4096-slot table per token (3.2 GB).
    {
        std::ofstream out(jsonl);
        out << R"({"layer": 4095, "token_idx": 0, "experts": [1]})"
            << "\n";
        for (int tok = 1; tok <= 200000; ++tok)
            out << R"({"layer": 0, "token_idx": )" << tok << R"(, "experts": [1]})"
                << "\n";
    }
    r = run_capped("trace convert " + jsonl + " -o " + dir + "/o.safetensors", 2'500'000);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("no token has records for every layer"));
    // An expert id beyond any model is a malformed record, not 10^6 experts inferred.
    std::ofstream(jsonl) << R"({"layer": 0, "token_idx": 0, "experts": [1, 2]})"
                         << "\n"
                         << R"({"layer": 0, "token_idx": 1, "experts": [1, 999999]})"
                         << "\n";
    ImportSummary s;
    CHECK(import_trace(jsonl, 0, &s).num_experts == 3);
    CHECK(s.malformed == 1);
    const std::string text = write_temp("t.txt", "0 1 | 2 3\n1 5000 | 2 3\n");
    CHECK_THAT(config_error_of([&] { import_trace(text, 0, nullptr); }), Catch::Contains("5000"));
    fs::remove_all(dir);
}

TEST_CASE("mutated safetensors traces load or raise ConfigError only", "[robust][fuzz]") {
    const std::string dir = temp_dir("qa-fuzz");
    // A small valid trace written by moebench itself, then mutated byte-wise (header and data).
    RoutingTrace t;
    t.num_layers = 2;
    t.num_tokens = 6;
    t.top_k = 2;
    t.num_experts = 4;
    t.model = "fuzz";
    t.source = "test";
    for (int64_t i = 0; i < t.num_layers * t.num_tokens * t.top_k; ++i) {
        t.topk_ids.push_back(static_cast<int32_t>(i % 4));
        t.topk_weights.push_back(0.5f);
    }
    t.seq_starts = {0, 3};
    const std::string good = dir + "/good.safetensors";
    write_trace(good, t);
    const std::string seed_text = read_text(good);
    REQUIRE(read_trace(good).num_tokens == 6);
    fuzz_file(seed_text, dir + "/t.safetensors", 300, 7, [](const std::string& p) { (void)read_trace(p); });
    fs::remove_all(dir);
}

TEST_CASE("a .jsonl trace whose first line is not JSON imports as JSONL", "[robust][trace]") {
    // Before: the format was guessed from the first line only, so a non-JSON first line read as the text form.
    const std::string path = write_temp("t.jsonl",
                                        "not json\n"
                                        R"({"dataset":"a","problem_id":0,"layer":0,"experts":[1,0],"token_idx":0})"
                                        "\n"
                                        R"({"dataset":"a","problem_id":0,"layer":0,"experts":[2,3],"token_idx":1})"
                                        "\n");
    ImportSummary s;
    RoutingTrace t = import_trace(path, 4, &s);
    CHECK(s.format == "jsonl");
    CHECK(s.malformed == 1);
    CHECK(t.num_tokens == 2);
    CHECK(t.topk_ids == std::vector<int32_t>{1, 0, 2, 3});
}

TEST_CASE("traces with repeated expert ids, bad weights or the wrong format are refused with the reason",
          "[robust][trace]") {
    const std::string good = R"({"dataset":"a","problem_id":0,"layer":0,"experts":[1,0],"token_idx":0})";
    // A token that selects one expert twice: skipped with the reason when other lines are good ...
    const std::string mixed =
        write_temp("dup.jsonl", good +
                                    "\n"
                                    R"({"dataset":"a","problem_id":0,"layer":0,"experts":[3,3],"token_idx":1})"
                                    "\n");
    ImportSummary s;
    RoutingTrace t = import_trace(mixed, 4, &s);
    CHECK(s.malformed == 1);
    CHECK(t.num_tokens == 1);
    REQUIRE_FALSE(s.examples.empty());
    CHECK_THAT(s.examples.front(), Catch::Contains("twice"));
    // ... and when every line is bad, the error says why (before: only "6 lines, 6 malformed").
    const std::string all_bad =
        write_temp("neg.jsonl", R"({"dataset":"a","problem_id":0,"layer":0,"experts":[-1,2],"token_idx":0})"
                                "\n");
    CHECK_THAT(config_error_of([&] { (void)import_trace(all_bad, 4, nullptr); }), Catch::Contains("out of range"));
    // gating_probs that do not match experts one to one (before: dropped silently, exit 0).
    const std::string short_probs =
        write_temp("probs.jsonl",
                   good +
                       "\n"
                       R"({"dataset":"a","problem_id":0,"layer":0,"experts":[2,3],"gating_probs":[1.0],"token_idx":1})"
                       "\n");
    (void)import_trace(short_probs, 4, &s);
    CHECK(s.malformed == 1);
    CHECK_THAT(s.examples.front(), Catch::Contains("gating_probs"));
    // The binary form: repeated ids and non-finite weights.
    RoutingTrace bad;
    bad.num_layers = 1;
    bad.num_tokens = 2;
    bad.top_k = 2;
    bad.num_experts = 4;
    bad.seq_starts = {0};
    bad.topk_ids = {0, 1, 2, 2};
    CHECK_THAT(config_error_of([&] { validate_trace(bad, "t"); }),
               Catch::Contains("expert 2 is selected twice by token 1"));
    bad.topk_ids = {0, 1, 2, -1};
    bad.topk_weights = {0.5f, 0.5f, std::nanf(""), 0.0f};
    CHECK_THAT(config_error_of([&] { validate_trace(bad, "t"); }), Catch::Contains("topk_weights[2]"));
    bad.topk_weights = {-1.0f, 2.0f, 1.0f, 0.0f};  // before: a negative combine weight was accepted
    CHECK_THAT(config_error_of([&] { validate_trace(bad, "t"); }), Catch::Contains("topk_weights[0]"));
    // A JSONL file given where a safetensors trace is expected names the conversion (before: "header length
    // 7310293772630499963 exceeds the file size").
    expect_refused("trace info " + mixed, {"text file", "trace convert"});
    expect_refused("run --model " + kTiny + " --routing trace:" + mixed + " --out -", {"trace convert"});
}

TEST_CASE("text traces: NUL bytes and trailing junk in numbers are refused, not read as numbers",
          "[robust][trace][cli]") {
    const std::string dir = temp_dir("trust-trace");
    // A file of NUL bytes was "1 layer x 1 token, expert 0"; `3\0junk` was expert 3.
    write_bytes(dir + "/zeros.txt", std::string(64, '\0'));
    expect_exit2("trace convert " + dir + "/zeros.txt -o " + dir + "/z.safetensors",
                 {"zeros.txt:1", "control byte 0x00 at column 1"});
    CHECK_FALSE(fs::exists(dir + "/z.safetensors"));
    write_bytes(dir + "/nul.txt", std::string("0 1\n3\0junk 1\n", 13));
    expect_exit2("trace convert " + dir + "/nul.txt -o " + dir + "/n.safetensors", {"nul.txt:2", "column 2"});
    write_bytes(dir + "/weight.txt", std::string("0:0.5\0x 1:0.5\n", 14));
    const auto import_error = [&](const std::string& name) {
        return config_error_of([&] { trace_from_text(dir + "/" + name, 0, nullptr); });
    };
    CHECK_THAT(import_error("weight.txt"), Catch::Contains("weight.txt:1"));
    // Junk after a number without a NUL was refused before, and still is; a plain trace still reads.
    write_bytes(dir + "/junk.txt", "0 3x\n");
    CHECK_THAT(import_error("junk.txt"), Catch::Contains("bad expert id '3x'"));
    write_bytes(dir + "/ok.txt", "0:0.75 1:0.25 | 2:0.5 3:0.5\r\n1\t2 | 3 0\n");
    CHECK_THAT(import_error("ok.txt"), Catch::Contains("weights for every id"));
    write_bytes(dir + "/ok.txt", "0 1 | 2 3\r\n1\t2 | 3 0\n");
    const RoutingTrace t = trace_from_text(dir + "/ok.txt", 0, nullptr);
    CHECK(t.num_tokens == 2);
    CHECK(t.num_layers == 2);
    CHECK(t.topk_ids == std::vector<int32_t>{0, 1, 1, 2, 2, 3, 3, 0});
}
