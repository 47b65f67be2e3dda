// SPDX-License-Identifier: Apache-2.0
// `trace convert` of the routed-expert dumps vLLM, SGLang and Megatron write (tests/data/engine-dumps, made from the
// engines' field definitions): each round-trips to the routing it encodes, written out here by hand; malformed dumps
// are exit 2 naming the file, the field and the fix; the .npy reader survives mutated bytes.
#include "cli_helpers.hpp"
#include "common/error.hpp"
#include "common/npy.hpp"
#include "test_paths.hpp"
#include "workload/trace.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <random>

using namespace moebench;
using moebench::test::run_cli;

namespace {

const std::string kDumps = std::string(MOEBENCH_TEST_DATA) + "/engine-dumps/";
const std::string kModels = std::string(MOEBENCH_TEST_DATA) + "/models/";

// R[t][l][k] of every sample (tests/data/engine-dumps/README.md).
const std::vector<std::vector<std::vector<int32_t>>> kR = {{{3, 7}, {0, 5}}, {{3, 1}, {2, 5}}, {{6, 7}, {0, 4}}};

// A .npy v1.0 image of `values` with `descr` and `shape`, header padded as numpy pads it.
std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data,
                      const std::string& fortran = "False") {
    std::string header = "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    return out + header + data;
}

