// SPDX-License-Identifier: Apache-2.0
// One dialect on every command (issue 30, item 5): -o/--out wherever a file is written, --format as the output view
// with the table's names, --set FIELD=VALUE on run as on sweep, numeric flags typed and read alike, one --hardware
// default stated in --help, "did you mean" for near-miss names, the list and range syntax named where one value was
// expected or a value was no number, and a file of another kind named with the flag it belongs to. Each case runs the
// built binary and failed before the change it covers (the --format case held already: the format table).
#include "cli_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "common/did_you_mean.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using moebench::test::expect_refused;
using moebench::test::read_json;
using moebench::test::read_text;
using moebench::test::run_cli;
using moebench::test::temp_dir;
using moebench::test::write_temp;
using nlohmann::json;

namespace {

using Strings = std::vector<std::string>;
const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";
const std::string kConfigs = std::string(MOEBENCH_SOURCE_DIR) + "/configs";
const std::string kH200 = kConfigs + "/hardware/h200-sxm.json";
const std::string kMixtral = kConfigs + "/models/mixtral-8x7b.json";
// A quick sim point of the tiny model.
const std::string kSimRun = "run --backend sim --model " + kTiny + " --iters 2 --warmup 0";

// The line of `help` that documents `flag` (its names and type column).
std::string help_line(const std::string& help, const std::string& flag) {
    const size_t at = help.find(flag + " ");
    if (at == std::string::npos) return "";
    const size_t begin = help.rfind('\n', at) + 1;
    return help.substr(begin, help.find('\n', at) - begin);
}

}  // namespace

