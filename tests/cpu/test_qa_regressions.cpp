// SPDX-License-Identifier: Apache-2.0
// Regressions found by a first-user pass over the README, docs/ and malformed inputs: each case failed (crash,
// exit 1, a misleading message, a late failure or a mislabelled figure) before its fix.
#include "test_paths.hpp"
#include "cli_helpers.hpp"
#include "error_helpers.hpp"

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/paths.hpp"
#include "sweep/axes.hpp"
#include "sweep/journal.hpp"
#include "workload/trace.hpp"
#include "workload/trace_import.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

namespace fs = std::filesystem;
using moebench::test::config_error_of;
using moebench::test::run_cli;
using moebench::test::temp_dir;
using moebench::test::write_temp;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";

// Exit 2 and "moebench: error: " with each needle; never an internal error. `run` may print its OpenBLAS
// re-exec note first, so the error line is looked for anywhere in stderr.
void expect_refused(const std::string& args, const std::vector<std::string>& needles) {
    auto r = run_cli(args);
    INFO("moebench " << args << "\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("moebench: error: "));
    CHECK_THAT(r.err, !Catch::Contains("internal error"));
    for (const auto& n : needles) CHECK_THAT(r.err, Catch::Contains(n));
}

std::string read_text_file(const std::string& path) { return moebench::test::read_text(path); }

bool is_printable_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == '\n') continue;
        if (c < 0x20 || c == 0x7f) return false;
        if (c >= 0x80) {
            size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
            if (len == 0 || i + len > s.size()) return false;
            for (size_t k = 1; k < len; ++k)
                if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
            i += len - 1;
        }
    }
    return true;
}

std::string journal_line(const std::string& key_json) {
    return R"({"journal":"moebench.sweep-journal/1","fingerprint":"f","key":)" + key_json +
           R"(,"point":{"batch":1},"record":{"status":"ok"}})";
}

}  // namespace

