// SPDX-License-Identifier: Apache-2.0
// Mutation fuzzing of the input parsers (HF config.json, own model JSON, safetensors traces, run configs):
// every mutated input must either load or raise ConfigError, never another exception or a crash.
#include "test_paths.hpp"
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "workload/trace.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using namespace moebench;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
}

// One random edit: flip a byte, delete a span, duplicate a span, truncate, or splice a token that tends to
// break a type ("-1", "1e300", "null", "[]", "\"x\"", a huge integer, invalid UTF-8).
std::string mutate(std::string s, std::mt19937_64& rng) {
    static const char* tokens[] = {"-1", "0", "1e300", "null", "[]", "{}", "\"x\"", "99999999999999999999",
                                   "4.5", "1e400", "true", "\xff\xfe", "\"\\u0000\"", "1e-300", "-0"};
    if (s.empty()) return "{";
    auto pos = [&](size_t n) { return static_cast<size_t>(rng() % (n + 1)); };
    switch (rng() % 6) {
        case 0: s[pos(s.size() - 1)] = static_cast<char>(rng() & 0xff); break;
        case 1: { size_t a = pos(s.size()); s.erase(a, rng() % 16); break; }
        case 2: { size_t a = pos(s.size()); s.insert(a, s.substr(a, rng() % 24)); break; }
        case 3: s.resize(pos(s.size())); break;
        default: {
            // Replace a number-ish run (digits) with a token: hits value checks rather than the JSON lexer.
            size_t a = pos(s.size() - 1);
            size_t d = s.find_first_of("0123456789", a);
            if (d == std::string::npos) d = a;
            size_t e = s.find_first_not_of("0123456789.", d);
            if (e == std::string::npos) e = s.size();
            s.replace(d, std::max<size_t>(e - d, 1), tokens[rng() % (sizeof tokens / sizeof *tokens)]);
        }
    }
    return s;
}

// Runs `load` on `rounds` mutations of `seed_text`; counts loads and ConfigErrors; any other exception fails.
void fuzz_file(const std::string& seed_text, const std::string& path, int rounds, uint64_t seed,
               const std::function<void(const std::string&)>& load) {
    std::mt19937_64 rng(seed);
    int ok = 0, refused = 0;
    for (int i = 0; i < rounds; ++i) {
        std::string text = seed_text;
        const int edits = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < edits; ++e) text = mutate(text, rng);
        spit(path, text);
        try {
            load(path);
            ++ok;
        } catch (const ConfigError& e) {
            ++refused;
            // One line, and printable: a message that echoes raw garbage bytes is not a clear message.
            std::string msg = e.what();
            INFO("round " << i << ": " << msg);
            CHECK(msg.find('\n') == std::string::npos);
        } catch (const std::exception& e) {
            FAIL("round " << i << ": not a ConfigError: " << e.what() << "\ninput: " << text.substr(0, 400));
        }
    }
    INFO("ok " << ok << " refused " << refused);
    CHECK(ok + refused == rounds);
    CHECK(refused > 0);  // the mutations do break things, so the test is not vacuous
}

std::string tmp_dir() {
    fs::path d = fs::temp_directory_path() / ("moebench-qa-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d.string();
}

}  // namespace

TEST_CASE("mutated Hugging Face configs load or raise ConfigError only", "[qa][fuzz]") {
    const std::string dir = tmp_dir();
    for (const char* name : {"deepseek-v3.json", "mixtral-8x7b-v0.1.json", "llama4-scout-17b-16e.json",
                             "gpt-oss-20b.json", "dbrx-base.json", "qwen2-57b-a14b.json"}) {
        const std::string seed_text = slurp(std::string(MOEBENCH_SOURCE_DIR) + "/tests/data/hf-configs/" + name);
        REQUIRE(!seed_text.empty());
        fuzz_file(seed_text, dir + "/config.json", 60, std::hash<std::string>{}(name),
                  [](const std::string& p) { (void)load_model(p); });
    }
    fs::remove_all(dir);
}

TEST_CASE("mutated own model files load or raise ConfigError only", "[qa][fuzz]") {
    const std::string dir = tmp_dir();
    for (const char* name : {"tiny-mla.json", "tiny-gpt-oss.json", "tiny-dense-first.json"}) {
        const std::string seed_text = slurp(std::string(MOEBENCH_SOURCE_DIR) + "/tests/data/models/" + name);
        REQUIRE(!seed_text.empty());
        fuzz_file(seed_text, dir + "/model.json", 80, std::hash<std::string>{}(name) + 1,
                  [](const std::string& p) { (void)load_model(p); });
    }
    fs::remove_all(dir);
}

TEST_CASE("mutated safetensors traces load or raise ConfigError only", "[qa][fuzz]") {
    const std::string dir = tmp_dir();
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
    const std::string seed_text = slurp(good);
    REQUIRE(read_trace(good).num_tokens == 6);
    fuzz_file(seed_text, dir + "/t.safetensors", 300, 7, [](const std::string& p) { (void)read_trace(p); });
    fs::remove_all(dir);
}

TEST_CASE("mutated run configs load or raise ConfigError only", "[qa][fuzz]") {
    const std::string dir = tmp_dir();
    const std::string seed_text = slurp(std::string(MOEBENCH_SOURCE_DIR) + "/configs/runs/default.json");
    REQUIRE(!seed_text.empty());
    fuzz_file(seed_text, dir + "/run.json", 200, 11, [](const std::string& p) {
        RunConfig cfg = run_config_from_json(load_json_file(p), p);
        validate(cfg);
    });
    fs::remove_all(dir);
}
