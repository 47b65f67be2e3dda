// SPDX-License-Identifier: Apache-2.0
// The MoE families of 2025-2026 (issue: GLM-4.5, Qwen3-Next, MiniMax, Hunyuan, Granite, Ling, dots.llm1, ERNIE-4.5,
// DeepSeek-V3.2): their import semantics and the vendors' published parameter counts, each with its convention.
#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "cli_helpers.hpp"
#include "config/model_config.hpp"
#include "engine/engine.hpp"
#include "error_helpers.hpp"
#include "harness/validate.hpp"
#include "hf_test_helpers.hpp"
#include "model/accounting.hpp"
#include "model/memory_plan.hpp"
#include "model/phase_work.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

using namespace moebench;
using namespace moebench::test;

namespace {

double without_embedding_and_head(const ParamCounts& p, bool active) {
    const double emb = static_cast<double>(comp(p, Component::embedding) + comp(p, Component::lm_head));
    return static_cast<double>(active ? p.active : p.total) - emb;
}

// Shapes from the GLM-4.5 technical report (Table 1) and the transformers Glm4MoeConfig keys; no published
// config.json of GLM-4.5 was found in the searchable public code, so this is a transcription, not a copy.
json glm45_config() {
    return json::parse(R"({"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 5120,
        "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 12288, "moe_intermediate_size": 1536, "n_routed_experts": 160, "n_shared_experts": 1,
        "num_experts_per_tok": 8, "first_k_dense_replace": 3, "routed_scaling_factor": 2.5, "n_group": 1,
        "topk_group": 1, "norm_topk_prob": true, "partial_rotary_factor": 0.5, "attention_bias": true,
        "use_qk_norm": true, "num_nextn_predict_layers": 1, "vocab_size": 151552, "rope_theta": 1000000,
        "tie_word_embeddings": false, "rms_norm_eps": 1e-5})");
}

}  // namespace

TEST_CASE("GLM-4.5: sigmoid + correction bias, half RoPE, q/k/v biases, 355B / 32B with MTP", "[hf_import][vendor]") {
    ModelConfig m = hf_json(glm45_config());
    CHECK(m.family == "glm4_moe");
    CHECK(m.moe.routing == RoutingKind::sigmoid_group_topk);
    CHECK(m.moe.router_correction_bias);
    CHECK(m.moe.routed_scaling_factor == 2.5);
    CHECK(m.attn.rotary_dim == 64);
    CHECK(m.attn.qkv_bias);
    CHECK_FALSE(m.attn.o_bias);  // o_proj never has a bias in GLM-4.5
    CHECK(m.attn.qk_norm);
    CHECK(m.num_dense_layers() == 3);
    CHECK(m.num_mtp_layers == 1);
    // Convention of the GLM-4.5 report: MTP layers included, word embeddings and output layer excluded.
    AccountingOptions with_mtp;
    with_mtp.include_mtp = true;
    ParamCounts p = count_params(m, with_mtp);
    CHECK(rel_err(without_embedding_and_head(p, false), 355e9) < 0.005);  // counted 355.23B
    CHECK(consistent(without_embedding_and_head(p, true), 32e9, 1e9));    // counted 32.48B
    // Without --include-mtp the MTP layer is listed but not in the totals.
    ParamCounts q = count_params(m);
    CHECK(q.total + comp(q, Component::mtp) == p.total);
}

TEST_CASE("GLM-4.5-Air: 106B / 12B (MTP, embeddings and head excluded)", "[hf_import][vendor]") {
    json j = glm45_config();
    for (auto [k, v] : {std::pair<const char*, int64_t>{"hidden_size", 4096},
                        {"num_hidden_layers", 46},
                        {"intermediate_size", 10944},
                        {"moe_intermediate_size", 1408},
                        {"n_routed_experts", 128},
                        {"first_k_dense_replace", 1}})
        j[k] = v;
    j["use_qk_norm"] = false;
    j.erase("routed_scaling_factor");  // Air's config leaves it at the default 1.0
    ModelConfig m = hf_json(j);
    CHECK_FALSE(m.attn.qk_norm);
    CHECK(m.moe.routed_scaling_factor == 1.0);
    // The report's stated rule (MTP in) gives 108.0B; the published 106B / 12B match MTP excluded.
    ParamCounts p = count_params(m);
    CHECK(rel_err(without_embedding_and_head(p, false), 106e9) < 0.005);  // counted 105.61B
    CHECK(consistent(without_embedding_and_head(p, true), 12e9, 1e9));    // counted 12.18B
}

