// SPDX-License-Identifier: Apache-2.0
// Hugging Face config.json import: each family's semantics, the vendor-published totals of more real models,
// and the errors for unknown families and wrong field types.
#include "cli_helpers.hpp"
#include "common/error.hpp"
#include "config/model_config.hpp"
#include "error_helpers.hpp"
#include "hf_test_helpers.hpp"
#include "model/accounting.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

using namespace moebench;
using namespace moebench::test;

namespace {

std::string error_of(const json& j) {
    return test::config_error_of([&] { hf_json(j); });
}

}  // namespace

TEST_CASE("family detection: model_type, else architectures; Grok-1 by architecture", "[hf_import]") {
    CHECK(hf("mixtral-8x7b-v0.1.json").family == "mixtral");
    CHECK(hf("grok-1.json").family == "grok-1");
    json j = {{"architectures", {"MixtralForCausalLM"}},
              {"hidden_size", 64},
              {"intermediate_size", 32},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"num_local_experts", 4},
              {"num_experts_per_tok", 2},
              {"vocab_size", 100}};
    CHECK(hf_json(j).family == "mixtral");  // no model_type: architectures decides
    // Grok-1 checkpoints sometimes say model_type "mixtral"; the architecture wins (4 norms, GeGLU).
    json g = j;
    g["architectures"] = {"Grok1ModelForCausalLM"};
    g["model_type"] = "mixtral";
    ModelConfig grok = hf_json(g);
    CHECK(grok.family == "grok-1");
    CHECK(grok.norms_per_layer == 4);
    CHECK(grok.activation == Activation::geglu);
    CHECK(is_hf_config(j));
    CHECK_FALSE(is_hf_config(json{{"moebench", "model/1"}, {"model_type", "x"}}));
}

TEST_CASE("unknown model_type lists the supported families", "[hf_import]") {
    std::string msg = error_of({{"model_type", "bert"}, {"architectures", {"BertModel"}}});
    CHECK(msg.find("model_type") != std::string::npos);
    CHECK(msg.find("bert") != std::string::npos);
    for (const char* t : {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "kimi_k2", "dbrx", "olmoe", "gpt_oss",
                          "llama4", "grok-1", "phimoe", "llama", "qwen2"})
        CHECK(msg.find(t) != std::string::npos);
}

TEST_CASE("wrong field types name the field", "[hf_import]") {
    json j = json::parse(R"({"model_type": "mixtral", "hidden_size": "4096", "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_local_experts": 8, "num_experts_per_tok": 2,
        "vocab_size": 32000})");
    std::string msg = error_of(j);
    CHECK(msg.find("hidden_size") != std::string::npos);
    CHECK(msg.find("integer") != std::string::npos);
    j["hidden_size"] = 4096;
    j["num_experts_per_tok"] = 9;
    msg = error_of(j);
    CHECK(msg.find("num_experts_per_tok") != std::string::npos);
    CHECK(msg.find("9") != std::string::npos);
    j["num_experts_per_tok"] = 2;
    j["num_hidden_layers"] = 0;
    CHECK(error_of(j).find("num_hidden_layers") != std::string::npos);
    j["num_hidden_layers"] = 32;
    j["mlp_only_layers"] = "none";
    j["model_type"] = "qwen3_moe";
    j["num_experts"] = 8;
    j["moe_intermediate_size"] = 64;
    CHECK(error_of(j).find("mlp_only_layers") != std::string::npos);
    CHECK(error_of({{"model_type", "dbrx"},
                    {"d_model", 64},
                    {"n_heads", 4},
                    {"n_layers", 2},
                    {"vocab_size", 10},
                    {"attn_config", 5}})
              .find("attn_config") != std::string::npos);
}

TEST_CASE("layer patterns: first_k_dense_replace, decoder_sparse_step, mlp_only_layers, interleave step",
          "[hf_import]") {
    ModelConfig v3 = hf("deepseek-v3.json");
    CHECK(v3.num_dense_layers() == 3);
    CHECK(v3.layer_is_moe[2] == 0);
    CHECK(v3.layer_is_moe[3] == 1);
    ModelConfig mav = hf("llama4-maverick-17b-128e.json");  // interleave_moe_layer_step 2: layers 1, 3, ... MoE
    CHECK(mav.num_moe_layers() == 24);
    CHECK(mav.layer_is_moe[0] == 0);
    CHECK(mav.layer_is_moe[1] == 1);
    CHECK(mav.dense_intermediate_size == 16384);
    json q = json::parse(R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "head_dim": 16,
        "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "num_experts": 4,
        "num_experts_per_tok": 2, "moe_intermediate_size": 32, "vocab_size": 100, "decoder_sparse_step": 2,
        "mlp_only_layers": [3]})");
    ModelConfig m = hf_json(q);
    // (i+1) % 2 == 0 -> 1, 3, 5; layer 3 is mlp_only -> MoE layers 1 and 5
    CHECK(m.layer_is_moe == std::vector<uint8_t>{0, 1, 0, 0, 0, 1});
    CHECK(m.dense_intermediate_size == 128);
    json d = json::parse(R"({"model_type": "deepseek", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 5, "num_attention_heads": 4, "n_routed_experts": 4, "n_shared_experts": 2,
        "num_experts_per_tok": 2, "moe_intermediate_size": 32, "vocab_size": 100, "first_k_dense_replace": 1,
        "moe_layer_freq": 2})");
    m = hf_json(d);
    CHECK(m.layer_is_moe == std::vector<uint8_t>{0, 0, 1, 0, 1});  // i >= 1 and i % 2 == 0
    CHECK(m.moe.num_shared_experts == 2);
    CHECK(m.moe.shared_intermediate_size == 32);
}