TEST_CASE("qa: the sim backend reports a bad hardware profile, not 'not built yet'", "[qa][cli]") {
    // Before: runner.cpp caught every ConfigError of make_backend("sim") and replaced it with
    // "the sim backend is not built yet", hiding the real field.
    json hw = load_json_file(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware/h200-sxm.json");
    hw["sim"] = {{"compute_efficiency", 5}};
    const std::string path = write_temp("bad-sim.json", hw.dump());
    expect_refused("run --backend sim --model " + kTiny + " --hardware " + path + " --out -",
                   {"compute_efficiency", "5"});
    auto r = run_cli("run --backend sim --model " + kTiny + " --hardware " + path + " --out -");
    CHECK_THAT(r.err, !Catch::Contains("not built"));
}

TEST_CASE("qa: error messages never echo raw binary bytes", "[qa][errors]") {
    CHECK(printable(std::string("a\x01" "b\xc3")) == "a\\x01b\\xc3");
    CHECK(printable("caf\xc3\xa9 \xe2\x89\xa5") == "caf\xc3\xa9 \xe2\x89\xa5");  // valid UTF-8 passes
    CHECK(printable(std::string(1000, 'x')).size() < 420);
    // A model file of binary garbage: the JSON parser's message quotes the bytes it read.
    std::string garbage = "{";
    for (int i = 0; i < 64; ++i) garbage += static_cast<char>(0x80 + (i * 37) % 128);
    const std::string path = write_temp("garbage.json", garbage);
    auto r = run_cli("plan --model " + path);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(is_printable_utf8(r.err));
    // json_brief of a string with invalid UTF-8 used to throw json type_error 316 (exit 1).
    CHECK_NOTHROW(json_brief(json(std::string("\x8e\xff"))));
}

TEST_CASE("qa: a folder where a file is expected is a ConfigError", "[qa][cli]") {
    const std::string dir = temp_dir("qa-dir");
    const std::string sub = dir + "/x.json";
    fs::create_directories(sub);
    expect_refused("trace info " + sub, {sub, "folder"});         // was: internal error, exit 1
    expect_refused("plan --model " + sub, {sub, "folder"});       // was: "file not found"
    expect_refused("report " + sub, {sub, "folder"});             // was: "is not valid JSON"
    expect_refused("trace convert " + sub + " -o " + dir + "/o.safetensors", {sub, "folder"});
    fs::remove_all(dir);
}

TEST_CASE("qa: corrupt sweep journal lines are ConfigErrors, not json exceptions", "[qa][sweep]") {
    const std::string dir = temp_dir("qa-journal");
    // A key that is a number (json type_error 302 before) and a line of invalid UTF-8 (type_error 316 before).
    for (const std::string& bad : {journal_line("5"), std::string("\x8e\xff\x01 garbage")}) {
        const std::string path = dir + "/j.jsonl";
        std::ofstream(path, std::ios::binary | std::ios::trunc) << journal_line("\"{\\\"batch\\\":2}\"") << "\n"
                                                                << bad << "\n"
                                                                << journal_line("\"{\\\"batch\\\":4}\"") << "\n";
        std::string msg = config_error_of([&] { (void)load_journal(path, "f", nullptr); });
        INFO(msg);
        CHECK_THAT(msg, Catch::Contains(path + ":2"));
        CHECK(is_printable_utf8(msg));
        expect_refused("report " + path, {path + ":2"});
    }
    fs::remove_all(dir);
}

TEST_CASE("qa: a .jsonl trace whose first line is not JSON imports as JSONL", "[qa][trace]") {
    // Before: the format was guessed from the first line only, so a non-JSON first line read as the text form.
    const std::string path = write_temp(
        "t.jsonl", "not json\n"
                   R"({"dataset":"a","problem_id":0,"layer":0,"experts":[1,0],"token_idx":0})" "\n"
                   R"({"dataset":"a","problem_id":0,"layer":0,"experts":[2,3],"token_idx":1})" "\n");
    ImportSummary s;
    RoutingTrace t = import_trace(path, 4, &s);
    CHECK(s.format == "jsonl");
    CHECK(s.malformed == 1);
    CHECK(t.num_tokens == 2);
    CHECK(t.topk_ids == std::vector<int32_t>{1, 0, 2, 3});
}

TEST_CASE("qa: compare refuses when nothing matches or --match names no axis", "[qa][compare]") {
    const std::string dir = temp_dir("qa-compare");
    const std::string a = dir + "/a.json", b = dir + "/b.json";
    REQUIRE(run_cli("run --model " + kTiny + " --batch 2 --iters 2 --warmup 0 --out " + a).exit_code == 0);
    REQUIRE(run_cli("run --model " + kTiny + " --batch 4 --iters 2 --warmup 0 --out " + b).exit_code == 0);
    // Before: 0 matched points -> exit 0, so a CI gate passed without comparing anything.
    expect_refused("compare " + a + " " + b + " --match batch", {"no point", "--match"});
    // Before: an unknown axis was accepted silently.
    expect_refused("compare " + a + " " + b + " --match nosuchaxis", {"--match", "nosuchaxis", "batch"});
    // A report against itself is compared (exit 0 "same", or exit 1 "inconclusive" when its cpu steps were noisy).
    CHECK(run_cli("compare " + a + " " + a).exit_code != 2);
    fs::remove_all(dir);
}

TEST_CASE("qa: outputs that cannot be written fail before the work, and leave no temporary file", "[qa][cli]") {
    const std::string dir = temp_dir("qa-out");
    const std::string folder = dir + "/out.json";
    fs::create_directories(folder);
    const auto t0 = std::chrono::steady_clock::now();
    expect_refused("run --model " + kTiny + " --iters 1000 --warmup 0 --out " + folder, {folder, "folder"});
    // 1000 iterations take seconds; the refusal comes before the run.
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5.0);
    const std::string file = dir + "/a-file";
    std::ofstream(file) << "x";
    expect_refused("run --model " + kTiny + " --iters 1 --warmup 0 --out " + dir + "/r.json --dump-tensors " + file,
                   {"--dump-tensors", file});
    CHECK_THAT(config_error_of([&] { write_file_atomic(folder, "x"); }), Catch::Contains("folder"));
    size_t leftovers = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.path().string().find(".tmp.") != std::string::npos) ++leftovers;
    CHECK(leftovers == 0);
    CHECK_THAT(config_error_of([] { check_output_path("/proc/no-such-dir/x.json"); }),
               Catch::Contains("/proc/no-such-dir/x.json"));
    fs::remove_all(dir);
}