TEST_CASE("dots.llm1: 142B total, 14B active (embeddings included)", "[hf_import][vendor]") {
    // Shapes from the dots.llm1 technical report (Table 6) and Dots1Config keys (transcribed, not a copied file).
    json j = json::parse(R"({"model_type": "dots1", "hidden_size": 4096, "num_hidden_layers": 62,
        "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "intermediate_size": 10944,
        "moe_intermediate_size": 1408, "n_routed_experts": 128, "n_shared_experts": 2, "num_experts_per_tok": 6,
        "first_k_dense_replace": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": true, "scoring_func": "sigmoid",
        "n_group": null, "topk_group": null, "vocab_size": 152064, "rope_theta": 10000000, "attention_bias": false,
        "tie_word_embeddings": false})");
    ModelConfig m = hf_json(j);
    CHECK(m.attn.qk_norm);  // always on in dots1
    CHECK(m.attn.rotary_dim == 0);
    CHECK(m.moe.num_groups == 1);
    ParamCounts p = count_params(m);
    CHECK(rel_err(static_cast<double>(p.total), 142e9) < 0.006);  // counted 142.77B ("142B" truncates)
    CHECK(consistent(static_cast<double>(p.active), 14e9, 1e9));  // counted 14.02B
}

TEST_CASE("Qwen3-Next-80B-A3B: gated DeltaNet hybrid, 80B / 3B non-embedding, MTP apart", "[hf_import][vendor]") {
    // Published config (Thinking; the Instruct config has the same keys and values). Model card: "80B in total
    // and 3B activated; Non-Embedding 79B" (non-embedding = embedding and LM head excluded).
    ModelConfig m = hf("qwen3-next-80b-a3b-thinking.json");
    CHECK(m.family == "qwen3_next");
    CHECK(m.num_linear_attention_layers() == 36);
    CHECK(m.is_linear_attention_layer(0));
    CHECK_FALSE(m.is_linear_attention_layer(3));  // every 4th layer is full attention
    CHECK(m.linear_attn.kind == LinearAttentionKind::gated_delta_net);
    CHECK(m.linear_attn.conv_channels() == 8192);
    CHECK(m.attn.output_gate);
    CHECK(m.attn.rotary_dim == 64);
    CHECK(m.moe.shared_expert_gate);
    CHECK(m.num_mtp_layers == 1);
    // One gated DeltaNet layer, by hand: in_proj_qkvz 2048 x 12288, in_proj_ba 2048 x 64, conv 8192 x 4,
    // dt_bias + A_log 2 x 32, norm 128, out_proj 4096 x 2048.
    CHECK(linear_attention_params_per_layer(m) == 2048 * 12288 + 2048 * 64 + 8192 * 4 + 64 + 128 + 4096 * 2048);
    ParamCounts p = count_params(m);
    CHECK(rel_err(static_cast<double>(p.total), 80e9) < 0.005);          // counted 79.67B
    CHECK(consistent(without_embedding_and_head(p, false), 79e9, 1e9));  // counted 79.05B
    CHECK(consistent(without_embedding_and_head(p, true), 3e9, 1e9));    // counted 3.25B
    // The engine runs linear_attention in place of attention on the DeltaNet layers.
    auto phases = phases_for_layer(m, 0, 1);
    CHECK(std::find(phases.begin(), phases.end(), Phase::linear_attention) != phases.end());
    CHECK(std::find(phases.begin(), phases.end(), Phase::attention) == phases.end());
    // The state is fixed per sequence: 36 layers x (32 x 128 x 128 + 8192 x 3) fp32, whatever the context.
    const double state = 36.0 * (32 * 128 * 128 + 8192 * 3) * 4.0;
    CHECK(linear_state_bytes_per_sequence(m) == state);
    CHECK(kv_bytes_per_sequence(m, 1000, 2) - kv_bytes_per_sequence(m, 0, 2) ==
          1000.0 * 12 * 2 * 2 * 256 * 2);  // only the 12 full-attention layers grow with the context
}