TEST_CASE("family semantics: MLA without q_lora, q/k norms, biases, sinks, windows, norms", "[hf_import]") {
    ModelConfig lite = hf("deepseek-v2-lite.json");
    CHECK(lite.attn.kind == AttentionKind::mla);
    CHECK(lite.attn.q_lora_rank == 0);
    // direct q: 2048*16*192; kv_a 2048*576 + norm 512; kv_b 512*16*256; o 16*128*2048
    CHECK(attention_params_per_layer(lite) ==
          2048LL * 16 * 192 + 2048LL * 576 + 512 + 512LL * 16 * 256 + 16LL * 128 * 2048);
    CHECK(kv_elems_per_token_per_layer(lite) == 576);
    ModelConfig v2 = hf("deepseek-v2.json");
    CHECK(v2.moe.routing == RoutingKind::softmax_group_greedy);
    CHECK(v2.moe.num_groups == 8);
    CHECK(v2.moe.topk_groups == 3);
    ModelConfig v3 = hf("deepseek-v3.json");
    CHECK(v3.moe.routing == RoutingKind::sigmoid_group_topk);
    CHECK(v3.moe.router_correction_bias);
    CHECK(hf("kimi-k2-instruct.json").moe.routing == RoutingKind::sigmoid_group_topk);

    ModelConfig q3 = hf("qwen3-30b-a3b.json");
    CHECK(q3.attn.qk_norm);
    CHECK(q3.attn.head_dim * q3.attn.num_heads != q3.hidden_size);  // 128 * 32 = 4096 != 2048
    CHECK(kv_elems_per_token_per_layer(q3) == 2 * 4 * 128);
    ModelConfig ol = hf("olmoe-1b-7b-0924.json");
    CHECK(ol.attn.qk_norm_full);
    CHECK(attention_params_per_layer(ol) == 4LL * 2048 * 2048 + 2048 + 2048);

    ModelConfig oss = hf("gpt-oss-20b.json");
    CHECK(oss.activation == Activation::swiglu_oai);
    CHECK(oss.swiglu_limit == 7.0);
    CHECK(oss.attn.sliding_window == 128);
    CHECK(oss.layer_sliding.size() == 24);
    CHECK(oss.layer_sliding[0] == 1);
    CHECK(oss.layer_sliding[1] == 0);

    ModelConfig phi = hf("phi-3.5-moe-instruct.json");
    CHECK(phi.moe.routing == RoutingKind::sparsemixer);  // modeling_phimoe.py uses sparsemixer at inference too
    CHECK(phi.moe.router_jitter_noise == 0.01);
    CHECK(phi.norm == NormKind::layernorm);
    CHECK(phi.norm_bias);
    CHECK(phi.lm_head_bias);
    CHECK(phi.attn.qkv_bias);
    CHECK(phi.attn.o_bias);
    {  // DeepseekV3Config's defaults where a config leaves the routing fields out
        json j = json::parse(test::read_text(kHf + "deepseek-v3.json"));
        j.erase("norm_topk_prob");
        j.erase("routed_scaling_factor");
        ModelConfig v3 = hf_json(j);
        CHECK(v3.moe.norm_topk_prob);
        CHECK(v3.moe.routed_scaling_factor == 2.5);
    }
    ModelConfig dbrx = hf("dbrx-base.json");
    CHECK(dbrx.moe.norm_topk_prob);  // moe_normalize_expert_weights absent: DbrxFFNConfig's default 1.0 (sum)
    {
        json j = json::parse(test::read_text(kHf + "dbrx-base.json"));
        j["ffn_config"]["moe_normalize_expert_weights"] = nullptr;  // None in DbrxRouter: no renormalisation
        CHECK_FALSE(hf_json(j).moe.norm_topk_prob);
        j["ffn_config"]["moe_normalize_expert_weights"] = 2;  // an L2 norm: refused, naming the field
        CHECK(error_of(j).find("moe_normalize_expert_weights") != std::string::npos);
    }
    CHECK(dbrx.norm == NormKind::layernorm);
    CHECK_FALSE(dbrx.norm_bias);
    CHECK(dbrx.attn.num_kv_heads == 8);
    CHECK(dbrx.moe.expert_intermediate_size == 10752);
    ModelConfig scout = hf("llama4-scout-17b-16e.json");
    CHECK(scout.moe.num_shared_experts == 1);
    CHECK(scout.moe.routing == RoutingKind::topk_sigmoid);
    CHECK(scout.attn.attention_chunk == 8192);
    CHECK(scout.layer_sliding[3] == 0);  // every 4th layer is global NoPE attention
    CHECK(scout.layer_sliding[0] == 1);
    ModelConfig grok = hf("grok-1.json");
    CHECK(grok.tie_word_embeddings);
    CHECK(comp(count_params(grok), Component::lm_head) == 0);
    ModelConfig q2 = hf("qwen2-7b.json");
    CHECK(q2.attn.qkv_bias);
    CHECK_FALSE(q2.is_moe_model());
}