TEST_CASE("qa: flags that cannot apply or cannot fit are refused up front", "[qa][cli]") {
    // --seq-len in decode used to be ignored silently.
    expect_refused("run --model " + kTiny + " --seq-len 8 --out -", {"--seq-len", "prefill"});
    // trace info --top-pairs -1 reached std::vector as a huge size (internal error).
    const std::string trace = temp_dir("qa-trace") + "/t.safetensors";
    REQUIRE(run_cli("trace gen --model " + kTiny + " --routing uniform --tokens 16 -o " + trace).exit_code == 0);
    expect_refused("trace info " + trace + " --top-pairs -1", {"--top-pairs", "-1"});
    fs::remove_all(fs::path(trace).parent_path());
    // trace gen of 10^12 tokens used to try the allocation ("out of host memory; ... --batch").
    expect_refused("trace gen --model " + kTiny + " --routing uniform --tokens 1000000000000 -o /tmp/never.st",
                   {"--tokens", "1000000000000"});
    // A 10^10-point sweep grid used to be built (quadratic dedup, then bad_alloc); now refused at once.
    std::vector<SweepAxis> axes{{"batch", parse_axis_values("1..100000:+1", "--batch")},
                                {"context", parse_axis_values("1..100000:+1", "--context")}};
    CHECK_THAT(config_error_of([&] { (void)expand_axes(axes); }), Catch::Contains("100000 points"));
}

TEST_CASE("qa: the terminal summary labels sim figures modeled, never measured", "[qa][sim]") {
    auto r = run_cli("run --backend sim --hardware h200-sxm --model " + kTiny + " --out -");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    // The summary goes to stderr when the JSON goes to stdout; look in both.
    const std::string all = r.out + r.err;
    CHECK_THAT(all, Catch::Contains("MoE block:"));
    CHECK_THAT(all, !Catch::Contains("us measured"));
    CHECK_THAT(all, Catch::Contains("us modeled"));
}

TEST_CASE("qa: the README's plan example runs as written", "[qa][docs]") {
    // The README used --ep 8 in bf16, which the plan refuses (DeepSeek-V3 needs 16 H200s in bf16).
    auto r = run_cli("plan --model deepseek-v3 --hardware h200-sxm --dtype fp8 --ep 8 --batch 64 --context 8192");
    INFO(r.err);
    CHECK(r.exit_code == 0);
    expect_refused("plan --model deepseek-v3 --hardware h200-sxm --ep 8 --batch 64 --context 8192",
                   {"--ep", "16"});
}

TEST_CASE("qa: a report with a field of the wrong type is a ConfigError in report and compare", "[qa][report]") {
    const std::string dir = temp_dir("qa-report");
    const std::string good = dir + "/good.json", bad = dir + "/bad.json";
    REQUIRE(run_cli("run --model " + kTiny + " --iters 2 --warmup 0 --out " + good).exit_code == 0);
    json r = load_json_file(good);
    REQUIRE(r["runs"][0]["expert_load"]["per_layer"][0].contains("max_over_mean"));
    r["runs"][0]["expert_load"]["per_layer"][0]["max_over_mean"] = json::object();
    std::ofstream(bad) << r.dump();
    // Before: "moebench: internal error: [json.exception.type_error.302] ...", exit 1.
    expect_refused("report " + bad + " --format md", {bad, "unexpected type"});
    expect_refused("report " + bad + " --format html -o " + dir + "/r.html", {bad, "unexpected type"});
    CHECK(!fs::exists(dir + "/r.html"));
    fs::remove_all(dir);
}

