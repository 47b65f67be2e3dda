// SPDX-License-Identifier: Apache-2.0
// Bad input end to end: each class runs the real binary and must give exit 2 and one line
// "moebench: error: <field>: ..." naming the field, never a crash, a stack trace or an internal error.
#include "test_paths.hpp"
#include "cli_helpers.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

using json = nlohmann::json;
using moebench::test::run_cli;
using moebench::test::write_temp;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kMixtral = kData + "/hf-configs/mixtral-8x7b-v0.1.json";

json mixtral() {
    return json::parse(moebench::test::read_text(kMixtral));
}

std::string write_json(const std::string& name, const json& j) { return write_temp(name, j.dump(2)); }

// Runs `moebench <args>` and checks the contract of a refused input: exit 2, one error line, names each of `needles`.
void expect_refused(const std::string& args, const std::vector<std::string>& needles) {
    auto r = run_cli(args);
    INFO("moebench " << args << "\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("moebench: error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line
    for (const auto& n : needles) CHECK_THAT(r.err, Catch::Contains(n));
    CHECK_THAT(r.err, !Catch::Contains("internal error") && !Catch::Contains("terminate") &&
                          !Catch::Contains("Segmentation"));
}

// Either of two names for the same field is fine (own schema vs Hugging Face key).
void expect_refused_any(const std::string& args, const std::vector<std::string>& any_of) {
    auto r = run_cli(args);
    INFO("moebench " << args << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("moebench: error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    bool named = false;
    for (const auto& n : any_of) named = named || r.err.find(n) != std::string::npos;
    CHECK(named);
}

}  // namespace

TEST_CASE("bad input: a model file that is not JSON", "[bad_input][cli]") {
    std::string path = write_temp("broken.json", "{\"model_type\": \"mixtral\", \"hidden_size\": 40");
    expect_refused("plan --model " + path, {path, "JSON"});
}

TEST_CASE("bad input: a missing file", "[bad_input][cli]") {
    expect_refused("plan --model /nonexistent/dir/config.json", {"--model", "/nonexistent/dir/config.json"});
    expect_refused("plan --hardware /nonexistent/gpu.json --model " + kMixtral, {"--hardware", "/nonexistent/gpu.json"});
}

TEST_CASE("bad input: a missing required field", "[bad_input][cli]") {
    json j = mixtral();
    j.erase("hidden_size");
    expect_refused("plan --model " + write_json("config.json", j), {"hidden_size"});
}

TEST_CASE("bad input: a wrong type", "[bad_input][cli]") {
    json j = mixtral();
    j["num_hidden_layers"] = "thirty-two";
    expect_refused("plan --model " + write_json("config.json", j), {"num_hidden_layers", "thirty-two"});
}

TEST_CASE("bad input: top-k larger than the expert count", "[bad_input][cli]") {
    json j = mixtral();
    j["num_experts_per_tok"] = 9;
    expect_refused_any("plan --model " + write_json("config.json", j), {"num_experts_per_tok", "top_k"});
}

TEST_CASE("bad input: zero and negative sizes", "[bad_input][cli]") {
    json j = mixtral();
    j["hidden_size"] = 0;
    expect_refused("plan --model " + write_json("config.json", j), {"hidden_size"});
    j = mixtral();
    j["intermediate_size"] = -14336;
    expect_refused("plan --model " + write_json("config.json", j), {"intermediate_size"});
    j = mixtral();
    j["num_local_experts"] = 0;
    expect_refused_any("plan --model " + write_json("config.json", j), {"num_local_experts", "num_experts"});
}

TEST_CASE("bad input: an EP size that does not divide the experts", "[bad_input][cli]") {
    expect_refused("plan --model " + kMixtral + " --ep 3", {"--ep", "3", "1, 2, 4, 8"});
    expect_refused("plan --model " + kMixtral + " --ep 16", {"--ep", "16"});
}

TEST_CASE("bad input: an unknown model_type lists the supported ones", "[bad_input][cli]") {
    json j = mixtral();
    j["model_type"] = "frobnicator";
    j["architectures"] = {"FrobnicatorForCausalLM"};
    expect_refused("plan --model " + write_json("config.json", j), {"model_type", "frobnicator", "mixtral", "deepseek_v3"});
}

TEST_CASE("bad input: unknown short names list what exists", "[bad_input][cli]") {
    expect_refused("plan --model " + kMixtral + " --hardware h900", {"--hardware", "h900", "h200-sxm", "mi300x"});
    expect_refused("plan --model no-such-model-name", {"--model", "no-such-model-name"});
}

TEST_CASE("bad input: a malformed hardware profile", "[bad_input][cli]") {
    json hw = {{"memory_gib", 80}, {"memory_bw_gbps", "fast"}, {"bf16_tflops", 900}};
    expect_refused("plan --model " + kMixtral + " --hardware " + write_json("gpu.json", hw), {"memory_bw_gbps", "fast"});
    hw = {{"memory_gib", 80}, {"bf16_tflops", 900}};
    expect_refused("plan --model " + kMixtral + " --hardware " + write_json("gpu.json", hw), {"memory_bw_gbps"});
}

TEST_CASE("bad input: bad flag values", "[bad_input][cli]") {
    expect_refused("plan --model " + kMixtral + " --dtype foo", {"--dtype", "foo", "bf16"});
    expect_refused("plan --model " + kMixtral + " --kv-dtype int3", {"--kv-dtype", "int3"});
    expect_refused("plan --model " + kMixtral + " --ep 0", {"--ep", "0"});
    expect_refused("plan --model " + kMixtral + " --tp -2", {"--tp", "-2"});
    expect_refused("plan --model " + kMixtral + " --batch -1", {"--batch", "-1"});
    expect_refused("plan --model " + kMixtral + " --batch 2x", {"--batch", "2x"});
    expect_refused("plan --model " + kMixtral + " --context 0", {"--context", "0"});
    expect_refused("plan --model " + kMixtral + " --format yaml", {"--format", "yaml"});
    expect_refused("devices --format yaml", {"--format", "yaml"});
}

TEST_CASE("devices reports the CPU and host memory, and GPUs or why none", "[devices][cli]") {
    auto r = run_cli("devices --format json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    json j = json::parse(r.out);
    CHECK(j.at("schema") == "moebench.devices/1");
    CHECK(j.at("cpu").at("logical_cpus_online").get<int64_t>() >= 1);
    CHECK(j.at("memory").at("total_bytes").get<int64_t>() > 0);
    const json& g = j.at("gpus");
    CHECK(g.at("available").is_boolean());
    if (!g.at("available").get<bool>()) CHECK(!g.at("reason").get<std::string>().empty());
    auto t = run_cli("devices");
    CHECK(t.exit_code == 0);
    CHECK_THAT(t.out, Catch::Contains("GPUs:") && Catch::Contains("CPU:") && Catch::Contains("Memory:"));
}