std::string write_bytes(const std::string& name, const std::string& bytes) {
    const std::string path = test::temp_dir("dump") + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

std::string write_temp_json(const std::string& name, const std::string& text) { return write_bytes(name, text); }

void expect_trace_is_r(const RoutingTrace& t) {
    REQUIRE(t.num_layers == 2);
    REQUIRE(t.num_tokens == 3);
    REQUIRE(t.top_k == 2);
    CHECK(t.num_experts == 8);
    for (int64_t l = 0; l < 2; ++l)
        for (int64_t tok = 0; tok < 3; ++tok)
            for (int64_t j = 0; j < 2; ++j) {
                INFO("layer " << l << " token " << tok << " slot " << j);
                CHECK(t.layer_ids(l)[tok * 2 + j] ==
                      kR[static_cast<size_t>(tok)][static_cast<size_t>(l)][static_cast<size_t>(j)]);
            }
}

void expect_refused(const std::string& args, const std::vector<std::string>& needles) {
    const auto r = run_cli("trace convert " + args + " -o " + test::temp_dir("refused") + "/t.safetensors");
    INFO("args: " << args << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    for (const auto& n : needles) CHECK(r.err.find(n) != std::string::npos);
}

}  // namespace

TEST_CASE("trace convert: every engine's dump round-trips to the routing it encodes", "[engine_dumps]") {
    const std::string dir = test::temp_dir("convert");
    for (const std::string file :
         {"vllm_r3_routing_u8.npy", "vllm_r3_completion_response.json", "vllm_v021_completion_response.json",
          "sglang_generate_int32.json", "sglang_generate_uint8.json", "megatron_router_trace_rank0.jsonl",
          "megatron_chat_completion.json"}) {
        INFO(file);
        const auto r = run_cli("trace convert " + kDumps + file + " --model " + kModels + "tiny-e8.json -o " + dir +
                               "/t.safetensors");
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        const RoutingTrace t = read_trace(dir + "/t.safetensors");
        expect_trace_is_r(t);
        CHECK(t.model == "tiny-e8");
        CHECK(t.seq_starts == std::vector<int64_t>{0});
        CHECK(model_layers_of(t) == std::vector<int64_t>{0, 1});
    }
    // Without --model: the layer axis taken whole, the expert count the largest id + 1 (7 + 1) unless given.
    const auto r = run_cli("trace convert " + kDumps + "vllm_r3_completion_response.json -o " + dir + "/n.safetensors");
    REQUIRE(r.exit_code == 0);
    expect_trace_is_r(read_trace(dir + "/n.safetensors"));
    // --model that resolves to no model: stored as the name, and said, with the names it nearly matches.
    const auto named = run_cli("trace convert " + kDumps + "vllm_r3_completion_response.json --model mixtral -o " +
                               dir + "/m.safetensors");
    REQUIRE(named.exit_code == 0);
    CHECK(read_trace(dir + "/m.safetensors").model == "mixtral");
    CHECK_THAT(named.err, Catch::Contains("--model mixtral is stored as the trace's model name only") &&
                              Catch::Contains("did you mean mixtral-8x7b or mixtral-8x22b?"));
}

TEST_CASE("trace convert: a dump's dense-layer rows are dropped by the model, not by the data", "[engine_dumps]") {
    // [T=2, L=3, K=2] <i2: layer 0 is dense (placeholder -1), layers 1 and 2 route.
    const std::vector<int16_t> v = {-1, -1, 1, 2, 3, 4, -1, -1, 5, 6, 7, 0};
    std::string data(reinterpret_cast<const char*>(v.data()), v.size() * 2);
    const std::string npy = write_bytes("d.npy", npy_bytes("<i2", "(2, 3, 2)", data));
    const std::string out = test::temp_dir("dense") + "/t.safetensors";
    const auto r = run_cli("trace convert " + npy + " --model " + kModels + "tiny-e8-dense-first.json -o " + out);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const RoutingTrace t = read_trace(out);
    REQUIRE(t.num_layers == 2);
    CHECK(model_layers_of(t) == std::vector<int64_t>{1, 2});
    CHECK(std::vector<int32_t>(t.layer_ids(0), t.layer_ids(0) + 4) == std::vector<int32_t>{1, 2, 5, 6});
    CHECK(std::vector<int32_t>(t.layer_ids(1), t.layer_ids(1) + 4) == std::vector<int32_t>{3, 4, 7, 0});
    // A layer count that is neither the model's layers nor its MoE layers is refused, naming both.
    expect_refused(npy + " --model " + kModels + "tiny-e8.json", {"d.npy", "3 layers", "2 layers", "--model"});
}

TEST_CASE("npy: header versions, signed and unsigned widths, and refusals naming the field", "[engine_dumps]") {
    const std::vector<int16_t> v = {-1, 300, 7, -32768};
    const NpyArray a =
        parse_npy(npy_bytes("<i2", "(2, 2)", std::string(reinterpret_cast<const char*>(v.data()), 8)), "x.npy");
    CHECK(a.shape == std::vector<int64_t>{2, 2});
    CHECK(a.values == std::vector<int64_t>{-1, 300, 7, -32768});
    const NpyArray u = parse_npy(npy_bytes("|u1", "(3,)", std::string("\xff\x00\x05", 3)), "x.npy");
    CHECK(u.values == std::vector<int64_t>{255, 0, 5});
    const auto refused = [](const std::string& bytes, const std::string& needle) {
        INFO("needle " << needle);
        try {
            parse_npy(bytes, "x.npy");
            FAIL("accepted");
        } catch (const ConfigError& e) {
            CHECK(std::string(e.what()).find(needle) != std::string::npos);
            CHECK(std::string(e.what()).find("x.npy") != std::string::npos);
        }
    };
    refused(npy_bytes("<f4", "(1,)", "abcd"), "descr");
    refused(npy_bytes("<i2", "(2,)", "ab", "True"), "fortran_order");
    refused(npy_bytes("<i2", "(2,)", "abc"), "data");
    refused(npy_bytes("<i2", "(99999999999,)", ""), "shape");
    refused(std::string("\x93NUMPY\x01\x00\xff\x7f{", 11), "header length");
    refused("not npy", "magic");
    CHECK(decode_base64("AwcABQ==", "f") == std::string("\x03\x07\x00\x05", 4));
    CHECK_THROWS_AS(decode_base64("Aw!A", "f"), ConfigError);
}

TEST_CASE("npy: mutated bytes are read or refused, never a crash", "[engine_dumps]") {
    std::ifstream in(kDumps + "vllm_r3_routing_u8.npy", std::ios::binary);
    const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(good.size() == 140);
    std::mt19937 rng(7);
    for (int i = 0; i < 3000; ++i) {
        std::string b = good;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) b[rng() % b.size()] = static_cast<char>(rng() & 0xff);
        if (rng() % 4 == 0) b.resize(rng() % b.size());
        try {
            const NpyArray a = parse_npy(b, "m.npy");
            int64_t n = 1;
            for (int64_t d : a.shape) n *= d;
            CHECK(static_cast<int64_t>(a.values.size()) == n);
        } catch (const ConfigError&) {
        }
    }
}