TEST_CASE("MiniMax-M1: lightning attention hybrid, 456B total, 45.9B active", "[hf_import][vendor]") {
    // Published config (MiniMax-AI/MiniMax-M1). Model card: "456 billion parameters in total, 45.9 billion activated
    // per token" (activated: embedding and LM head excluded, as the count shows).
    ModelConfig m = hf("minimax-m1.json");
    CHECK(m.family == "minimax");
    CHECK(m.num_linear_attention_layers() == 70);
    CHECK_FALSE(m.is_linear_attention_layer(7));
    CHECK(m.linear_attn.kind == LinearAttentionKind::lightning);
    CHECK(m.attn.rotary_dim == 64);
    // One lightning layer: qkv_proj 6144 x 3 x 8192, output_gate 6144 x 8192, norm 8192, out_proj 8192 x 6144.
    CHECK(linear_attention_params_per_layer(m) == 6144LL * 3 * 8192 + 6144LL * 8192 + 8192 + 8192LL * 6144);
    ParamCounts p = count_params(m);
    CHECK(rel_err(static_cast<double>(p.total), 456e9) < 0.005);         // counted 456.09B
    CHECK(rel_err(without_embedding_and_head(p, true), 45.9e9) < 0.01);  // counted 45.95B
}

TEST_CASE("Hunyuan-A13B: 80B total, 13B active", "[hf_import][vendor]") {
    // Published config (Tencent's GitHub release, model_type "hunyuan"). README: "80 billion total parameters
    // and 13 billion active".
    ModelConfig m = hf("hunyuan-a13b-instruct.json");
    CHECK(m.family == "hunyuan_v1_moe");
    CHECK(m.moe.top_k == 8);
    CHECK(m.moe.shared_intermediate_size == 3072);
    CHECK(m.attn.qk_norm);
    CHECK(m.tie_word_embeddings);
    ParamCounts p = count_params(m);
    CHECK(rel_err(static_cast<double>(p.total), 80e9) < 0.005);   // counted 80.39B
    CHECK(consistent(static_cast<double>(p.active), 13e9, 1e9));  // counted 12.75B
    // Per-layer lists must hold one value.
    json j = load_json_file(kHf + "hunyuan-a13b-instruct.json", 1 << 20);
    j["moe_topk"][5] = 4;
    std::string msg = test::config_error_of([&] { hf_json(j); });
    CHECK(msg.find("moe_topk[5]") != std::string::npos);
    j = load_json_file(kHf + "hunyuan-a13b-instruct.json", 1 << 20);
    j["use_cla"] = true;
    CHECK(test::config_error_of([&] { hf_json(j); }).find("use_cla") != std::string::npos);
}

TEST_CASE("Granite 3.0 / 3.1 1B-A400M: 1.3B total, 400M active", "[hf_import][vendor]") {
    // Published configs (instruct). IBM's model table: 1.3B total, 400M active.
    for (const char* f : {"granite-3.0-1b-a400m-instruct.json", "granite-3.1-1b-a400m-instruct.json"}) {
        ModelConfig m = hf(f);
        CHECK(m.family == "granitemoe");
        CHECK(m.moe.routing == RoutingKind::topk_softmax);
        ParamCounts p = count_params(m);
        CHECK(consistent(static_cast<double>(p.total), 1.3e9, 0.1e9));   // counted 1.335B
        CHECK(consistent(static_cast<double>(p.active), 400e6, 100e6));  // counted 429M
    }
}