// ---------------------------------------------------------------------------------------------------------------
// Vendor totals of more real models (0.5 % for totals; active under each vendor's convention).

TEST_CASE("Mixtral-8x22B (base and Instruct): 141B total, 39B active", "[hf_import][vendor]") {
    // Source: Mistral AI "Cheaper, Better, Faster, Stronger" (Mixtral 8x22B): 141B total, 39B active.
    // The base has vocab 32000, the Instruct 32768 (v3 tokenizer); both round to the same figures.
    for (const char* file : {"mixtral-8x22b-v0.1.json", "mixtral-8x22b-instruct-v0.1.json"}) {
        INFO(file);
        ParamCounts p = count_params(hf(file));
        CHECK(rel_err(static_cast<double>(p.total), 141e9) < 0.005);  // counted 140.62B / 140.63B
        CHECK(rel_err(static_cast<double>(p.active), 39e9) < 0.01);
    }
    CHECK(hf("mixtral-8x22b-v0.1.json").vocab_size == 32000);
}

TEST_CASE("Mixtral-8x7B-Instruct: same shape as the base, 46.7B / 12.9B", "[hf_import][vendor]") {
    // Source: Mistral AI "Mixtral of experts" announcement (46.7B total, 12.9B per token).
    ParamCounts p = count_params(hf("mixtral-8x7b-instruct-v0.1.json"));
    CHECK(rel_err(static_cast<double>(p.total), 46.7e9) < 0.005);
    CHECK(rel_err(static_cast<double>(p.active), 12.9e9) < 0.01);
}

TEST_CASE("DeepSeek-R1 and DeepSeek-V3.1: 671B total, 37B active, MTP excluded", "[hf_import][vendor]") {
    // Sources: DeepSeek-R1 model card (671B total, 37B activated, built on DeepSeek-V3-Base) and DeepSeek-V3.1
    // model card (same architecture, 671B total, 37B activated). Both ship FP8 (quantization_config, ignored here).
    for (const char* file : {"deepseek-r1.json", "deepseek-v3.1.json"}) {
        INFO(file);
        ModelConfig m = hf(file);
        CHECK(m.num_mtp_layers == 1);
        ParamCounts p = count_params(m);
        CHECK(rel_err(static_cast<double>(p.total), 671e9) < 0.005);
        // DeepSeek's activated count leaves out the input embedding (see the V3 test in test_accounting.cpp):
        // counted 36.63B, published "37B".
        CHECK(consistent(static_cast<double>(p.active_excluding_embedding), 37e9, 1e9));
        CHECK(count_params(m).by_component == count_params(hf("deepseek-v3.json")).by_component);
    }
}

TEST_CASE("Qwen3-Coder-480B-A35B: 480B total, 35B active", "[hf_import][vendor]") {
    // Source: Qwen3-Coder-480B-A35B-Instruct model card (480B total, 35B activated, 62 layers, 160 experts, 8 active).
    ParamCounts p = count_params(hf("qwen3-coder-480b-a35b-instruct.json"));
    CHECK(rel_err(static_cast<double>(p.total), 480e9) < 0.005);
    CHECK(rel_err(static_cast<double>(p.active), 35e9) < 0.015);  // counted 35.47B; published to two digits
    CHECK(consistent(static_cast<double>(p.active), 35e9, 1e9));
}

TEST_CASE("FP8 checkpoints (quantization_config) import to the same shape", "[hf_import][vendor]") {
    // Qwen/Qwen3-235B-A22B-FP8 and Qwen/Qwen3-30B-A3B-FP8 carry a quantization_config block and
    // modules_to_not_convert lists; RedHatAI's Llama-4-Scout FP8-dynamic carries a compressed-tensors config.
    CHECK(count_params(hf("qwen3-235b-a22b-fp8.json")).by_component ==
          count_params(hf("qwen3-235b-a22b.json")).by_component);
    CHECK(count_params(hf("qwen3-30b-a3b-fp8.json")).by_component ==
          count_params(hf("qwen3-30b-a3b.json")).by_component);
    CHECK(count_params(hf("llama4-scout-17b-16e-instruct-fp8-dynamic.json")).by_component ==
          count_params(hf("llama4-scout-17b-16e.json")).by_component);
}

