// SPDX-License-Identifier: Apache-2.0
// Robustness of the model readers: moebench's own model JSON and Hugging Face config.json (and a config path that is
// not JSON, not there, too large, a weights file or of binary bytes). Each case runs a reader on a bad input and
// needs a clear refusal (exit 2, naming the field, the value and the fix), never a crash, a hang or a silent default;
// each failed before its fix.
#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/paths.hpp"
#include "common/read_file.hpp"
#include "common/tensor_file.hpp"
#include "config/model_config.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using moebench::test::config_error_of;
using moebench::test::expect_exit2;
using moebench::test::expect_refused;
using moebench::test::expect_refused_any;
using moebench::test::expect_refused_bounded;
using moebench::test::expect_refused_one_line;
using moebench::test::fuzz_file;
using moebench::test::journal_line;
using moebench::test::read_json;
using moebench::test::read_text;
using moebench::test::run_capped;
using moebench::test::run_cli;
using moebench::test::seconds_since;
using moebench::test::temp_dir;
using moebench::test::write_json;
using moebench::test::write_temp;
using moebench::test::write_temp_json;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";
const std::string kMixtral = kData + "/hf-configs/mixtral-8x7b-v0.1.json";

json mixtral() { return json::parse(moebench::test::read_text(kMixtral)); }

}  // namespace

TEST_CASE("a model file that is not JSON", "[robust][cli]") {
    std::string path = write_temp("broken.json", "{\"model_type\": \"mixtral\", \"hidden_size\": 40");
    expect_refused_one_line("plan --model " + path, {path, "JSON"});
}

TEST_CASE("a missing file", "[robust][cli]") {
    expect_refused_one_line("plan --model /nonexistent/dir/config.json", {"--model", "/nonexistent/dir/config.json"});
    expect_refused_one_line("plan --hardware /nonexistent/gpu.json --model " + kMixtral,
                            {"--hardware", "/nonexistent/gpu.json"});
}

TEST_CASE("a missing required field", "[robust][cli]") {
    json j = mixtral();
    j.erase("hidden_size");
    expect_refused_one_line("plan --model " + write_temp_json("config.json", j), {"hidden_size"});
}

TEST_CASE("a wrong type", "[robust][cli]") {
    json j = mixtral();
    j["num_hidden_layers"] = "thirty-two";
    expect_refused_one_line("plan --model " + write_temp_json("config.json", j), {"num_hidden_layers", "thirty-two"});
}

TEST_CASE("top-k larger than the expert count", "[robust][cli]") {
    json j = mixtral();
    j["num_experts_per_tok"] = 9;
    expect_refused_any("plan --model " + write_temp_json("config.json", j), {"num_experts_per_tok", "top_k"});
}

TEST_CASE("zero and negative sizes", "[robust][cli]") {
    json j = mixtral();
    j["hidden_size"] = 0;
    expect_refused_one_line("plan --model " + write_temp_json("config.json", j), {"hidden_size"});
    j = mixtral();
    j["intermediate_size"] = -14336;
    expect_refused_one_line("plan --model " + write_temp_json("config.json", j), {"intermediate_size"});
    j = mixtral();
    j["num_local_experts"] = 0;
    expect_refused_any("plan --model " + write_temp_json("config.json", j), {"num_local_experts", "num_experts"});
}

TEST_CASE("an unknown model_type lists the supported ones", "[robust][cli]") {
    json j = mixtral();
    j["model_type"] = "frobnicator";
    j["architectures"] = {"FrobnicatorForCausalLM"};
    expect_refused_one_line("plan --model " + write_temp_json("config.json", j),
                            {"model_type", "frobnicator", "mixtral", "deepseek_v3"});
}

TEST_CASE("unknown short names list what exists", "[robust][cli]") {
    expect_refused_one_line("plan --model " + kMixtral + " --hardware h900",
                            {"--hardware", "h900", "h200-sxm", "mi300x"});
    expect_refused_one_line("plan --model no-such-model-name", {"--model", "no-such-model-name"});
}

TEST_CASE("model sizes are bounded before they size the per-layer lists", "[robust][cli]") {
    json m = load_json_file(kTiny);
    m["num_layers"] = 1'000'000'000'000LL;  // the dense_layers mask was allocated at this length
    const std::string path = write_temp("huge-layers.json", m.dump());
    auto r = run_capped("plan --model " + path, 2'000'000);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("num_layers") && Catch::Contains("1000000000000"));
}

TEST_CASE("a 20 GB sparse file as --model is refused at once", "[robust][cli]") {
    const std::string dir = temp_dir("sparse");
    const std::string big = dir + "/config.json";
    { std::ofstream(big) << "{"; }
    fs::resize_file(big, int64_t{20} << 30);  // sparse: no disk used
    const auto t0 = std::chrono::steady_clock::now();
    expect_refused_bounded("plan --model " + big, {big, "20.0 GiB", "64.0 MiB"});
    expect_refused_bounded("plan --model " + kMixtral + " --hardware " + big, {big, "JSON config"});
    expect_refused_bounded("run --config " + big + " --out -", {big, "JSON config"});
    CHECK(seconds_since(t0) < 10);  // was 30 s and 2 GB per read
    CHECK_THAT(config_error_of([&] { read_file_bytes(big, 1000, "a thing"); }),
               Catch::Contains("a thing") && Catch::Contains("1000 B"));
    fs::remove_all(dir);
}