TEST_CASE("qa: sizes near INT64_MAX are refused, not a crash or an overflowed plan", "[qa][cli]") {
    const std::string big = "9223372036854775807";
    // Before: segfault (context), "internal error: cannot create std::vector larger than max_size()" (batch).
    expect_refused("run --model " + kTiny + " --context " + big + " --out -", {"context", big});
    expect_refused("run --model " + kTiny + " --batch " + big + " --out -", {"batch", big});
    expect_refused("run --backend sim --model " + kTiny + " --batch " + big + " --out -", {"batch", big});
    // batch x seq_len used to wrap to a negative token count.
    expect_refused("run --model " + kTiny + " --mode prefill --batch 3 --seq-len 3074457345618258603 --out -",
                   {"seq_len"});
    expect_refused("run --model " + kTiny + " --mode prefill --batch 65536 --seq-len 65536 --out -",
                   {"tokens per step", "65536 x 65536"});
    expect_refused("run --model " + kTiny + " --iters 1000000000 --out -", {"iters", "1000000000"});
    // plan: ceil(batch / dp) overflowed; the plan said "fits" with negative KV bytes, exit 0.
    expect_refused("plan --model mixtral-8x7b --batch " + big, {"--batch", big});
    expect_refused("plan --model mixtral-8x7b --context 1000000000000000", {"--context"});
}

TEST_CASE("qa: a number beyond double range in an input JSON is a ConfigError", "[qa][config]") {
    // nlohmann throws out_of_range 406 (not parse_error) for 1e400: it was an internal error, exit 1.
    std::string text = read_text_file(kData + "/hf-configs/mixtral-8x7b-v0.1.json");
    const auto at = text.find("\"hidden_size\": 4096");
    REQUIRE(at != std::string::npos);
    text.replace(at, std::string("\"hidden_size\": 4096").size(), "\"hidden_size\": 1e400");
    const std::string path = write_temp("config.json", text);
    expect_refused("plan --model " + path, {path, "not valid JSON", "1e400"});
    const std::string journal = write_temp("j.jsonl", journal_line("1e400") + "\n" + journal_line("\"k\"") + "\n");
    expect_refused("report " + journal, {journal + ":1"});
}

// ---- A second review pass (2026-12-02): outputs that are not plain files, and trace contents ----

TEST_CASE("qa: an output path that is a symbolic link or a named pipe is written through, never replaced",
          "[qa][cli]") {
    // Before: the temporary file was renamed over the path, so a link became a regular file (its target never
    // written) and a device such as /dev/null would have been replaced by a file.
    const std::string dir = temp_dir("qa-special-out");
    const std::string target = dir + "/real/r.json", link = dir + "/link.json";
    fs::create_directories(dir + "/real");
    fs::create_symlink("real/r.json", link);  // relative, dangling until written
    write_file_atomic(link, "{}\n");
    CHECK(fs::is_symlink(fs::symlink_status(link)));
    CHECK(read_text_file(target) == "{}\n");

    const std::string fifo = dir + "/pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string received;
    std::thread reader([&] { received = read_text_file(fifo); });  // opening for reading waits for the writer
    write_file_atomic(fifo, "through the pipe\n");
    reader.join();
    CHECK(received == "through the pipe\n");
    CHECK(fs::is_fifo(fs::status(fifo)));
    check_output_path(fifo);  // a writable special file is a valid --out
    fs::remove_all(dir);
}

TEST_CASE("qa: a report that cannot reach stdout is an error, and --json - with --out is refused", "[qa][cli]") {
    if (!fs::exists("/dev/full")) {
        WARN("skipped: no /dev/full here");
        return;
    }
    const std::string dir = temp_dir("qa-stdout");
    const std::string cmd = std::string(MOEBENCH_BIN) + " run --model " + kTiny +
                            " --iters 1 --warmup 0 --json - >/dev/full 2>" + dir + "/err";
    const int status = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);  // before: 0, the report lost silently (exit 1 since: a failed write, as any)
    CHECK_THAT(read_text_file(dir + "/err"),
               Catch::Contains("moebench: error: writing to stdout failed: No space left on device"));
    // Before: --out was ignored silently when --json - was given too.
    expect_refused("run --model " + kTiny + " --iters 1 --json - --out " + dir + "/r.json", {"--json", "--out"});
    CHECK_FALSE(fs::exists(dir + "/r.json"));
    fs::remove_all(dir);
}