TEST_CASE("Qwen1.5-MoE-A2.7B: 14.3B total, 2.7B active", "[hf_import][vendor]") {
    // Source: Qwen1.5-MoE-A2.7B model card ("14.3B parameters in total and 2.7B activated parameters").
    ParamCounts p = count_params(hf("qwen1.5-moe-a2.7b.json"));
    CHECK(rel_err(static_cast<double>(p.total), 14.3e9) < 0.005);
    CHECK(rel_err(static_cast<double>(p.active), 2.7e9) < 0.01);
}

TEST_CASE("Qwen3-235B-A22B: 235B total, 22B active", "[hf_import][vendor]") {
    // Source: Qwen3-235B-A22B model card (235B total, 22B activated, 94 layers, 128 experts, 8 activated).
    ParamCounts p = count_params(hf("qwen3-235b-a22b.json"));
    CHECK(rel_err(static_cast<double>(p.total), 235e9) < 0.005);
    CHECK(rel_err(static_cast<double>(p.active), 22e9) < 0.01);
}

TEST_CASE("DeepSeek-V2: 236B total, 21B active", "[hf_import][vendor]") {
    // Source: DeepSeek-V2 README ("236B total parameters, of which 21B are activated for each token").
    ParamCounts p = count_params(hf("deepseek-v2.json"));
    CHECK(rel_err(static_cast<double>(p.total), 236e9) < 0.005);
    // Like V3 (README_WEIGHTS), DeepSeek's activated count leaves out the input embedding.
    CHECK(rel_err(static_cast<double>(p.active_excluding_embedding), 21e9) < 0.01);
}

TEST_CASE("DeepSeek-V2-Lite: 15.7B total, 2.4B active", "[hf_import][vendor]") {
    // Source: DeepSeek-V2 README model table (V2-Lite: 15.7B total, 2.4B activated).
    ParamCounts p = count_params(hf("deepseek-v2-lite.json"));
    CHECK(rel_err(static_cast<double>(p.total), 15.7e9) < 0.005);
    CHECK(consistent(static_cast<double>(p.active_excluding_embedding), 2.4e9, 0.1e9));  // counted 2.45B
}

TEST_CASE("DeepSeekMoE-16B: 16.4B total, 2.8B active", "[hf_import][vendor]") {
    // Source: DeepSeek-MoE README ("DeepSeekMoE 16B ... total parameter 16.4B", ~2.8B activated (40% of 7B compute)).
    ParamCounts p = count_params(hf("deepseek-moe-16b-base.json"));
    CHECK(rel_err(static_cast<double>(p.total), 16.4e9) < 0.005);
    CHECK(consistent(static_cast<double>(p.active), 2.8e9, 0.1e9));  // counted 2.83B, embedding included
}

TEST_CASE("Kimi-K2: 1T total, 32B active", "[hf_import][vendor]") {
    // Source: Kimi-K2 model card ("32 billion activated parameters and 1 trillion total parameters").
    ParamCounts p = count_params(hf("kimi-k2-instruct.json"));
    CHECK(consistent(static_cast<double>(p.total), 1e12, 0.1e12));  // counted 1.026T; published to one digit
    CHECK(consistent(static_cast<double>(p.active), 32e9, 1e9));    // counted 32.86B
}

TEST_CASE("DBRX: 132B total, 36B active", "[hf_import][vendor]") {
    // Source: Databricks DBRX model card ("132B total parameters of which 36B parameters are active on any input").
    ParamCounts p = count_params(hf("dbrx-base.json"));
    CHECK(rel_err(static_cast<double>(p.total), 132e9) < 0.005);
    CHECK(consistent(static_cast<double>(p.active), 36e9, 1e9));  // counted 36.46B
}

TEST_CASE("OLMoE-1B-7B: 6.9B total, 1.3B active", "[hf_import][vendor]") {
    // Source: OLMoE paper / model card (6.9B total, 1.3B active parameters).
    ParamCounts p = count_params(hf("olmoe-1b-7b-0924.json"));
    CHECK(rel_err(static_cast<double>(p.total), 6.9e9) < 0.005);
    CHECK(consistent(static_cast<double>(p.active), 1.3e9, 0.1e9));  // counted 1.28B
}

TEST_CASE("gpt-oss-120b: 116.83B total, 5.13B active", "[hf_import][vendor]") {
    // Source: gpt-oss model card, table of parameter counts (120b: 116.83B total, 5.13B active per token).
    ParamCounts p = count_params(hf("gpt-oss-120b.json"));
    CHECK(rel_err(static_cast<double>(p.total), 116.83e9) < 0.005);
    CHECK(rel_err(static_cast<double>(p.active_excluding_embedding), 5.13e9) < 0.01);
}