TEST_CASE("a safetensors or binary file given as a config says what it is", "[robust][cli]") {
    const std::string dir = temp_dir("weights");
    TensorFile f;
    const std::vector<float> w(64, 0.5f);
    f.tensors.push_back(NamedTensor::f32("model.layers.0.mlp.gate.weight", {8, 8}, w.data()));
    const std::string weights = dir + "/model-00001-of-00002.safetensors";
    write_safetensors(weights, f);
    expect_refused_bounded("plan --model " + weights, {weights, "safetensors", "config.json"});
    expect_refused_bounded("run --model " + weights + " --out -", {weights, "safetensors"});
    const std::string binary = dir + "/zeros.json";
    std::ofstream(binary, std::ios::binary) << std::string(100, '\0');
    expect_refused_bounded("plan --model " + binary, {binary, "binary"});
    fs::remove_all(dir);
}

TEST_CASE("mutated Hugging Face configs load or raise ConfigError only", "[robust][fuzz]") {
    const std::string dir = temp_dir("qa-fuzz");
    for (const char* name : {"deepseek-v3.json", "mixtral-8x7b-v0.1.json", "llama4-scout-17b-16e.json",
                             "gpt-oss-20b.json", "dbrx-base.json", "qwen2-57b-a14b.json"}) {
        const std::string seed_text = read_text(std::string(MOEBENCH_SOURCE_DIR) + "/tests/data/hf-configs/" + name);
        REQUIRE(!seed_text.empty());
        fuzz_file(seed_text, dir + "/config.json", 60, std::hash<std::string>{}(name),
                  [](const std::string& p) { (void)load_model(p); });
    }
    fs::remove_all(dir);
}

TEST_CASE("mutated own model files load or raise ConfigError only", "[robust][fuzz]") {
    const std::string dir = temp_dir("qa-fuzz");
    for (const char* name : {"tiny-mla.json", "tiny-gpt-oss.json", "tiny-dense-first.json"}) {
        const std::string seed_text = read_text(std::string(MOEBENCH_SOURCE_DIR) + "/tests/data/models/" + name);
        REQUIRE(!seed_text.empty());
        fuzz_file(seed_text, dir + "/model.json", 80, std::hash<std::string>{}(name) + 1,
                  [](const std::string& p) { (void)load_model(p); });
    }
    fs::remove_all(dir);
}

TEST_CASE("a number beyond double range in an input JSON is a ConfigError", "[robust][config]") {
    // nlohmann throws out_of_range 406 (not parse_error) for 1e400: it was an internal error, exit 1.
    std::string text = read_text(kData + "/hf-configs/mixtral-8x7b-v0.1.json");
    const auto at = text.find("\"hidden_size\": 4096");
    REQUIRE(at != std::string::npos);
    text.replace(at, std::string("\"hidden_size\": 4096").size(), "\"hidden_size\": 1e400");
    const std::string path = write_temp("config.json", text);
    expect_refused("plan --model " + path, {path, "not valid JSON", "1e400"});
    const std::string journal = write_temp("j.jsonl", journal_line("1e400") + "\n" + journal_line("\"k\"") + "\n");
    expect_refused("report " + journal, {journal + ":1"});
}

TEST_CASE("a project path in a shipped config resolves from any folder", "[robust][config]") {
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

TEST_CASE("HF configs: a float beyond its plausible range is refused under its HF name", "[robust][config][cli]") {
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
        expect_exit2("plan --model " + path, {std::string(c.key), "plausible range (" + std::string(c.range) + ")",
                                              fmt::format("got {}", c.value.get<double>())});
    }
    // rope_scaling.factor, which moebench does not model, is still checked.
    json j = read_json(kData + "/hf-configs/deepseek-v3.json");
    j["rope_scaling"]["factor"] = 1e308;
    expect_exit2("plan --model " + write_json(dir + "/rope-scaling.json", j),
                 {"rope_scaling.factor", "plausible range (0.01 to 10000)", "got 1e+308"});
}

TEST_CASE("own model schema: every float within its plausible range, refused by name beyond it", "[robust][config]") {
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

TEST_CASE("every real model config lies inside the plausible ranges", "[robust][config]") {
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

TEST_CASE("names with control characters are refused for models and hardware profiles alike", "[robust][config][cli]") {
    const std::string dir = temp_dir("trust-names");
    const json h200 = read_json(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware/h200-sxm.json");
    for (const char* key : {"name", "display_name", "scaleup_name"}) {
        json hw = h200;
        hw[key] = "H200\nInjected line";
        expect_exit2("plan --hardware " + write_json(dir + "/hw-" + key + ".json", hw),
                     {std::string("hw-") + key + ".json." + key, "control character at byte 4", "H200\\x0aInjected"});
    }
    json hw = h200;
    hw["display_name"] =
        "H200 \xe2\x80\xae"
        "evil";  // right-to-left override
    expect_exit2("plan --hardware " + write_json(dir + "/hw-bidi.json", hw),
                 {"display_name", "bidirectional override"});
    // A profile named after its file: the file name is checked too.
    json unnamed = h200;
    unnamed.erase("name");
    const std::string odd = dir + "/odd\x1b[2Jname.json";
    write_json(odd, unnamed);
    expect_exit2("plan --hardware '" + odd + "'", {"control character"});

    json model = read_json(kTiny);
    model["name"] = "tiny\nmodel";
    expect_exit2("plan --model " + write_json(dir + "/model-name.json", model),
                 {"model-name.json.name", "control character"});
    model = read_json(kTiny);
    model["family"] = "mixtral\r";
    expect_exit2("plan --model " + write_json(dir + "/model-family.json", model), {"model-family.json.family"});
}