TEST_CASE("trace convert: malformed engine dumps are exit 2 naming the file, the field and the fix", "[engine_dumps]") {
    const std::string e8 = " --model " + kModels + "tiny-e8.json";
    // SGLang's raw integers need the model's layers and top-k.
    expect_refused(kDumps + "sglang_generate_int32.json",
                   {"sglang_generate_int32.json", "meta_info.routed_experts", "--model"});
    // ... and a byte count that is no whole number of tokens.
    expect_refused(write_temp_json("s.json", R"({"meta_info": {"routed_experts": "AwAAAAcAAAAAAAAABQAAAAMA"}})") + e8,
                   {"s.json", "meta_info.routed_experts", "bytes", "--model"});
    expect_refused(
        write_temp_json("d.json", R"({"meta_info": {"routed_experts_dtype": "float", "routed_experts": "AwcABQ"}})") +
            e8,
        {"d.json", "routed_experts_dtype", "int32"});
    // vLLM: no routing returned; base64 that is not a .npy; not base64.
    expect_refused(write_temp_json("n.json", R"({"choices": [{"routed_experts": null}]})"),
                   {"n.json", "choices[0].routed_experts", "--enable-return-routed-experts"});
    expect_refused(write_temp_json("b.json", R"({"choices": [{"routed_experts": "AwcABQ=="}]})"),
                   {"b.json", "choices[0].routed_experts", ".npy"});
    expect_refused(write_temp_json("c.json", R"({"choices": [{"routed_experts": "k05V*"}]})"),
                   {"c.json", "choices[0].routed_experts", "base64"});
    // Ragged nested lists, an id beyond the model's experts.
    expect_refused(write_temp_json("r.json", R"({"choices": [{"moe_topk_indices": [[[1,2],[3,4]], [[1,2]]]}]})"),
                   {"r.json", "choices[0].moe_topk_indices[1]", "layers"});
    expect_refused(write_temp_json("o.json", R"({"choices": [{"moe_topk_indices": [[[1,9],[3,4]]]}]})") + e8,
                   {"o.json", "moe_topk_indices[0][0][1]", "9", "logical expert ids"});
    // Megatron's trace: a record without top_indices, a step missing a layer.
    expect_refused(write_temp_json("m.jsonl",
                                   "{\"step\": 0, \"layer\": 1, \"top_indices\": [[1, 2]]}\n"
                                   "{\"step\": 0, \"layer\": 2, \"rank\": 0}\n"),
                   {"m.jsonl:2.top_indices", "is missing"});
    expect_refused(write_temp_json("s.jsonl",
                                   "{\"step\": 0, \"layer\": 1, \"top_indices\": [[1, 2]]}\n"
                                   "{\"step\": 0, \"layer\": 2, \"top_indices\": [[1, 3]]}\n"
                                   "{\"step\": 1, \"layer\": 1, \"top_indices\": [[1, 2]]}\n"),
                   {"s.jsonl:3", "layers", "whole steps"});
    // Aggregate counts are not per-token routing.
    expect_refused(kDumps + "sglang_init_expert_location.json", {"logical_count", "counts"});
    expect_refused(kDumps + "sglang_legacy_expert_distribution.csv", {"layer_id,expert_id,count", "per-token"});
    // A truncated .npy.
    expect_refused(write_bytes("t.npy", npy_bytes("|u1", "(3, 2, 2)", "\x03\x07")), {"t.npy", "data", "np.save"});
}
