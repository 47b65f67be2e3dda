// SPDX-License-Identifier: Apache-2.0
// Robustness of the JSON layer every reader shares (common/json_util.hpp) and of the error text itself: nesting
// 100000 levels deep in any input file, a huge value echoed in a message, raw binary bytes in an error. Each is
// refused with a short printable message (exit 2), never a stack overflow; each failed before its fix.
#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "workload/trace.hpp"
#include "workload/trace_import.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using moebench::test::config_error_of;
using moebench::test::expect_refused_bounded;
using moebench::test::is_printable_utf8;
using moebench::test::run_cli;
using moebench::test::temp_dir;
using moebench::test::write_temp;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kMixtral = kData + "/hf-configs/mixtral-8x7b-v0.1.json";

std::string nested(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

}  // namespace

TEST_CASE("json_nesting_depth counts brackets outside strings only", "[robust]") {
    CHECK(json_nesting_depth("{}") == 1);
    CHECK(json_nesting_depth(R"({"a": [1, {"b": [[]]}]})") == 5);
    CHECK(json_nesting_depth(R"({"a": "[[[[[{{{{"})") == 1);         // inside a string
    CHECK(json_nesting_depth(R"({"a": "x\"[[[[", "b": 1})") == 1);   // an escaped quote does not end the string
    CHECK(json_nesting_depth(R"(["\\", [[]]])") == 3);               // an escaped backslash does
    CHECK(json_nesting_depth(nested(100000)) == kMaxJsonDepth + 1);  // stops counting past the limit
    CHECK(json_nesting_depth(nested(kMaxJsonDepth)) == kMaxJsonDepth);
    CHECK_NOTHROW(parse_json_text(nested(kMaxJsonDepth), "x"));
    CHECK_THAT(config_error_of([] { parse_json_text(nested(kMaxJsonDepth + 1), "in.json"); }),
               Catch::Contains("in.json") && Catch::Contains("nesting too deep"));
}

TEST_CASE("json_brief of a deep or huge value is short and does not recurse", "[robust]") {
    // 200000 levels built in memory (not parsed): dumping it whole recursed 200000 frames deep.
    json deep = json::array();
    json* at = &deep;
    for (int i = 0; i < 200000; ++i) {
        at->push_back(json::array());
        at = &(*at)[0];
    }
    const std::string b = json_brief(deep);
    CHECK(b.size() <= 60);
    CHECK_THAT(b, Catch::StartsWith("[[[["));
    CHECK(json_brief(json(std::string(10'000'000, 'x'))).size() <= 60);
    json wide = json::object();
    for (int i = 0; i < 100000; ++i) wide[std::to_string(i)] = i;
    CHECK(json_brief(wide).size() <= 60);
    // Small values read as before.
    CHECK(json_brief(json::parse(R"({"a":[1,2],"b":"x"})")) == R"({"a":[1,2],"b":"x"})");
    CHECK(json_brief(json(3.5)) == "3.5");
}

TEST_CASE("100000-level JSON in any input file is exit 2, not SIGSEGV", "[robust][cli]") {
    const std::string dir = temp_dir("deep");
    const std::string deep_value = dir + "/model.json";  // a value echoed in the error: "name" must be a string
    std::ofstream(deep_value) << "{\"name\": " << nested(100000) << "}";
    const std::string deep_doc = dir + "/doc.json";
    std::ofstream(deep_doc) << nested(100000);
    for (const std::string& f : {deep_value, deep_doc}) {
        expect_refused_bounded("plan --model " + f, {f, "nesting too deep"});
        expect_refused_bounded("plan --model " + kMixtral + " --hardware " + f, {f, "nesting too deep"});
        expect_refused_bounded("run --config " + f + " --out -", {f, "nesting too deep"});
        expect_refused_bounded("report " + f, {f, "nesting too deep"});
    }
    // A safetensors header nested deep.
    const std::string header = "{\"__metadata__\": {\"x\": " + nested(100000) + "}}";
    const uint64_t len = header.size();
    const std::string trace = dir + "/deep.safetensors";
    std::ofstream(trace, std::ios::binary).write(reinterpret_cast<const char*>(&len), 8) << header;
    expect_refused_bounded("trace info " + trace, {trace, "nesting too deep"});
    // A JSONL line nested deep is one malformed record among good ones.
    const std::string jsonl = dir + "/r.jsonl";
    std::ofstream(jsonl) << R"({"layer": 0, "token_idx": 0, "experts": [1, 2]})"
                         << "\n"
                         << "{\"layer\": 0, \"token_idx\": 1, \"experts\": " << nested(100000) << "}\n";
    ImportSummary s;
    const RoutingTrace t = import_trace(jsonl, 0, &s);
    CHECK(s.malformed == 1);
    CHECK(t.num_tokens == 1);
    REQUIRE_FALSE(s.examples.empty());
    CHECK_THAT(s.examples.front(), Catch::Contains("nested"));
    fs::remove_all(dir);
}

TEST_CASE("error messages never echo raw binary bytes", "[robust][errors]") {
    CHECK(printable(std::string("a\x01"
                                "b\xc3")) == "a\\x01b\\xc3");
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
