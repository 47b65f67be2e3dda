// SPDX-License-Identifier: Apache-2.0
// Trust II, defects 6 and 10, as a user meets them: names and paths that carry HTML reach the Markdown views escaped;
// nonsense model floats, control characters in names, NUL bytes in text traces and contradicting or unreadable sweep
// settings are refused (exit 2, naming the field, the value and the range or fix) instead of running.
#include "test_paths.hpp"
#include "cli_helpers.hpp"
#include "error_helpers.hpp"

#include "common/json_util.hpp"
#include "config/hardware.hpp"
#include "config/model_config.hpp"
#include "report/formats.hpp"
#include "workload/trace_import.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using moebench::test::config_error_of;
using moebench::test::read_text;
using moebench::test::run_cli;
using moebench::test::temp_dir;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";

json read_json(const std::string& path) { return json::parse(read_text(path)); }

std::string write_json(const std::string& path, const json& j) {
    std::ofstream(path) << j.dump(2);
    return path;
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Exit 2 with one error line that names each needle.
void expect_refused(const std::string& args, const std::vector<std::string>& needles) {
    const auto r = run_cli(args);
    INFO("moebench " << args << "\nstdout: " << r.out.substr(0, 2000) << "\nstderr: " << r.err.substr(0, 2000));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("moebench: error: "));
    for (const auto& n : needles) CHECK_THAT(r.err, Catch::Contains(n));
}

// No raw tag of the hostile names anywhere in a Markdown document (their escaped text is there instead).
void expect_no_raw_html(const std::string& md) {
    INFO(md.substr(0, 3000));
    CHECK(md.find("<script") == std::string::npos);
    CHECK(md.find("<img") == std::string::npos);
    CHECK(md.find("<b>") == std::string::npos);
}

}  // namespace

// ---- 6. Markdown ----------------------------------------------------------------------------------------------