TEST_CASE("-o FILE writes the output of every command that writes one", "[cli][dialect]") {
    const std::string dir = temp_dir("dialect-o");
    // run: the report, as --out writes it.
    auto r = run_cli(kSimRun + " -o " + dir + "/run.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(read_json(dir + "/run.json").value("schema", "") == "moebench.report/1");
    // sweep: the report and its journal next to it.
    r = run_cli("sweep --backend sim --model " + kTiny + " --batch 1,2 --set iters=2 --set warmup=0 --quiet -o " + dir +
                "/sweep.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(read_json(dir + "/sweep.json")["runs"].size() == 2);
    CHECK(fs::exists(dir + "/sweep.jsonl"));
    // plan, devices, trace info: the view they print, in a file.
    r = run_cli("plan --model mixtral-8x7b --format json -o " + dir + "/plan.json");
    REQUIRE(r.exit_code == 0);
    CHECK(read_json(dir + "/plan.json").value("schema", "") == "moebench.plan/1");
    CHECK(r.out.empty());
    r = run_cli("devices --format json -o " + dir + "/devices.json");
    REQUIRE(r.exit_code == 0);
    CHECK(read_json(dir + "/devices.json").value("schema", "") == "moebench.devices/1");
    REQUIRE(run_cli("trace gen --model " + kTiny + " --routing uniform --tokens 16 -o " + dir + "/t.safetensors")
                .exit_code == 0);
    r = run_cli("trace info " + dir + "/t.safetensors --format json -o " + dir + "/info.json");
    REQUIRE(r.exit_code == 0);
    CHECK(read_json(dir + "/info.json").value("schema", "") == "moebench.trace_info/1");
    CHECK(r.out.empty());
    // bench moe and bench a2a: the JSON result (a2a needs mpirun: its help is enough here).
    r = run_cli("bench moe --model " + kTiny + " --batch 2 --iters 1 --warmup 0 -o " + dir + "/bench.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(read_json(dir + "/bench.json").value("schema", "") == "moebench.bench_moe/1");
    // Every command that writes a file spells it -o,--out FILE.
    for (const std::string& cmd : Strings{"run", "sweep", "plan", "devices", "report", "compare", "place", "trace gen",
                                          "trace info", "trace convert", "bench moe", "bench a2a", "calibrate"}) {
        INFO(cmd);
        CHECK_THAT(help_line(run_cli(cmd + " --help").out, "--out"), Catch::Contains("-o,--out FILE"));
    }
}

TEST_CASE("run -o refuses to overwrite an input, as --out does", "[cli][dialect]") {
    const std::string model = write_temp("model.json", read_text(kTiny));
    const std::string before = read_text(model);
    expect_refused(kSimRun.substr(0, kSimRun.find("--model")) + "--model " + model + " -o " + model,
                   {"--out", "--model", "destroy"});
    CHECK(read_text(model) == before);
}

TEST_CASE("--format is the output view with the table's names on every command", "[cli][dialect]") {
    // The format table (report/formats.cpp) parses every --format: a name a view lacks is refused naming the ones it
    // has, and each help spells the option --format FORMAT.
    for (const std::string& cmd : Strings{"plan", "devices", "compare a.json b.json", "report r.json", "trace info t",
                                          "bench moe --model " + kTiny, "run --model " + kTiny,
                                          "sweep --model " + kTiny, "calibrate r.json --hardware h200-sxm"}) {
        expect_refused(cmd + " --format nosuch", {"--format", "nosuch", "text"});
    }
    for (const std::string& cmd : Strings{"run", "sweep", "plan", "devices", "report", "compare", "place", "trace info",
                                          "bench moe", "bench a2a", "calibrate"}) {
        INFO(cmd);
        CHECK_THAT(help_line(run_cli(cmd + " --help").out, "--format"), Catch::Contains("--format FORMAT"));
    }
}

TEST_CASE("run takes --set FIELD=VALUE as sweep does", "[cli][dialect]") {
    const std::string dir = temp_dir("dialect-set");
    auto r = run_cli(kSimRun + " --set batch=3 --set routing=zipf:1.2 --set capacity_factor=1.5 -o " + dir + "/r.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json run = read_json(dir + "/r.json")["config"]["run"];
    CHECK(run["batch"] == 3);
    CHECK(run["routing"] == "zipf:1.2");
    CHECK(run["capacity_factor"] == 1.5);
    // A field given twice is refused naming both (one would be dropped), in either order.
    expect_refused(kSimRun + " --batch 2 --set batch=4 --out -", {"--set batch=4", "--batch 2", "batch"});
    expect_refused(kSimRun + " --set seed=1 --set seed=2 --out -", {"--set seed=1", "--set seed=2"});
    // One value per field in a run: a list or range is a sweep's.
    expect_refused(kSimRun + " --set batch=1,2 --out -",
                   {"--set batch", "one value", "moebench sweep --set batch=1,2"});
    // Not FIELD=VALUE, or no run config field.
    expect_refused(kSimRun + " --set batch --out -", {"--set", "FIELD=VALUE"});
    expect_refused(kSimRun + " --set batchh=4 --out -",
                   {"--set batchh", "unknown run config field", "did you mean batch?"});
    // A value read as the field's flag reads it.
    expect_refused(kSimRun + " --set batch=eight --out -", {"--set batch", "eight", "whole number"});
}

TEST_CASE("numeric flags are typed and read alike on every command", "[cli][dialect]") {
    // --help: INT for a whole number, FLOAT for a decimal, whichever command declares it.
    const std::vector<std::pair<std::string, std::string>> typed = {
        {"run", "--batch INT"},
        {"plan", "--batch INT"},
        {"bench moe", "--batch INT"},
        {"place", "--batch INT"},
        {"run", "--ep INT"},
        {"plan", "--ep INT"},
        {"place", "--ep INT"},
        {"run", "--seed INT"},
        {"trace gen", "--seed INT"},
        {"bench moe", "--seed INT"},
        {"run", "--warmup INT"},
        {"sweep", "--warmup INT"},
        {"bench moe", "--warmup INT"},
        {"run", "--capacity-factor FLOAT"},
        {"run", "--min-time FLOAT"},
        {"sweep", "--time-budget FLOAT"},
        {"compare", "--k-sigma FLOAT"},
        {"trace info", "--window INT"},
        {"bench a2a", "--baseline-iters INT"},
    };
    for (const auto& [cmd, want] : typed) {
        INFO(cmd << ": " << want);
        CHECK_THAT(help_line(run_cli(cmd + " --help").out, want.substr(0, want.find(' '))), Catch::Contains(want));
    }
    // One reader: the same bad value is the same message, naming the flag, the value and the fix.
    for (const std::string& cmd :
         Strings{"run --model " + kTiny, "plan", "bench moe --model " + kTiny, "place --trace t.jsonl --ep 2"})
        expect_refused(cmd + " --batch eight", {"--batch", "eight", "must be a whole number", "e.g. 8"});
    expect_refused("trace gen --model " + kTiny + " --routing uniform --tokens 1.5 -o never.safetensors",
                   {"--tokens", "1.5", "must be a whole number"});
    // No saturation: CLI11 read 99999999999999999999 as 2^63 - 1 and went on.
    for (const std::string& cmd : Strings{"bench moe --model " + kTiny, "place --trace t.jsonl --ep 2"})
        expect_refused(cmd + " --batch 99999999999999999999", {"--batch", "99999999999999999999", "out of range"});
    for (const std::string& cmd : Strings{"run --model " + kTiny + " --capacity-factor",
                                          "compare a.json b.json --k-sigma", "sweep --model " + kTiny + " --knee"})
        expect_refused(cmd + " abc", {"abc", "must be a number"});
}

TEST_CASE("one --hardware default, stated in --help and modeled alike by plan and the sim", "[cli][dialect]") {
    CHECK_THAT(help_line(run_cli("plan --help").out, "--hardware"), Catch::Contains("default h200-sxm"));
    const std::string run_help = help_line(run_cli("run --help").out, "--hardware");
    CHECK_THAT(run_help, Catch::Contains("default h200-sxm"));
    CHECK_THAT(run_help, Catch::Contains("cpu and cuda"));
    CHECK_THAT(run_cli("sweep --help").out, Catch::Contains("--set hardware=NAME"));
    // What the help says: plan and a sim run without --hardware read the same profile.
    const std::string dir = temp_dir("dialect-hw");
    REQUIRE(run_cli("plan --model " + kTiny + " --format json -o " + dir + "/plan.json").exit_code == 0);
    REQUIRE(run_cli(kSimRun + " -o " + dir + "/run.json").exit_code == 0);
    const json plan = read_json(dir + "/plan.json"), report = read_json(dir + "/run.json");
    CHECK(plan["hardware"]["name"] == "h200-sxm");
    CHECK(report["runs"][0]["backend_info"]["hardware"]["name"] == "h200-sxm");
}

TEST_CASE("near-miss model, hardware and field names get a did-you-mean", "[cli][dialect]") {
    expect_refused("plan --model mixtral",
                   {"--model", "unknown model name", "did you mean mixtral-8x7b or mixtral-8x22b?"});
    expect_refused("plan --model mixtrl-8x7b", {"did you mean mixtral-8x7b?"});
    expect_refused("plan --model Qwen3-30B-A3B", {"did you mean qwen3-30b-a3b?"});
    expect_refused("run --backend sim --model mixtral --out -", {"--model", "did you mean mixtral-8x7b"});
    expect_refused("plan --hardware h200", {"--hardware", "unknown hardware name", "did you mean h200-sxm"});
    expect_refused("run --config defualt", {"--config", "unknown run config name", "did you mean default?"});
    // Fields: of a run config, a hardware profile, a model, --set.
    expect_refused(
        "run --backend sim --config " + write_temp("typo-run.json", R"({"model": "mixtral-8x7b", "batchh": 4})"),
        {"batchh", "unknown run config field", "did you mean batch?"});
    json hw = read_json(kH200);
    hw["memory_bw_gbs"] = hw["memory_bw_gbps"];
    hw.erase("memory_bw_gbps");
    expect_refused("plan --hardware " + write_temp("typo-hw.json", hw.dump()),
                   {"memory_bw_gbs", "unknown hardware field", "did you mean memory_bw_gbps?"});
    json model = read_json(kTiny);
    model["hiden_size"] = model["hidden_size"];
    model.erase("hidden_size");
    expect_refused("plan --model " + write_temp("typo-model.json", model.dump()),
                   {"hiden_size", "unknown field", "did you mean hidden_size?"});
    expect_refused("sweep --model " + kTiny + " --set contxt=1,2", {"--set contxt", "did you mean context?"});
    // Nothing near: the list alone, no guess.
    const auto r = run_cli("plan --model zzzzzz");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, !Catch::Contains("did you mean"));
}

TEST_CASE("near_names: typos, case, prefixes and parts, best first; nothing far", "[dialect]") {
    using moebench::near_names;
    const std::vector<std::string> models = {"mixtral-8x7b", "mixtral-8x22b", "dbrx", "deepseek-v3", "qwen3-30b-a3b"};
    CHECK(near_names("mixtral", models) == std::vector<std::string>{"mixtral-8x7b", "mixtral-8x22b"});
    CHECK(near_names("MIXTRAL-8X7B", models) == std::vector<std::string>{"mixtral-8x7b"});  // case alone
    CHECK(near_names("dbxr", models) == std::vector<std::string>{"dbrx"});                  // a transposition
    CHECK(near_names("deepsek-v3", models) == std::vector<std::string>{"deepseek-v3"});     // a deletion
    CHECK(near_names("llama", models).empty());
    CHECK(near_names("", models).empty());
    CHECK(near_names("mixtral-8x7b", models) == std::vector<std::string>{"mixtral-8x22b"});  // itself left out
    // A name it begins comes before a closer typo: h200 -> h200-sxm before b200 and h20.
    CHECK(near_names("h200", {"b200", "h20", "h200-sxm", "mi300x"}) ==
          std::vector<std::string>{"h200-sxm", "b200", "h20"});
    CHECK(moebench::did_you_mean("batchh", {"batch", "seed"}, "use one of: batch, seed") ==
          "did you mean batch? Otherwise use one of: batch, seed");
    CHECK(moebench::did_you_mean("zzz", {"batch", "seed"}, "use one of: batch, seed") == "use one of: batch, seed");
}

TEST_CASE("the list and range syntax is named where a value was no number", "[cli][dialect]") {
    // sweep: an axis of a numeric field takes numbers, lists and ranges; 1-64 is named as the range 1..64.
    expect_refused("sweep --backend sim --model " + kTiny + " --batch 1-64",
                   {"--batch", "1-64", "1,2,4", "1..64", "write 1..64 (powers of two) or 1..64:+1"});
    expect_refused("sweep --backend sim --model " + kTiny + " --set batch=1-64", {"--set batch", "write 1..64"});
    expect_refused("sweep --backend sim --model " + kTiny + " --context 0,lots",
                   {"--context", "lots", "a list (1,2,4)"});
    expect_refused("sweep --backend sim --config " +
                       write_temp("axes.json", R"({"model": "mixtral-8x7b", "axes": {"batch": "1-8"}})"),
                   {"axes.batch", "write 1..8"});
    // run: one value; a list or range is a sweep's axis, named with the command that takes it.
    expect_refused(kSimRun + " --batch 1..64 --out -", {"--batch", "one value", "moebench sweep --batch 1..64"});
    expect_refused(kSimRun + " --batch 1,2,4 --out -", {"--batch", "a list (1,2,4)", "moebench sweep --batch 1,2,4"});
    expect_refused(kSimRun + " --batch 1-64 --out -", {"--batch", "moebench sweep --batch 1..64"});
    expect_refused(kSimRun + " --seed 1,2 --out -", {"--seed", "moebench sweep --set seed=1,2"});
}

TEST_CASE("a file of another kind is named with the flag it belongs to", "[cli][dialect]") {
    const std::string hf = kData + "/hf-configs/dbrx-base.json";
    // The issue's case: a hardware profile given as --model said "unknown field bf16_tflops".
    expect_refused("plan --model " + kH200,
                   {"--model", "is a hardware profile", "not a model", "pass it to --hardware"});
    expect_refused("run --backend sim --model " + kH200 + " --out -",
                   {"is a hardware profile", "pass it to --hardware"});
    expect_refused("plan --hardware " + kMixtral, {"--hardware", "is a model config", "pass it to --model"});
    expect_refused("plan --hardware " + hf, {"Hugging Face config.json", "pass it to --model"});
    expect_refused("plan --hardware " + kConfigs + "/runs/default.json", {"is a run config", "--config"});
    expect_refused("run --backend sim --config " + kMixtral, {"--config", "is a model config", "pass it to --model"});
    expect_refused("run --backend sim --config " + kConfigs + "/sweeps/tiny-smoke.json",
                   {"is a sweep config", "not a run config", "moebench sweep"});
    expect_refused("sweep --config " + kH200, {"--config", "is a hardware profile", "pass it to --hardware"});
    expect_refused("report " + kH200, {"is a hardware profile", "not a moebench report", "pass it to --hardware"});
    expect_refused("compare " + kMixtral + " " + kMixtral, {"is a model config", "not a moebench report"});
    expect_refused(kSimRun + " --ep 2 --placement " + kH200 + " --out -",
                   {"--placement", "is a hardware profile", "pass it to --hardware"});
    // What a command writes and no command reads: named with the command that wrote it.
    const std::string dir = temp_dir("dialect-kind");
    REQUIRE(run_cli("plan --format json -o " + dir + "/plan.json").exit_code == 0);
    expect_refused("plan --model " + dir + "/plan.json", {"moebench.plan/1", "moebench plan writes", "no input"});
    // A report where a model goes: where a report goes.
    REQUIRE(run_cli(kSimRun + " -o " + dir + "/r.json").exit_code == 0);
    expect_refused("plan --hardware " + dir + "/r.json",
                   {"is a moebench report", "moebench report", "moebench compare"});
}