TEST_CASE("qa: infinite option values and negative trace seeds are refused", "[qa][cli]") {
    // Before: inf was accepted and the report's resolved config said "capacity_factor": null.
    expect_refused("run --model " + kTiny + " --capacity-factor inf --out -", {"capacity_factor", "inf", "finite"});
    expect_refused("run --model " + kTiny + " --min-time inf --out -", {"min_time_s", "finite"});
    // Before: -1 wrapped to 18446744073709551615.
    expect_refused("trace gen --model " + kTiny + " --routing uniform --tokens 8 --seed -1 -o /tmp/never.safetensors",
                   {"--seed", "-1"});
    CHECK_FALSE(fs::exists("/tmp/never.safetensors"));
    expect_refused("run --model no-such-model --out -", {"unknown model name", "no-such-model"});
    // CLI11's parse errors carry the fix too (before: "Could not convert: --batch = eight" and nothing more).
    expect_refused("run --batch eight", {"--batch", "eight", "whole number", "e.g. 8"});
    // Before: CLI11 saturated these to 2^63 - 1 and the run went on with a value nobody typed; a JSON config
    // wrapped 2^63 to a negative number.
    expect_refused("run --model " + kTiny + " --backend sim --seed 18446744073709551615 --out -",
                   {"--seed", "18446744073709551615", "out of range"});
    expect_refused("run --model " + kTiny + " --backend sim --batch 99999999999999999999 --out -",
                   {"--batch", "99999999999999999999", "out of range"});
    expect_refused("run --config " + write_temp("big-batch.json", R"({"batch": 9223372036854775808})"),
                   {"batch", "9223372036854775808", "out of range"});
    // Before: "--out dir/" ran the whole step, then failed at the write and left dir/ behind.
    const std::string slash_dir = temp_dir("out-slash") + "/new";
    expect_refused("run --model " + kTiny + " --backend sim --out " + slash_dir + "/", {"is a folder"});
    CHECK_FALSE(std::filesystem::exists(slash_dir));
    // Before: the sim allocated routing for 2^26 tokens x 58 layers until bad_alloc (or the OOM killer).
    expect_refused("run --backend sim --model deepseek-v3 --layers 0 --batch 67108864 --iters 1 --warmup 0 --out -",
                   {"batch (--batch)", "67108864", "host memory", "fewer --layers"});
    // Before: a newline or a right-to-left override in a model's name went into every report and broke the tables.
    for (const std::string name : {"bad\\nname", "evil\u202Eslug"})
        expect_refused("plan --model " + write_temp("odd-name.json", R"({"moebench": "model/1", "name": ")" + name +
                                                    R"(", "vocab_size": 100, "hidden_size": 64, "num_layers": 2,
            "attention": {"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16},
            "moe": {"num_experts": 8, "top_k": 2, "expert_intermediate_size": 32, "routing": "topk_softmax"}})"),
                       {"name", "printable"});
    // Before: a key given twice silently took the last value.
    expect_refused("run --backend sim --config " +
                       write_temp("dup-key.json", R"({"batch": 8, "mode": "decode", "batch": 0})"),
                   {"twice", "batch"});
    // Before: "command: unknown run config field" for a report of another schema version.
    expect_refused("run --config " + write_temp("report-v2.json", R"({"schema": "moebench.report/2", "command": "x"})"),
                   {"moebench.report/2", "run config"});
    // Before: "--ep/--tp: ... use a smaller --dtype or a larger GPU" when only the batch's activations overflowed.
    expect_refused("plan --model olmoe-1b-7b --batch 100000000", {"--batch", "100000000", "use --batch"});
    // Before: an infinite noise band called any slowdown noise, and the gate passed.
    for (const std::string bad : {"--k-sigma inf", "--spread-z inf", "--noise-floor 1e300", "--threshold 1e300"})
        expect_refused("compare never-read-a.json never-read-b.json " + bad,  // options are checked first
                       {bad.substr(0, bad.find(' ')), bad.substr(bad.find(' ') + 1)});
}