TEST_CASE("Ling-lite (bailing_moe): 16.8B total, 2.75B active", "[hf_import][vendor]") {
    // Published configs from inclusionAI's repository; Ling README: 16.8B total, 2.75B activated.
    for (const char* f : {"ling-lite.json", "ling-lite-base.json"}) {
        ModelConfig m = hf(f);
        CHECK(m.family == "bailing_moe");
        CHECK(m.moe.routing == RoutingKind::softmax_topk);
        CHECK(m.moe.num_shared_experts == 2);
        ParamCounts p = count_params(m);
        CHECK(rel_err(static_cast<double>(p.total), 16.8e9) < 0.005);  // counted 16.80B
        CHECK(rel_err(static_cast<double>(p.active), 2.75e9) < 0.01);  // counted 2.753B
    }
    // Ling 2.0 (BailingMoeV2ForCausalLM, same model_type): sigmoid + expert bias in groups, q/k norms.
    json j = load_json_file(kHf + "ling-lite.json", 1 << 20);
    j["architectures"] = {"BailingMoeV2ForCausalLM"};
    j["n_group"] = 8;
    j["topk_group"] = 4;
    j["partial_rotary_factor"] = 0.5;
    ModelConfig v2 = hf_json(j);
    CHECK(v2.moe.routing == RoutingKind::sigmoid_group_topk);
    CHECK(v2.moe.router_correction_bias);
    CHECK(v2.attn.qk_norm);
    CHECK(v2.attn.rotary_dim == 64);
}

TEST_CASE("ERNIE-4.5 MoE: layer range, softmax with correction bias, 21B / 3B", "[hf_import][vendor]") {
    // ERNIE-4.5-21B-A3B's shapes (Ernie4_5_MoeConfig keys; transcribed from the model card and transformers docs,
    // no published config.json was found in the searchable public code). Card: 21B total, 3B activated.
    json j = json::parse(R"({"architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe",
        "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28, "num_attention_heads": 20,
        "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 103424, "moe_num_experts": 64, "moe_k": 6,
        "moe_intermediate_size": 1536, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
        "moe_layer_end_index": 27, "moe_layer_interval": 1, "use_bias": false, "tie_word_embeddings": true,
        "rope_theta": 500000, "num_nextn_predict_layers": 1})");
    ModelConfig m = hf_json(j);
    CHECK(m.family == "ernie4_5_moe");
    CHECK(m.num_dense_layers() == 1);
    CHECK(m.moe.routing == RoutingKind::softmax_topk);
    CHECK(m.moe.router_correction_bias);
    CHECK(m.moe.shared_intermediate_size == 1536);
    ParamCounts p = count_params(m);
    // Hub total of the 21B checkpoint: 21,825,437,888 (no MTP layer, tied embeddings).
    CHECK(p.total == 21825437888);
    CHECK(consistent(without_embedding_and_head(p, true), 3e9, 1e9));  // counted 3.09B
}

TEST_CASE("DeepSeek-V3.2: the indexer counted, 671B main model, 685B with the MTP layer", "[hf_import][vendor]") {
    // Published config (DeepSeek-V3.2). Indexer per layer: wq_b 1536 x 8192, wk 7168 x 128, k_norm 2 x 128,
    // weights_proj 7168 x 64 = 13,959,424.
    ModelConfig v32 = hf("deepseek-v3.2.json");
    ModelConfig v3 = hf("deepseek-v3.json");
    CHECK(v32.attn.indexer_heads == 64);
    CHECK(v32.attn.indexer_topk == 2048);
    CHECK(attention_params_per_layer(v32) - attention_params_per_layer(v3) == 13959424);
    // The Hub's 685B is the checkpoint: main model + the MTP layer (which stores its own embedding and head copy).
    AccountingOptions with_mtp;
    with_mtp.include_mtp = true;
    ParamCounts p = count_params(v32, with_mtp);
    CHECK(rel_err(static_cast<double>(p.total), 685e9) < 0.005);  // counted 683.5B
}

