// SPDX-License-Identifier: Apache-2.0
// moebench's own model schema: round trip, each validate() error class, and every shipped configs/models file.
#include "common/error.hpp"
#include "common/paths.hpp"
#include "config/model_config.hpp"
#include "error_helpers.hpp"
#include "model/accounting.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace moebench;

namespace {

std::string tiny_path(const std::string& name) { return std::string(MOEBENCH_TEST_DATA) + "/models/" + name; }

// The message of the ConfigError validate() (or the parser) throws; "" if none.
std::string error_of(const ModelConfig& m) {
    return test::config_error_of([&] { validate(m, "model"); });
}
std::string parse_error_of(const json& j) {
    return test::config_error_of([&] { validate(model_from_json(j, "model"), "model"); });
}
bool names(const std::string& msg, const std::string& field, const std::string& value) {
    return msg.find(field) != std::string::npos && msg.find(value) != std::string::npos;
}

}  // namespace

TEST_CASE("own schema round-trips through model_to_json", "[model_config]") {
    for (const char* f : {"tiny-gqa.json", "tiny-mla.json", "tiny-gpt-oss.json", "tiny-dense-first.json"}) {
        ModelConfig m = load_model(tiny_path(f));
        json j = model_to_json(m);
        ModelConfig back = model_from_json(j, "roundtrip");
        CHECK(model_to_json(back) == j);
        CHECK(back.layer_is_moe == m.layer_is_moe);
        CHECK(back.layer_sliding == m.layer_sliding);
        CHECK(count_params(back).total == count_params(m).total);
    }
    // An imported HF model round-trips too (MLA, groups, MTP, dense layers).
    ModelConfig v3 = load_model(std::string(MOEBENCH_TEST_DATA) + "/hf-configs/deepseek-v3.json");
    json j = model_to_json(v3);
    ModelConfig back = model_from_json(j, "roundtrip");
    CHECK(model_to_json(back) == j);
    CHECK(back.num_mtp_layers == 1);
    CHECK(back.num_dense_layers() == 3);
    CHECK(back.attn.kind == AttentionKind::mla);
}

TEST_CASE("tiny models parse as documented", "[model_config]") {
    ModelConfig m = load_model(tiny_path("tiny-mla.json"));
    CHECK(m.name == "tiny-mla");
    CHECK(m.attn.kind == AttentionKind::mla);
    CHECK(m.moe.routing == RoutingKind::sigmoid_group_topk);
    CHECK(m.moe.num_groups == 2);
    CHECK(m.num_moe_layers() == 2);
    ModelConfig d = load_model(tiny_path("tiny-dense-first.json"));
    CHECK(d.layer_is_moe == std::vector<uint8_t>{0, 1});
    ModelConfig o = load_model(tiny_path("tiny-gpt-oss.json"));
    CHECK(o.layer_sliding == std::vector<uint8_t>{1, 0});
    CHECK(std::string(to_string(o.activation)) == "swiglu_oai");
}

TEST_CASE("validate: each error class names field, value and fix", "[model_config]") {
    const ModelConfig good = load_model(tiny_path("tiny-mla.json"));
    CHECK(error_of(good).empty());

    ModelConfig m = good;
    m.moe.top_k = 5;  // > 4 experts
    CHECK(names(error_of(m), "moe.top_k", "5"));
    m = good;
    m.hidden_size = 0;
    CHECK(names(error_of(m), "hidden_size", "0"));
    m = good;
    m.moe.expert_intermediate_size = -3;
    CHECK(names(error_of(m), "moe.expert_intermediate_size", "-3"));
    m = good;
    m.moe.num_groups = 3;  // does not divide 4 experts
    CHECK(names(error_of(m), "moe.num_groups", "3"));
    m = good;
    m.moe.topk_groups = 3;  // > 2 groups
    CHECK(names(error_of(m), "moe.topk_groups", "3"));
    m = good;
    m.moe.num_groups = 4;  // 1 group of 1 expert reachable < top_k 2
    m.moe.topk_groups = 1;
    CHECK(names(error_of(m), "moe.top_k", "2"));
    m = good;
    m.moe.routing = RoutingKind::sparsemixer;  // PhiMoE's router picks exactly two
    m.moe.top_k = 1;
    CHECK(names(error_of(m), "moe.top_k", "1"));
    m = good;
    m.moe.routing = RoutingKind::sparsemixer;
    m.moe.router_jitter_noise = -0.5;
    CHECK(names(error_of(m), "moe.router_jitter_noise", "-0.5"));
    m = good;
    m.layer_is_moe.push_back(1);
    CHECK(names(error_of(m), "layer_is_moe", "3 entries"));
    m = good;
    m.layer_sliding = {1};
    CHECK(names(error_of(m), "layer_sliding", "1 entries"));
    m = good;
    m.layer_sliding = {1, 0};  // no window set
    CHECK(names(error_of(m), "attention.sliding_window", "0"));
    m = good;
    m.layer_is_moe = {0, 1};  // a dense layer without a dense width
    CHECK(names(error_of(m), "dense_intermediate_size", "0"));
    m = good;
    m.attn.kv_lora_rank = 0;
    CHECK(names(error_of(m), "attention.kv_lora_rank", "0"));
    ModelConfig g = load_model(tiny_path("tiny-gqa.json"));
    g.attn.num_kv_heads = 3;  // does not divide 4 heads
    CHECK(names(error_of(g), "attention.num_kv_heads", "3"));
    g = load_model(tiny_path("tiny-gpt-oss.json"));
    g.swiglu_limit = 0;
    CHECK(names(error_of(g), "swiglu_limit", "0"));
    g = load_model(tiny_path("tiny-gqa.json"));
    g.moe.shared_expert_gate = true;
    CHECK(names(error_of(g), "moe.shared_expert_gate", "true"));
    // Every message carries a fix after the value.
    m = good;
    m.moe.top_k = 5;
    CHECK(error_of(m).find(';') != std::string::npos);
}