TEST_CASE("md_cell: HTML as entities, pipes and backslashes escaped, control characters flattened",
          "[trust][formats]") {
    using formats_detail::md_cell;
    CHECK(md_cell("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;");
    CHECK(md_cell("a & b") == "a &amp; b");
    CHECK(md_cell("x|y") == "x\\|y");
    // A backslash of the text must not escape the pipe's escape (`\\|` would end the cell in GFM).
    CHECK(md_cell("x\\|y") == "x\\\\\\|y");
    CHECK(md_cell("two\nlines\r\x1b[31m") == "two lines  [31m");
    CHECK(md_cell("plain-name_1.5") == "plain-name_1.5");
}

TEST_CASE("md_code: a backtick in the text cannot end the code span", "[trust][formats]") {
    using formats_detail::md_code;
    CHECK(md_code("moebench run") == "`moebench run`");
    CHECK(md_code("a ` b") == "``a ` b``");
    CHECK(md_code("``x") == "``` ``x ```");
    CHECK(md_code("run\n\n<img src=x>") == "`run  <img src=x>`");  // a blank line would end the span early
}

TEST_CASE("report --format md: a hostile model name, path label and machine name reach it escaped",
          "[trust][formats][cli]") {
    const std::string dir = temp_dir("trust-md");
    json model = read_json(kTiny);
    model["name"] = "<script>alert(1)</script>";
    const std::string model_path = write_json(dir + "/evil-model.json", model);
    const std::string report_path = dir + "/r.json";
    auto r = run_cli("run --backend sim --model " + model_path + " --layers 1 --batch 2 --warmup 0 --iters 2 --out " +
                     report_path);
    REQUIRE(r.exit_code == 0);
    // What a report file may hold beyond what moebench writes: a trace path in a sweep label, a CPU model string.
    json report = read_json(report_path);
    report["runs"][0]["sweep_label"] = "routing=trace:\"><img src=x onerror=alert(1)>.safetensors";
    report["environment"]["cpu_model"] = "<b>Xeon</b> | 2 cores";
    report["command"] = "moebench run --model `<i>x</i>`";
    write_json(report_path, report);

    r = run_cli("report " + report_path + " --format md -o " + dir + "/r.md");
    REQUIRE(r.exit_code == 0);
    const std::string md = read_text(dir + "/r.md");
    expect_no_raw_html(md);
    CHECK_THAT(md, Catch::Contains("- model: &lt;script&gt;alert(1)&lt;/script&gt;"));
    CHECK_THAT(md, Catch::Contains("trace:\"&gt;&lt;img src=x onerror=alert(1)&gt;.safetensors"));
    CHECK_THAT(md, Catch::Contains("- machine: &lt;b&gt;Xeon&lt;/b&gt; \\| 2 cores"));
    CHECK_THAT(md, Catch::Contains("- command: `` moebench run --model `<i>x</i>` ``"));  // verbatim in its span

    // compare --format md: the report paths (A = ..., B = ...) and the labels.
    const std::string evil_dir = dir + "/\"><img src=x onerror=alert(1)>";
    fs::create_directories(evil_dir);
    fs::copy_file(report_path, evil_dir + "/b.json");
    r = run_cli("compare " + report_path + " '" + evil_dir + "/b.json' --format md -o " + dir + "/c.md");
    INFO(r.err);
    REQUIRE((r.exit_code == 0 || r.exit_code == 1));
    const std::string cmp = read_text(dir + "/c.md");
    expect_no_raw_html(cmp);
    CHECK_THAT(cmp, Catch::Contains("&gt;&lt;img src=x onerror=alert(1)&gt;/b.json"));
}

// ---- 10. Model floats -----------------------------------------------------------------------------------------

TEST_CASE("HF configs: a float beyond its plausible range is refused under its HF name", "[trust][config][cli]") {
    const std::string dir = temp_dir("trust-hf");
    struct Case {
        const char* file;
        const char* key;
        json value;
        const char* range;
    };
    const Case cases[] = {
        {"deepseek-v3.json", "routed_scaling_factor", 1e308, "0.01 to 1000"},
        {"mixtral-8x7b-v0.1.json", "rms_norm_eps", 1e308, "1e-12 to 0.1"},
        {"mixtral-8x7b-v0.1.json", "rms_norm_eps", 0.0, "1e-12 to 0.1"},
        {"mixtral-8x7b-v0.1.json", "rope_theta", 1e300, "100 to 1e+12"},
        {"gpt-oss-20b.json", "swiglu_limit", 1e308, "0 to 1000"},
        {"phi-3.5-moe-instruct.json", "router_jitter_noise", 1e308, "0 to 1"},
    };
    for (const Case& c : cases) {
        json j = read_json(kData + "/hf-configs/" + c.file);
        j[c.key] = c.value;
        const std::string path = write_json(dir + "/" + std::string(c.key) + "-" + c.file, j);
        expect_refused("plan --model " + path, {std::string(c.key), "plausible range (" + std::string(c.range) + ")",
                                                fmt::format("got {}", c.value.get<double>())});
    }
    // rope_scaling.factor, which moebench does not model, is still checked.
    json j = read_json(kData + "/hf-configs/deepseek-v3.json");
    j["rope_scaling"]["factor"] = 1e308;
    expect_refused("plan --model " + write_json(dir + "/rope-scaling.json", j),
                   {"rope_scaling.factor", "plausible range (0.01 to 10000)", "got 1e+308"});
}

TEST_CASE("own model schema: every float within its plausible range, refused by name beyond it", "[trust][config]") {
    const json tiny = read_json(kTiny);
    const auto refusal = [&](const std::vector<std::string>& path, const json& value) {
        json j = tiny;
        json* at = &j;
        for (size_t i = 0; i + 1 < path.size(); ++i) at = &(*at)[path[i]];
        (*at)[path.back()] = value;
        return config_error_of([&] { validate(model_from_json(j, "m.json"), "m.json"); });
    };
    CHECK_THAT(refusal({"norm_eps"}, 1e308),
               Catch::Contains("m.json.norm_eps: is outside the plausible range (1e-12 to 0.1)"));
    CHECK_THAT(refusal({"attention", "rope_theta"}, 1e308), Catch::Contains("m.json.attention.rope_theta"));
    CHECK_THAT(refusal({"attention", "rope_theta"}, 0.5), Catch::Contains("100 to 1e+12"));
    CHECK_THAT(refusal({"moe", "routed_scaling_factor"}, 1e308), Catch::Contains("m.json.moe.routed_scaling_factor"));
    CHECK_THAT(refusal({"moe", "routed_scaling_factor"}, 1e-300), Catch::Contains("got 1e-300"));
    CHECK_THAT(refusal({"swiglu_limit"}, 1e308), Catch::Contains("m.json.swiglu_limit"));
    CHECK_THAT(refusal({"norm_eps"}, 1e-5), Catch::Equals(""));
}

TEST_CASE("every real model config lies inside the plausible ranges", "[trust][config]") {
    size_t loaded = 0;
    for (const std::string& folder : {std::string(MOEBENCH_SOURCE_DIR) + "/configs/models", kData + "/hf-configs"})
        for (const auto& e : fs::directory_iterator(folder)) {
            if (e.path().extension() != ".json") continue;
            INFO(e.path().string());
            CHECK_NOTHROW(load_model(e.path().string()));
            ++loaded;
        }
    CHECK(loaded > 60);
}

// ---- 10. Names ------------------------------------------------------------------------------------------------

TEST_CASE("names with control characters are refused for models and hardware profiles alike", "[trust][config][cli]") {
    const std::string dir = temp_dir("trust-names");
    const json h200 = read_json(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware/h200-sxm.json");
    for (const char* key : {"name", "display_name", "scaleup_name"}) {
        json hw = h200;
        hw[key] = "H200\nInjected line";
        expect_refused("plan --hardware " + write_json(dir + "/hw-" + key + ".json", hw),
                       {std::string("hw-") + key + ".json." + key, "control character at byte 4", "H200\\x0aInjected"});
    }
    json hw = h200;
    hw["display_name"] = "H200 \xe2\x80\xae" "evil";  // right-to-left override
    expect_refused("plan --hardware " + write_json(dir + "/hw-bidi.json", hw),
                   {"display_name", "bidirectional override"});
    // A profile named after its file: the file name is checked too.
    json unnamed = h200;
    unnamed.erase("name");
    const std::string odd = dir + "/odd\x1b[2Jname.json";
    write_json(odd, unnamed);
    expect_refused("plan --hardware '" + odd + "'", {"control character"});

    json model = read_json(kTiny);
    model["name"] = "tiny\nmodel";
    expect_refused("plan --model " + write_json(dir + "/model-name.json", model),
                   {"model-name.json.name", "control character"});
    model = read_json(kTiny);
    model["family"] = "mixtral\r";
    expect_refused("plan --model " + write_json(dir + "/model-family.json", model), {"model-family.json.family"});
}

// ---- 10. Text traces ------------------------------------------------------------------------------------------

TEST_CASE("text traces: NUL bytes and trailing junk in numbers are refused, not read as numbers",
          "[trust][trace][cli]") {
    const std::string dir = temp_dir("trust-trace");
    // A file of NUL bytes was "1 layer x 1 token, expert 0"; `3\0junk` was expert 3.
    write_bytes(dir + "/zeros.txt", std::string(64, '\0'));
    expect_refused("trace convert " + dir + "/zeros.txt -o " + dir + "/z.safetensors",
                   {"zeros.txt:1", "control byte 0x00 at column 1"});
    CHECK_FALSE(fs::exists(dir + "/z.safetensors"));
    write_bytes(dir + "/nul.txt", std::string("0 1\n3\0junk 1\n", 13));
    expect_refused("trace convert " + dir + "/nul.txt -o " + dir + "/n.safetensors", {"nul.txt:2", "column 2"});
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

// ---- 10. Sweep settings ---------------------------------------------------------------------------------------

TEST_CASE("sweep: --set of a field that a flag also sets is refused, naming both", "[trust][sweep][cli]") {
    const std::string dir = temp_dir("trust-sweep-set");
    const std::string out = " --backend sim --warmup 0 --iters 1 --quiet --out " + dir + "/s.json";
    expect_refused("sweep --model " + kTiny + " --set model=mixtral-8x7b" + out,
                   {"--model", "--set model=mixtral-8x7b", "both set run config field model"});
    expect_refused("sweep --model " + kTiny + " --batch 1 --set batch=2,4" + out, {"--batch", "--set batch=2,4"});
    expect_refused("sweep --model " + kTiny + " --set batch=1 --set batch=2" + out, {"--set batch=1", "--set batch=2"});
    CHECK_FALSE(fs::exists(dir + "/s.json"));
    CHECK_FALSE(fs::exists(dir + "/s.jsonl"));
}

TEST_CASE("sweep: a one-valued --set replaces the config's axis of that field", "[trust][sweep][cli]") {
    const std::string dir = temp_dir("trust-sweep-axis");
    const std::string cfg = write_json(dir + "/cfg.json", {{"model", kTiny}, {"backend", "sim"}, {"warmup", 0},
                                                           {"iters", 1}, {"axes", {{"batch", {1, 2}}}}});
    const auto r = run_cli("sweep --config " + cfg + " --set batch=4 --quiet --out " + dir + "/s.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json report = read_json(dir + "/s.json");
    REQUIRE(report["runs"].size() == 1);  // was 2 points of batch 1 and 2, the --set unused
    CHECK(report["runs"][0]["batch"] == 4);
}

TEST_CASE("sweep: a point naming a missing model, hardware or routing stops the sweep before it runs",
          "[trust][sweep][cli]") {
    const std::string dir = temp_dir("trust-sweep-missing");
    const std::string out = " --backend sim --warmup 0 --iters 1 --batch 1 --quiet --out " + dir + "/s.json";
    // Was: the missing point skipped, the tiny model run, exit 0.
    expect_refused("sweep --set model=" + dir + "/missing.json," + kTiny + out,
                   {"sweep point model=" + dir + "/missing.json", "file not found"});
    expect_refused("sweep --model " + kTiny + " --routing bogus,uniform" + out,
                   {"sweep point ", "routing=bogus", "unknown routing kind 'bogus'"});
    expect_refused("sweep --model " + kTiny + " --routing uniform,trace:" + dir + "/none.safetensors" + out,
                   {"routing=trace:", "none.safetensors"});
    expect_refused("sweep --model " + kTiny + " --set hardware=h200-sxm," + dir + "/none.json" + out,
                   {"none.json", "file not found"});
    expect_refused("sweep --model " + kTiny + " --layers 1,3" + out,
                   {"sweep point ", "layers=3", "exceeds the 2 layers"});
    CHECK_FALSE(fs::exists(dir + "/s.json"));
    CHECK_FALSE(fs::exists(dir + "/s.jsonl"));
}