TEST_CASE("Llama-4 Maverick: 400B total, 17B active (text model)", "[hf_import][vendor]") {
    // Source: Llama 4 model card (Maverick: 17B active, 400B total; Scout: 17B active, 109B total).
    ParamCounts p = count_params(hf("llama4-maverick-17b-128e.json"));
    CHECK(rel_err(static_cast<double>(p.total), 400e9) < 0.005);
    CHECK(consistent(static_cast<double>(p.active), 17e9, 1e9));  // counted 17.18B
    ParamCounts s = count_params(hf("llama4-scout-17b-16e.json"));
    CHECK(consistent(static_cast<double>(s.active), 17e9, 1e9));
    // Scout's 109B includes the vision encoder (out of scope): the text model alone is 107.8B, about 1.1 % less.
    CHECK(s.total < 109e9);
    CHECK(rel_err(static_cast<double>(s.total), 109e9) < 0.015);
}

TEST_CASE("Grok-1: 314B published; the shapes give 315.7B", "[hf_import][vendor]") {
    // Source: xAI grok-1 README ("314B parameters", 8 experts, 2 per token, 64 layers, 48 query / 8 KV heads).
    ParamCounts p = count_params(hf("grok-1.json"));
    // By hand: experts 64 * 8 * 3*6144*32768 = 309,237,645,312; attention 64 * (2*6144*6144 + 2*6144*1024) =
    // 5,637,144,576; tied embedding 131072*6144 = 805,306,368; router 64*6144*8 = 3,145,728; norms 4*64*6144 + 6144.
    CHECK(p.total == 309237645312LL + 5637144576LL + 805306368LL + 3145728LL + 4LL * 64 * 6144 + 6144);
    // xAI's 314B is 0.54 % below what its own published shapes give; we report the count, not the headline.
    CHECK(rel_err(static_cast<double>(p.total), 314e9) < 0.006);
}

TEST_CASE("Phi-3.5-MoE: 41.9B total, 6.6B active", "[hf_import][vendor]") {
    // Source: Phi-3.5-MoE-instruct model card ("6.6B active parameters ... 42B total"; 41.9B in the Phi-3 report).
    ParamCounts p = count_params(hf("phi-3.5-moe-instruct.json"));
    CHECK(rel_err(static_cast<double>(p.total), 41.9e9) < 0.005);
    CHECK(rel_err(static_cast<double>(p.active), 6.6e9) < 0.01);
}

TEST_CASE("dense baselines from published configs: Llama-3.1-8B 8.03B, Qwen2.5-7B 7.61B / 6.53B",
          "[hf_import][vendor]") {
    // Sources: Llama 3.1 model card (8B; 8.03B on the Hub); Qwen2.5-7B model card ("Number of Parameters: 7.61B,
    // Number of Parameters (Non-Embedding): 6.53B" -- Qwen leaves out the embedding and the untied head).
    ParamCounts l = count_params(hf("llama3.1-8b.json"));
    CHECK(rel_err(static_cast<double>(l.total), 8.03e9) < 0.005);
    CHECK(l.active == l.total);
    ParamCounts q = count_params(hf("qwen2.5-7b.json"));
    CHECK(rel_err(static_cast<double>(q.total), 7.61e9) < 0.005);
    double non_embedding = static_cast<double>(q.total - comp(q, Component::embedding) - comp(q, Component::lm_head));
    CHECK(rel_err(non_embedding, 6.53e9) < 0.005);
}

TEST_CASE("dense baselines: Llama-3-8B 8.03B, Qwen2-7B 7.6B / 7.07B non-embedding", "[hf_import][vendor]") {
    // Sources: Meta Llama 3 model card (8B; 8.03B on the Hub); Qwen2 blog table (7.6B params, 7.07B non-embedding).
    ParamCounts l = count_params(hf("llama3-8b.json"));
    CHECK(rel_err(static_cast<double>(l.total), 8.03e9) < 0.005);
    CHECK(l.active == l.total);
    ParamCounts q = count_params(hf("qwen2-7b.json"));
    CHECK(rel_err(static_cast<double>(q.total), 7.6e9) < 0.005);
    CHECK(rel_err(static_cast<double>(q.total_excluding_embedding), 7.07e9) < 0.005);
}

// ---------------------------------------------------------------------------------------------------------------
// configs/models/*.json are the importer's output for the configs in this folder: every field must agree.