TEST_CASE("own-schema parse errors: missing, wrong type, unknown field, unknown enum, bad layer index",
          "[model_config]") {
    json base = model_to_json(load_model(tiny_path("tiny-gqa.json")));
    json j = base;
    j.erase("hidden_size");
    CHECK(names(parse_error_of(j), "model.hidden_size", "missing"));
    j = base;
    j["num_layers"] = "two";
    CHECK(names(parse_error_of(j), "model.num_layers", "\"two\""));
    j = base;
    j["moe"]["top_k"] = 2.5;
    CHECK(names(parse_error_of(j), "model.moe.top_k", "2.5"));
    j = base;
    j["moe"]["topk"] = 2;
    CHECK(names(parse_error_of(j), "model.moe.topk", "unknown field"));
    j = base;
    j["moe"]["routing"] = "random";
    CHECK(names(parse_error_of(j), "model.moe.routing", "random"));
    j = base;
    j["dense_layers"] = {0, 7};
    CHECK(names(parse_error_of(j), "model.dense_layers[1]", "7"));
    j = base;
    j["attention"]["num_heads"] = -4;
    CHECK(names(parse_error_of(j), "model.attention.num_heads", "-4"));
    j = base;
    j["moebench"] = "model/9";
    CHECK(names(parse_error_of(j), "model.moebench", "model/9"));
}

TEST_CASE("load_model: short names, missing files, not JSON", "[model_config]") {
    CHECK_THROWS_AS(load_model("/nonexistent/model.json"), ConfigError);
    CHECK_THROWS_AS(load_model("no-such-model-name"), ConfigError);
    try {
        load_model("no-such-model-name");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("mixtral-8x7b") != std::string::npos);  // lists what exists
    }
    CHECK(load_model("mixtral-8x7b").name == "mixtral-8x7b");
}

TEST_CASE("every configs/models/*.json loads, validates and has notes", "[model_config]") {
    auto names_found = list_configs("models");
    REQUIRE(names_found.size() >= 22);
    for (const auto& n : names_found) {
        INFO(n);
        ModelConfig m = load_model(n);
        CHECK(m.name == n);
        CHECK_FALSE(m.notes.empty());
        CHECK(count_params(m).total > 0);
    }
    ModelConfig gpt4 = load_model("gpt4-rumored-1.8t");
    CHECK(gpt4.unconfirmed);
    CHECK(gpt4.moe.num_experts == 16);
    CHECK(gpt4.moe.top_k == 2);
    CHECK(gpt4.num_layers == 96);
    CHECK(gpt4.hidden_size == 12288);
    CHECK(gpt4.moe.expert_intermediate_size == 53248);
    CHECK(gpt4.vocab_size == 100000);
}

TEST_CASE("shipped configs agree with the HF importer", "[model_config]") {
    // configs/models were generated by importing the HF config.json; re-importing must give the same accounting.
    const std::pair<const char*, const char*> pairs[] = {
        {"mixtral-8x7b", "mixtral-8x7b-v0.1.json"}, {"deepseek-v3", "deepseek-v3.json"},
        {"qwen3-30b-a3b", "qwen3-30b-a3b.json"},    {"qwen2-57b-a14b", "qwen2-57b-a14b.json"},
        {"gpt-oss-20b", "gpt-oss-20b.json"},        {"llama4-maverick", "llama4-maverick-17b-128e.json"},
        {"kimi-k2", "kimi-k2-instruct.json"},       {"phi-3.5-moe", "phi-3.5-moe-instruct.json"}};
    for (const auto& [name, file] : pairs) {
        INFO(name);
        ModelConfig own = load_model(name);
        ModelConfig imported = load_model(std::string(MOEBENCH_TEST_DATA) + "/hf-configs/" + file);
        CHECK(count_params(own).by_component == count_params(imported).by_component);
        CHECK(kv_elems_per_token_per_layer(own) == kv_elems_per_token_per_layer(imported));
        CHECK(own.layer_is_moe == imported.layer_is_moe);
    }
}