TEST_CASE("own schema round-trips the new fields; backends refuse what they do not run", "[hf_import][model_config]") {
    for (const char* f : {"qwen3-next-80b-a3b-thinking.json", "minimax-m1.json", "deepseek-v3.2.json"}) {
        ModelConfig m = hf(f);
        ModelConfig back = model_from_json(model_to_json(m), "roundtrip");
        validate(back, "roundtrip");
        CHECK(model_to_json(back) == model_to_json(m));
        CHECK(count_params(back).total == count_params(m).total);
    }
    json j = model_to_json(hf("minimax-m1.json"));
    j["attention"]["rotary_dim"] = 129;
    CHECK(test::config_error_of([&] { validate(model_from_json(j, "m.json"), "m.json"); }).find("rotary_dim") !=
          std::string::npos);
    j = model_to_json(hf("qwen3-next-80b-a3b-thinking.json"));
    j["linear_attention"]["num_key_heads"] = 3;
    CHECK(test::config_error_of([&] { validate(model_from_json(j, "m.json"), "m.json"); }).find("num_key_heads") !=
          std::string::npos);
}

TEST_CASE("hybrid models through the binary: plan, sim and cpu run them; cuda refuses by name", "[hf_import][cli]") {
    const std::string q = kHf + "qwen3-next-80b-a3b-thinking.json";
    const std::string tiny = std::string(MOEBENCH_TEST_DATA) + "/conformance/models/tiny-qwen3-next-80b-a3b.json";
    test::CliResult r = test::run_cli("run --backend cpu --model " + tiny +
                                      " --layers 2 --batch 2 --iters 1 --warmup 0 "
                                      "--check --out -");
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("\"linear_attention\""));
    r = test::run_cli("run --backend sim --model " + q +
                      " --dtype fp8 --layers 4 --batch 4 --iters 2 --warmup 0 --out -");
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("\"linear_attention\""));
    r = test::run_cli("plan --model " + kHf + "minimax-m1.json --batch 8 --context 4096");
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("of which recurrent state") && Catch::Contains("70 linear-attention layers"));
    // The cuda backend has no linear-attention kernel: refused before anything runs, naming the backends that run it.
    const ModelConfig m = hf("qwen3-next-80b-a3b-thinking.json");
    const std::string msg = test::config_error_of([&] { check_backend_runs_model(cuda_backend_traits(), m, {0}); });
    CHECK_THAT(msg, Catch::Contains("linear attention") && Catch::Contains("cpu"));
    CHECK_NOTHROW(check_backend_runs_model(cpu_backend_traits(), m, {0, 3}));
}

TEST_CASE("DeepSeek-V3.2 sparse attention: attention reads the indexer's top-k, the indexer scores all",
          "[hf_import]") {
    ModelConfig v32 = hf("deepseek-v3.2.json"), v3 = hf("deepseek-v3.json");
    // Up to 2048 tokens of context the attention is V3's plus the indexer's scoring (64 heads x 128 per token).
    const double indexer_per_token = 2.0 * 64 * 128 * 61;
    const double at1k_v3 = flops_per_token(v3, 1000).attention_context;
    CHECK(flops_per_token(v32, 1000).attention_context == Approx(at1k_v3 + indexer_per_token * 1000));
    // At 128k the attention reads 2048 tokens: its context FLOPs are V3's at 2048 plus the indexer over 128k.
    const double at2k_v3 = flops_per_token(v3, 2048).attention_context;
    CHECK(flops_per_token(v32, 131072).attention_context == Approx(at2k_v3 + indexer_per_token * 131072));
    // The indexer stays quadratic (64 x 128 MACs per pair, fp8 in the vendor kernel): about 4.6x fewer FLOPs at 128k.
    CHECK(flops_per_token(v32, 131072).attention_context < flops_per_token(v3, 131072).attention_context / 4);
    // The KV cache keeps every token's indexer key beside the latent.
    CHECK(kv_elems_per_token_per_layer(v32) == kv_elems_per_token_per_layer(v3) + 128);
    // Phase work: decode at 64k reads 2048 cached latents, scores all 64k.
    StepShape s;
    s.batch = 1;
    s.context = 65536;
    Precision fp8_weights = uniform_precision(DType::bf16);
    fp8_weights.dense_weights = DType::fp8;
    const PhaseWork sparse = phase_work(v32, Phase::attention, 3, s, {}, fp8_weights, 1);
    const PhaseWork dense = phase_work(v3, Phase::attention, 3, s, {}, fp8_weights, 1);
    CHECK(sparse.flops < dense.flops / 3);
    CHECK(sparse.activation_bytes < dense.activation_bytes / 3);
}