TEST_CASE("every shipped model config equals the import of its config.json", "[hf_import][model_config]") {
    const std::pair<const char*, const char*> pairs[] = {{"mixtral-8x7b", "mixtral-8x7b-v0.1.json"},
                                                         {"mixtral-8x22b", "mixtral-8x22b-v0.1.json"},
                                                         {"deepseek-v3", "deepseek-v3.json"},
                                                         {"deepseek-v2", "deepseek-v2.json"},
                                                         {"deepseek-v2-lite", "deepseek-v2-lite.json"},
                                                         {"deepseek-moe-16b", "deepseek-moe-16b-base.json"},
                                                         {"kimi-k2", "kimi-k2-instruct.json"},
                                                         {"qwen3-30b-a3b", "qwen3-30b-a3b.json"},
                                                         {"qwen3-235b-a22b", "qwen3-235b-a22b.json"},
                                                         {"qwen2-57b-a14b", "qwen2-57b-a14b.json"},
                                                         {"qwen1.5-moe-a2.7b", "qwen1.5-moe-a2.7b.json"},
                                                         {"gpt-oss-20b", "gpt-oss-20b.json"},
                                                         {"gpt-oss-120b", "gpt-oss-120b.json"},
                                                         {"dbrx", "dbrx-base.json"},
                                                         {"olmoe-1b-7b", "olmoe-1b-7b-0924.json"},
                                                         {"llama4-scout", "llama4-scout-17b-16e.json"},
                                                         {"llama4-maverick", "llama4-maverick-17b-128e.json"},
                                                         {"grok-1", "grok-1.json"},
                                                         {"phi-3.5-moe", "phi-3.5-moe-instruct.json"},
                                                         {"llama3-8b", "llama3-8b.json"},
                                                         {"qwen2-7b", "qwen2-7b.json"},
                                                         {"qwen3-next-80b-a3b", "qwen3-next-80b-a3b-thinking.json"},
                                                         {"minimax-m1", "minimax-m1.json"},
                                                         {"hunyuan-a13b", "hunyuan-a13b-instruct.json"},
                                                         {"granite-3.0-1b-a400m", "granite-3.0-1b-a400m-instruct.json"},
                                                         {"ling-lite", "ling-lite.json"},
                                                         {"deepseek-v3.2", "deepseek-v3.2.json"},
                                                         {"kimi-k2.5", "kimi-k2.5.json"},
                                                         {"minimax-m2.5", "minimax-m2.5-reconstructed.json"},
                                                         {"qwen3.5-397b-a17b", "qwen3.5-397b-a17b.json"},
                                                         {"qwen3.5-122b-a10b", "qwen3.5-122b-a10b.json"},
                                                         {"qwen3.5-35b-a3b", "qwen3.5-35b-a3b.json"},
                                                         {"glm-5", "glm-5.json"}};
    for (const auto& [name, file] : pairs) {
        INFO(name << " vs " << file);
        json own = model_to_json(load_model(name));
        json imported = model_to_json(hf(file));
        for (const char* key : {"name", "notes", "unconfirmed"}) {
            own.erase(key);
            imported.erase(key);
        }
        CHECK(own.dump() == imported.dump());
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Real configs carry nulls, floats for integers, nested PretrainedConfig dumps and unknown keys: all accepted.

TEST_CASE("quirks of published configs are accepted", "[hf_import]") {
    // DBRX as re-saved by other tools: nested blocks are full PretrainedConfig dumps (id2label, a nested
    // tie_word_embeddings: true that does not apply to the model, torch_dtype null), ffn_act_fn as an object.
    json dbrx = json::parse(R"({"architectures": ["DbrxForCausalLM"], "model_type": "dbrx", "d_model": 6144,
        "n_heads": 48, "n_layers": 40, "vocab_size": 100352, "max_seq_len": 32768, "tie_word_embeddings": false,
        "attn_config": {"return_dict": true, "torch_dtype": null, "tie_word_embeddings": true,
                        "id2label": {"0": "LABEL_0"}, "model_type": "", "clip_qkv": 8, "kv_n_heads": 8,
                        "rope_theta": 500000},
        "ffn_config": {"ffn_act_fn": {"name": "silu"}, "ffn_hidden_size": 10752, "moe_num_experts": 16,
                       "moe_top_k": 4, "moe_jitter_eps": 0, "moe_normalize_expert_weights": 1,
                       "uniform_expert_assignment": false},
        "quantization": {"group_size": 64, "bits": 4}})");
    CHECK(count_params(hf_json(dbrx)).by_component == count_params(hf("dbrx-base.json")).by_component);

    // Floats for integers, nulls for optional fields, an empty architectures list, transformers-5 rope_parameters.
    json j = json::parse(test::read_text(kHf + "mixtral-8x7b-v0.1.json"));
    j["num_hidden_layers"] = 32.0;
    j["num_key_value_heads"] = 8.0;
    j["head_dim"] = nullptr;
    j["rope_scaling"] = nullptr;
    j["architectures"] = json::array();
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
    j["some_future_key"] = {{"nested", {1, 2, 3}}};
    ModelConfig m = hf_json(j);
    CHECK(m.num_layers == 32);
    CHECK(m.attn.rope_theta == 1e6);
    CHECK(count_params(m).by_component == count_params(hf("mixtral-8x7b-v0.1.json")).by_component);

    // Grok-1 as some ports publish it: model_type "mixtral", num_local_experts, explicit head_dim, no tie flag.
    json g = json::parse(R"({"architectures": ["Grok1ModelForCausalLM"], "model_type": "mixtral",
        "vocab_size": 131072, "hidden_size": 6144, "intermediate_size": 32768, "max_position_embeddings": 8192,
        "num_experts_per_tok": 2, "num_local_experts": 8, "num_attention_heads": 48, "num_hidden_layers": 64,
        "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-05, "rope_theta": 10000.0})");
    CHECK(count_params(hf_json(g)).by_component == count_params(hf("grok-1.json")).by_component);

    // DeepSeek-V3.2 (deepseek_v32) imports as V3 plus its indexer (test_hf_import_families.cpp counts it), whose
    // shape it needs.
    json v32 = json::parse(test::read_text(kHf + "deepseek-v3.json"));
    v32["model_type"] = "deepseek_v32";
    v32["architectures"] = {"DeepseekV32ForCausalLM"};
    v32["index_n_heads"] = 64;
    CHECK(error_of(v32).find("index_head_dim") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// Malformed Hugging Face inputs through the real binary: exit 2, one line, the field (and value) named.

namespace {

void expect_plan_refused(const std::string& text, const std::vector<std::string>& needles) {
    std::string path = test::write_temp("config.json", text);
    test::CliResult r = test::run_cli("plan --model " + path + " --format json");
    INFO("input: " << text.substr(0, 300) << "\nstderr: " << r.err << "\nstdout: " << r.out.substr(0, 200));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("moebench: error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.out.empty());
    for (const auto& n : needles) CHECK_THAT(r.err, Catch::Contains(n));
}

json small_moe(const std::string& type) {
    json j = {{"model_type", type},     {"hidden_size", 64},        {"intermediate_size", 128},
              {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
              {"vocab_size", 100}};
    if (type == "mixtral") {
        j["num_local_experts"] = 8;
        j["num_experts_per_tok"] = 2;
    } else {  // deepseek_v3
        j.update({{"n_routed_experts", 8},
                  {"num_experts_per_tok", 2},
                  {"moe_intermediate_size", 32},
                  {"n_shared_experts", 1},
                  {"kv_lora_rank", 16},
                  {"q_lora_rank", nullptr},
                  {"qk_nope_head_dim", 16},
                  {"qk_rope_head_dim", 8},
                  {"v_head_dim", 16},
                  {"n_group", 4},
                  {"topk_group", 2},
                  {"topk_method", "noaux_tc"},
                  {"first_k_dense_replace", 1}});
    }
    return j;
}

}  // namespace

TEST_CASE("malformed Hugging Face configs: exit 2 naming the field", "[hf_import][bad_input][cli]") {
    SECTION("the plain cases still plan") {
        test::CliResult r = test::run_cli("plan --format json --model " +
                                          test::write_temp("config.json", small_moe("deepseek_v3").dump()));
        INFO(r.err);
        CHECK(r.exit_code == 0);
        r = test::run_cli("plan --format json --model " + test::write_temp("config.json", small_moe("mixtral").dump()));
        CHECK(r.exit_code == 0);
    }
    SECTION("empty file, JSON array, JSON string") {
        expect_plan_refused("", {"config.json", "JSON"});
        expect_plan_refused("[1, 2, 3]", {"config.json", "object"});
        expect_plan_refused("\"mixtral\"", {"config.json", "object"});
    }
    SECTION("top-k larger than the experts") {
        json j = small_moe("mixtral");
        j["num_experts_per_tok"] = 9;
        expect_plan_refused(j.dump(), {"num_experts_per_tok", "9", "num_local_experts"});
        j = small_moe("deepseek_v3");
        j["num_experts_per_tok"] = 12;
        expect_plan_refused(j.dump(), {"num_experts_per_tok", "12"});
    }
    SECTION("negative, string, fractional and missing sizes") {
        json j = small_moe("mixtral");
        j["hidden_size"] = -64;
        expect_plan_refused(j.dump(), {"hidden_size", "-64", "positive"});
        j["hidden_size"] = "64";
        expect_plan_refused(j.dump(), {"hidden_size", "integer"});
        j["hidden_size"] = 64.5;
        expect_plan_refused(j.dump(), {"hidden_size", "64.5"});
        j["hidden_size"] = 64;
        j.erase("num_hidden_layers");
        expect_plan_refused(j.dump(), {"num_hidden_layers", "missing"});
        j = small_moe("deepseek_v3");
        j["kv_lora_rank"] = 0;
        expect_plan_refused(j.dump(), {"kv_lora_rank", "positive"});
    }
    SECTION("huge values are refused, never overflowed") {
        json j = small_moe("mixtral");
        j["hidden_size"] = 1e30;
        expect_plan_refused(j.dump(), {"hidden_size", "too large"});
        j = small_moe("mixtral");
        j["vocab_size"] = json::parse("100000000000000000000000");
        expect_plan_refused(j.dump(), {"vocab_size", "too large"});
        j = small_moe("mixtral");
        j["num_hidden_layers"] = json::parse("18446744073709551615");
        expect_plan_refused(j.dump(), {"num_hidden_layers", "too large"});
        // Each size plausible, the product not: 4M experts of width 4M in 60k layers.
        j = small_moe("mixtral");
        j["hidden_size"] = 16384;
        j["num_attention_heads"] = 128;
        j["num_local_experts"] = 4000000;
        j["intermediate_size"] = 4000000;
        j["num_hidden_layers"] = 60000;
        expect_plan_refused(j.dump(), {"10^15 parameters"});
    }
    SECTION("heads that do not divide") {
        json j = small_moe("mixtral");
        j["num_attention_heads"] = 5;  // 64 / 5, no head_dim given
        j["num_key_value_heads"] = 5;
        expect_plan_refused(j.dump(), {"num_attention_heads", "5", "head_dim"});
        j = small_moe("mixtral");
        j["num_key_value_heads"] = 3;
        expect_plan_refused(j.dump(), {"num_key_value_heads", "3", "num_attention_heads"});
        expect_plan_refused(json::parse(R"({"model_type": "dbrx", "d_model": 64, "n_heads": 6, "n_layers": 2,
            "vocab_size": 10, "attn_config": {"kv_n_heads": 2}, "ffn_config": {"ffn_hidden_size": 32,
            "moe_num_experts": 4, "moe_top_k": 2}})")
                                .dump(),
                            {"n_heads", "6", "d_model"});
    }
    SECTION("expert groups") {
        json j = small_moe("deepseek_v3");
        j["n_group"] = 3;  // 8 experts
        expect_plan_refused(j.dump(), {"n_group", "3", "n_routed_experts"});
        j = small_moe("deepseek_v3");
        j["topk_group"] = 5;  // n_group 4
        expect_plan_refused(j.dump(), {"topk_group", "5", "n_group"});
        j = small_moe("deepseek_v3");
        j["topk_group"] = 1;  // 1 group of 2 experts cannot supply top-4
        j["num_experts_per_tok"] = 4;
        expect_plan_refused(j.dump(), {"num_experts_per_tok", "topk_group"});
        // Before: an unknown method or scoring function silently routed by softmax top-k.
        j = small_moe("deepseek_v3");
        j["scoring_func"] = "foo";
        expect_plan_refused(j.dump(), {"scoring_func", "foo", "sigmoid or softmax"});
        j = small_moe("deepseek_v3");
        j["topk_method"] = "foo";
        expect_plan_refused(j.dump(), {"topk_method", "foo", "noaux_tc"});
        // RoPE rotates pairs of dims: an odd rope width was accepted and rotated one dim short.
        j = small_moe("deepseek_v3");
        j["qk_rope_head_dim"] = 7;
        expect_plan_refused(j.dump(), {"qk_rope_head_dim", "7", "even"});
        j = small_moe("mixtral");
        j["head_dim"] = 3;
        expect_plan_refused(j.dump(), {"head_dim", "3", "even"});
    }
    SECTION("wrong structure: text_config, architectures, model_type, layer lists") {
        json j = {{"model_type", "llama4"}, {"architectures", {"Llama4ForConditionalGeneration"}}, {"text_config", 5}};
        expect_plan_refused(j.dump(), {"text_config", "object"});
        j = small_moe("mixtral");
        j["architectures"] = "MixtralForCausalLM";
        expect_plan_refused(j.dump(), {"architectures", "list"});
        j["architectures"] = {42};
        expect_plan_refused(j.dump(), {"architectures[0]", "42"});
        j = small_moe("mixtral");
        j["model_type"] = "mamba2";
        expect_plan_refused(j.dump(), {"model_type", "mamba2", "mixtral", "deepseek_v3", "qwen3_moe", "llama4"});
        j["model_type"] = 7;
        expect_plan_refused(j.dump(), {"model_type", "string"});
        j = small_moe("mixtral");
        j["model_type"] = "qwen3_moe";
        j["num_experts"] = 8;
        j["moe_intermediate_size"] = 32;
        j["mlp_only_layers"] = {0, "one"};
        expect_plan_refused(j.dump(), {"mlp_only_layers[1]", "one"});
        j["mlp_only_layers"] = json::array();
        j["decoder_sparse_step"] = 0;
        expect_plan_refused(j.dump(), {"decoder_sparse_step", "0"});
    }
}