TEST_CASE("qa: traces with repeated expert ids, bad weights or the wrong format are refused with the reason",
          "[qa][trace]") {
    const std::string good = R"({"dataset":"a","problem_id":0,"layer":0,"experts":[1,0],"token_idx":0})";
    // A token that selects one expert twice: skipped with the reason when other lines are good ...
    const std::string mixed = write_temp(
        "dup.jsonl", good + "\n" R"({"dataset":"a","problem_id":0,"layer":0,"experts":[3,3],"token_idx":1})" "\n");
    ImportSummary s;
    RoutingTrace t = import_trace(mixed, 4, &s);
    CHECK(s.malformed == 1);
    CHECK(t.num_tokens == 1);
    REQUIRE_FALSE(s.examples.empty());
    CHECK_THAT(s.examples.front(), Catch::Contains("twice"));
    // ... and when every line is bad, the error says why (before: only "6 lines, 6 malformed").
    const std::string all_bad = write_temp(
        "neg.jsonl", R"({"dataset":"a","problem_id":0,"layer":0,"experts":[-1,2],"token_idx":0})" "\n");
    CHECK_THAT(config_error_of([&] { (void)import_trace(all_bad, 4, nullptr); }), Catch::Contains("out of range"));
    // gating_probs that do not match experts one to one (before: dropped silently, exit 0).
    const std::string short_probs = write_temp(
        "probs.jsonl", good + "\n" R"({"dataset":"a","problem_id":0,"layer":0,"experts":[2,3],"gating_probs":[1.0],"token_idx":1})" "\n");
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
    CHECK_THAT(config_error_of([&] { validate_trace(bad, "t"); }), Catch::Contains("expert 2 is selected twice by token 1"));
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

TEST_CASE("qa: the routing block says where ids came from on sim, and that router steps repeat", "[qa][report]") {
    // Before: a sim report said its ids came from "the model's router" and its logits from the router GEMM; the sim
    // has neither. And nothing said that router-workload steps all route the same tokens.
    const auto sim = run_cli("run --backend sim --model " + kTiny + " --iters 2 --warmup 0 --json -");
    REQUIRE(sim.exit_code == 0);
    const json s = json::parse(sim.out)["runs"][0];
    CHECK_THAT(s["routing"]["ids_from"].get<std::string>(), Catch::Contains("sim backend"));
    CHECK_THAT(s["routing"]["logits_from"].get<std::string>(), Catch::StartsWith("none"));
    const auto cpu = run_cli("run --backend cpu --model " + kTiny + " --iters 2 --warmup 0 --json -");
    REQUIRE(cpu.exit_code == 0);
    const json c = json::parse(cpu.out)["runs"][0];
    CHECK_THAT(c["routing"]["ids_from"].get<std::string>(), Catch::Contains("router"));
    CHECK_THAT(c["expert_load"]["basis"].get<std::string>(), Catch::Contains("same seeded tokens"));
    const auto zipf = run_cli("run --backend cpu --model " + kTiny + " --routing zipf:1.2 --iters 2 --warmup 0 --json -");
    REQUIRE(zipf.exit_code == 0);
    CHECK_THAT(json::parse(zipf.out)["runs"][0]["expert_load"]["basis"].get<std::string>(),
               !Catch::Contains("same seeded tokens"));
}

TEST_CASE("qa: with expert parallelism on sim the floors use all ranks' ceilings", "[qa][sim]") {
    // Before: the whole step's work (all 8 ranks) was held to ONE GPU's bandwidth, so the modeled block came out at
    // 0.17x of its "floor", with a warning that a ceiling was under-measured (nothing is measured on sim).
    const auto r = run_cli("run --backend sim --model deepseek-v3 --layers 4 --batch 256 --context 4096 --hardware b200 "
                           "--ep 8 --iters 2 --warmup 0 --json -");
    REQUIRE(r.exit_code == 0);
    const json roof = json::parse(r.out)["runs"][0]["roofline"];
    CHECK(roof["ranks"] == 8);
    CHECK(roof["moe_block"]["ratio_to_floor"].get<double>() >= 1.0);
    CHECK_FALSE(roof["moe_block"].contains("floor_warning"));
    CHECK(roof["phases"]["expert_up"]["fraction_of_mem_bw"].get<double>() <= 1.0);
}

TEST_CASE("qa: a model of 20000 experts runs without an E x E table; its report keeps the top pairs", "[qa][cli]") {
    // Before: the report's 20000 x 20000 co-activation matrix took gigabytes, and the run aborted (bad_alloc while a
    // JSON array was being destroyed). Above 512 experts a layer carries its most frequent pairs instead.
    const std::string dir = moebench::test::temp_dir("many-experts");
    const std::string model = write_temp("e20000.json", R"({"moebench": "model/1", "name": "many", "family": "mixtral",
        "vocab_size": 100, "hidden_size": 64, "num_layers": 1,
        "attention": {"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16},
        "moe": {"num_experts": 20000, "top_k": 2, "expert_intermediate_size": 32, "routing": "topk_softmax"}})");
    const auto r = run_cli("run --backend sim --model " + model +
                           " --layers 1 --batch 64 --iters 2 --warmup 0 --min-time 0 --out " + dir + "/r.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json layer = load_json_file(dir + "/r.json")["runs"][0]["expert_load"]["per_layer"][0];
    CHECK_FALSE(layer.contains("coactivation"));
    CHECK_THAT(layer["coactivation_omitted"].get<std::string>(), Catch::Contains("512"));
    REQUIRE(layer["coactivation_top_pairs"].is_array());
    int64_t pairs = 0;  // 2 steps x 64 tokens, one pair each (top-2, distinct experts)
    for (const json& p : layer["coactivation_top_pairs"]) pairs += p["count"].get<int64_t>();
    CHECK(pairs == 128);
}

TEST_CASE("qa: prefill reports no KV context, and refuses --context", "[qa][cli]") {
    // Before: prefill ignored context but the report (and terminal) carried the default run's 1024.
    const auto r = run_cli("run --model " + kTiny + " --mode prefill --seq-len 4 --iters 1 --warmup 0 --json -");
    REQUIRE(r.exit_code == 0);
    CHECK(json::parse(r.out)["runs"][0]["context"] == 0);
    expect_refused("run --model " + kTiny + " --mode prefill --seq-len 4 --context 100 --out -",
                   {"--context", "prefill", "100"});
}

TEST_CASE("qa: a project path in a shipped config resolves from any folder", "[qa][config]") {
    // Before: configs/sweeps/tiny-smoke.json's "tests/data/models/tiny-gqa.json" was looked up in the current
    // folder only, so `moebench sweep --config tiny-smoke` failed every point outside the repository root.
    const fs::path here = fs::current_path();
    fs::current_path(temp_dir("qa-cwd"));
    std::string resolved, err;
    try {
        resolved = resolve_config("models", "tests/data/models/tiny-gqa.json", "model");
    } catch (const ConfigError& e) {
        err = e.what();
    }
    fs::current_path(here);
    INFO(err);
    CHECK(fs::is_regular_file(resolved));
    CHECK_THAT(resolved, Catch::EndsWith("tests/data/models/tiny-gqa.json"));
    CHECK_THAT(config_error_of([] { (void)resolve_config("models", "no/such/model.json", "model"); }),
               Catch::Contains("file not found"));
}

TEST_CASE("qa: the sim says when the layers it models would not fit the profile's GPUs", "[qa][sim][slow]") {
    // Before: DeepSeek-V3's ~1.2 TiB of bf16 weights were modeled on one B200 without a word.
    // Per GPU at EP 8: attention, norms, routers and shared experts of 61 layers plus 1/8 of the routed experts.
    const auto one = run_cli("run --backend sim --hardware b200 --model deepseek-v3 --layers 0 --batch 8 --iters 1 "
                             "--warmup 0 --json -");
    REQUIRE(one.exit_code == 0);
    const json r1 = json::parse(one.out)["runs"][0];
    REQUIRE(r1.contains("sim_fit_warning"));
    CHECK_THAT(r1["sim_fit_warning"].get<std::string>(), Catch::Contains("EP 1") && Catch::Contains("moebench plan"));
    CHECK_THAT(one.err, Catch::Contains("warning: sim:"));
    // EP 16 spreads the routed experts thin enough (moebench plan: 8 GPUs need TP 2 as well).
    const auto ep16 = run_cli("run --backend sim --hardware b200 --model deepseek-v3 --layers 0 --batch 16 --ep 16 "
                              "--iters 1 --warmup 0 --json -");
    REQUIRE(ep16.exit_code == 0);
    CHECK_FALSE(json::parse(ep16.out)["runs"][0].contains("sim_fit_warning"));
    // A small model on one H200 fits.
    const auto small = run_cli("run --backend sim --model " + kTiny + " --iters 1 --warmup 0 --json -");
    REQUIRE(small.exit_code == 0);
    CHECK_FALSE(json::parse(small.out)["runs"][0].contains("sim_fit_warning"));
}
