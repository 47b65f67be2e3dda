// SPDX-License-Identifier: Apache-2.0
// The models the measured deployments run (issue 31): Kimi-K2.5 (kimi_k25), MiniMax-M2 / M2.5 (minimax_m2),
// Qwen3.5 MoE (qwen3_5_moe) and GLM-5 (glm_moe_dsa), from their Hugging Face configs (tests/data/hf-configs,
// provenance in SOURCES.md). Each is checked three ways: its shapes by hand, its exact count against an independent
// counter (a Python script that counts every weight from the config, and where one was published, the checkpoint's
// safetensors total), and the vendor's headline figures within their rounding, saying what the vendor counts.
#include "cli_helpers.hpp"
#include "config/model_config.hpp"
#include "error_helpers.hpp"
#include "hf_test_helpers.hpp"
#include "model/accounting.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace moebench;
using namespace moebench::test;

namespace {

double without_embedding_and_head(const ParamCounts& p, bool active) {
    const double emb = static_cast<double>(comp(p, Component::embedding) + comp(p, Component::lm_head));
    return static_cast<double>(active ? p.active : p.total) - emb;
}

json hf_file(const std::string& name) { return load_json_file(kHf + name, 1 << 20); }

AccountingOptions with_mtp() {
    AccountingOptions o;
    o.include_mtp = true;
    return o;
}

// Qwen3-VL's vision tower as Qwen3.5 ships it (not modelled by moebench; the reference for the checkpoint totals):
// per block qkv (+bias), proj (+bias), fc1 / fc2 (+biases), two LayerNorms with bias; the patch embedding
// (in_channels x temporal_patch x patch^2 -> hidden, + bias), the learned position table, the merger's LayerNorm and
// its two linears over hidden * spatial_merge^2.
int64_t qwen_vision_params(const json& v) {
    const int64_t h = v.at("hidden_size"), i = v.at("intermediate_size"), depth = v.at("depth");
    const int64_t patch = v.at("patch_size"), temporal = v.at("temporal_patch_size");
    const int64_t merge = v.at("spatial_merge_size");
    const int64_t out = v.at("out_hidden_size"), positions = v.at("num_position_embeddings"), ch = v.at("in_channels");
    const int64_t block = h * 3 * h + 3 * h + h * h + h + h * i + i + i * h + h + 4 * h;
    const int64_t mh = h * merge * merge;
    return depth * block + ch * temporal * patch * patch * h + h + positions * h + 2 * h + mh * mh + mh + mh * out +
           out;
}

// MoonViT as Kimi-K2.5 ships it (the same block; patch embedding 3 x patch^2 -> hidden + bias; a height x width
// position table; the patchmerger projector: LayerNorm, 4h -> 4h, 4h -> text hidden).
int64_t moonvit_params(const json& v, int64_t text_hidden) {
    const int64_t h = v.at("vt_hidden_size"), i = v.at("vt_intermediate_size"), depth = v.at("vt_num_hidden_layers");
    const int64_t patch = v.at("patch_size");
    const int64_t positions = v.at("init_pos_emb_height").get<int64_t>() * v.at("init_pos_emb_width").get<int64_t>();
    const int64_t block = h * 3 * h + 3 * h + h * h + h + h * i + i + i * h + h + 4 * h;
    const int64_t projector = 4 * h * 4 * h + 4 * h + 4 * h * text_hidden + text_hidden + 2 * h;
    return depth * block + 3 * patch * patch * h + h + positions * h + 2 * h + projector;
}

}  // namespace

TEST_CASE("Kimi-K2.5: the kimi_k2 text model of text_config, 1T / 32B, vision apart", "[hf_import][vendor]") {
    ModelConfig m = hf("kimi-k2.5.json");
    CHECK(m.family == "kimi_k25");
    CHECK_THAT(m.notes, Catch::Contains("vision tower (vision_config) is not modelled"));
    CHECK(m.attn.kind == AttentionKind::mla);
    CHECK(m.attn.num_heads == 64);  // DeepSeek-V3 has 128
    CHECK(m.attn.q_lora_rank == 1536);
    CHECK(m.moe.num_experts == 384);
    CHECK(m.moe.top_k == 8);
    CHECK(m.moe.routing == RoutingKind::sigmoid_group_topk);
    CHECK(m.moe.router_correction_bias);
    CHECK(m.moe.routed_scaling_factor == 2.827);
    CHECK(m.num_dense_layers() == 1);
    CHECK(m.num_mtp_layers == 0);
    // The text model's sizes are Kimi-K2's but for 64 MLA heads: the same counts as the K2 config with 64 heads.
    json k2 = hf_file("kimi-k2-instruct.json");
    k2["num_attention_heads"] = 64;
    k2["num_key_value_heads"] = 64;
    k2["max_position_embeddings"] = 262144;
    k2["rope_theta"] = 50000.0;
    k2["routed_scaling_factor"] = 2.827;
    CHECK(count_params(hf_json(k2)).by_component == count_params(m).by_component);

    const ParamCounts p = count_params(m);
    // The independent counter (research script count_params.py, every weight from the config's shapes).
    CHECK(p.total == 1026408232448);
    CHECK(p.active == 32861500928);
    // Moonshot: "Total Parameters 1T, Activated Parameters 32B ... Vision Encoder 400M" (listed apart, so not in the
    // 1T). "1T" read as 1.0T; the 32B counts the embedding and head as active (30.51B without them).
    CHECK(consistent(static_cast<double>(p.total), 1.0e12, 0.1e12));  // counted 1.026T
    CHECK(consistent(static_cast<double>(p.active), 32e9, 1e9));      // counted 32.86B
    CHECK_FALSE(consistent(without_embedding_and_head(p, true), 32e9, 1e9));
    // The published checkpoint: a weight report of moonshotai/Kimi-K2.5 gives 170,738,182,128 stored tensor
    // elements. The routed experts ship as compressed-tensors INT4 (8 weights per int32, a bf16 scale per 32 weights,
    // a 2-element shape per tensor, 3 tensors per expert), the rest as counted, plus the MoonViT tower.
    const json v = hf_file("kimi-k2.5.json").at("vision_config");
    const int64_t vision = moonvit_params(v, m.hidden_size);
    CHECK(vision == 471143920);  // Moonshot rounds it to "400M"
    const int64_t expert = routed_expert_params(m), experts = m.num_moe_layers() * m.moe.num_experts;
    const int64_t stored = p.total - experts * expert + vision + experts * (expert / 8 + expert / 32 + 3 * 2);
    CHECK(stored == 170738182128);
    // KV cache: the MLA latent (512) and the shared RoPE key (64) per token and layer.
    CHECK(kv_elems_per_token_per_layer(m) == 576);
    CHECK(kv_bytes_per_token(m, 2.0) == 61.0 * 576 * 2);
}

TEST_CASE("MiniMax-M2 / M2.5: wide GQA with whole-width q/k norms, sigmoid + routing bias, 230B / 10B",
          "[hf_import][vendor]") {
    // M2.5's config is reconstructed (every value sourced, the file assembled) and M2's is partial (the fields its
    // sources confirm): SOURCES.md. Both give the same shapes.
    ModelConfig m = hf("minimax-m2.5-reconstructed.json");
    CHECK(m.family == "minimax_m2");
    CHECK(m.num_moe_layers() == 62);
    CHECK(m.num_linear_attention_layers() == 0);        // attn_type_list is all 1 (softmax)
    CHECK(m.attn.num_heads * m.attn.head_dim == 6144);  // wider than the 3072 hidden
    CHECK(m.attn.num_kv_heads == 8);
    CHECK(m.attn.qk_norm_full);
    CHECK_FALSE(m.attn.qk_norm);
    CHECK(m.attn.rotary_dim == 64);
    CHECK(m.moe.routing == RoutingKind::sigmoid_group_topk);
    CHECK(m.moe.router_correction_bias);
    CHECK(m.moe.norm_topk_prob);
    CHECK(m.moe.routed_scaling_factor == 1.0);
    CHECK(m.moe.num_groups == 1);
    CHECK(m.moe.num_shared_experts == 0);
    CHECK(m.num_mtp_layers == 0);
    CHECK_THAT(m.notes, Catch::Contains("3 MTP modules are not counted"));
    // One attention layer by hand: q 3072 x 6144, k and v 3072 x 1024, o 6144 x 3072, q_norm 6144, k_norm 1024.
    CHECK(attention_params_per_layer(m) == 3072LL * 6144 + 2 * 3072LL * 1024 + 6144LL * 3072 + 6144 + 1024);
    const ParamCounts p = count_params(m);
    CHECK(p.total == 228689764864);  // the independent counter
    CHECK(p.active == 11030553088);
    CHECK(count_params(hf("minimax-m2-partial.json")).by_component == p.by_component);
    // MiniMax: "230 billion total parameters with 10 billion active parameters" (MTP left out: the 3 modules, if full
    // layers, would add about 11B). The 10B matches leaving the embedding and head out (11.03B with them).
    CHECK(consistent(static_cast<double>(p.total), 230e9, 10e9));       // counted 228.69B
    CHECK(consistent(without_embedding_and_head(p, true), 10e9, 1e9));  // counted 9.80B
    CHECK_FALSE(consistent(static_cast<double>(p.active), 10e9, 1e9));
    // KV cache: 8 KV heads x 128 for K and V on every one of the 62 layers.
    CHECK(kv_bytes_per_token(m, 2.0) == 62.0 * 2 * 8 * 128 * 2);
}

TEST_CASE("Qwen3.5 MoE: hybrid DeltaNet / gated attention, counts exact against the published checkpoints",
          "[hf_import][vendor]") {
    struct Case {
        const char* file;
        int64_t layers, linear, value_heads, total, active, mtp;
        double vendor_total, vendor_active;
    };
    // total, active: the independent counter (text model, embedding and head in, MTP and vision out).
    const Case cases[] = {
        {"qwen3.5-397b-a17b.json", 60, 45, 64, 396346350336, 17349040896, 6595568128, 397e9, 17e9},
        {"qwen3.5-122b-a10b.json", 48, 36, 64, 122111526912, 9771288576, 2523679232, 122e9, 10e9},
        {"qwen3.5-35b-a3b.json", 40, 30, 32, 34660610688, 3454988928, 844640768, 35e9, 3e9},
    };
    for (const Case& c : cases) {
        INFO(c.file);
        ModelConfig m = hf(c.file);
        CHECK(m.family == "qwen3_5_moe");
        CHECK_THAT(m.notes, Catch::Contains("vision tower (vision_config) is not modelled"));
        CHECK(m.num_layers == c.layers);
        CHECK(m.num_linear_attention_layers() == c.linear);
        for (int64_t l = 0; l < m.num_layers; ++l) CHECK(m.is_linear_attention_layer(l) == ((l + 1) % 4 != 0));
        CHECK(m.num_moe_layers() == m.num_layers);
        CHECK(m.linear_attn.kind == LinearAttentionKind::gated_delta_net);
        CHECK(m.linear_attn.num_key_heads == 16);
        CHECK(m.linear_attn.num_value_heads == c.value_heads);
        CHECK(m.attn.output_gate);
        CHECK(m.attn.head_dim == 256);
        CHECK(m.attn.rotary_dim == 64);  // rope_parameters.partial_rotary_factor 0.25
        CHECK(m.attn.qk_norm);
        CHECK(m.moe.routing == RoutingKind::softmax_topk);
        CHECK(m.moe.norm_topk_prob);
        CHECK(m.moe.shared_expert_gate);
        CHECK(m.moe.shared_intermediate_size == m.moe.expert_intermediate_size);
        CHECK_FALSE(m.tie_word_embeddings);  // the outer config's flag
        CHECK(m.num_mtp_layers == 1);
        const ParamCounts p = count_params(m);
        CHECK(p.total == c.total);
        CHECK(p.active == c.active);
        CHECK(comp(p, Component::mtp) == c.mtp);
        // Qwen's "N B in total and M B activated": the MTP layer out (with it 397B would be 403B), the embedding
        // and head in. The text model alone is within 1% (396.35B, 122.11B, 34.66B), but 396.35B does not round to
        // 397B; with the vision tower (~0.45B) all three are within the rounding (396.80B, 122.56B, 35.11B), so the
        // totals read as text model + vision. The activated figures count the embedding and head (without them:
        // 15.3B, 8.2B, 2.4B).
        const int64_t vision = qwen_vision_params(hf_file(c.file).at("vision_config"));
        CHECK(rel_err(static_cast<double>(p.total), c.vendor_total) < 0.01);
        CHECK(consistent(static_cast<double>(p.total + vision), c.vendor_total, 1e9));
        CHECK(consistent(static_cast<double>(p.active), c.vendor_active, 1e9));
        CHECK_FALSE(consistent(without_embedding_and_head(p, true), c.vendor_active, 1e9));
        // KV cache only in the full-attention quarter: 2 KV heads x 256 for K and V; the DeltaNet state (value
        // heads x 128 x 128 plus the conv's last 3 inputs over 2 x 2048 + value heads x 128 channels, fp32) is fixed.
        CHECK(kv_bytes_per_token(m, 2.0) == static_cast<double>(c.layers - c.linear) * 2 * 2 * 256 * 2);
        const double state = static_cast<double>(c.linear) *
                             static_cast<double>(c.value_heads * 128 * 128 + (4096 + c.value_heads * 128) * 3) * 4.0;
        CHECK(linear_state_bytes_per_sequence(m) == state);
        CHECK(kv_bytes_per_sequence(m, 0, 2.0) == state);
        CHECK(kv_bytes_per_sequence(m, 100000, 2.0) == state + 100000 * kv_bytes_per_token(m, 2.0));
    }
    // The shipped checkpoints hold the MTP layer and the vision tower: Qwen/Qwen3.5-122B-A10B's safetensors index
    // totals 125,086,497,008, and Qwen/Qwen3.6-35B-A3B (the same architecture and config shapes) 35,951,822,704.
    for (auto [file, published] : {std::pair<const char*, int64_t>{"qwen3.5-122b-a10b.json", 125086497008},
                                   {"qwen3.5-35b-a3b.json", 35951822704}}) {
        INFO(file);
        const int64_t vision = qwen_vision_params(hf_file(file).at("vision_config"));
        CHECK(count_params(hf(file), with_mtp()).total + vision == published);
    }
    // Shapes by hand (397B, hidden 4096): one gated attention layer (q_proj with the output gate 4096 x 32 x 256 x 2,
    // k/v 4096 x 512 each, o 8192 x 4096, q/k norm 256 each) and one DeltaNet layer (in_proj_qkv 4096 x 12288,
    // in_proj_z 4096 x 8192, in_proj_b/a 4096 x 64 each, conv 12288 x 4, dt_bias + A_log 2 x 64, norm 128,
    // out_proj 8192 x 4096).
    ModelConfig big = hf("qwen3.5-397b-a17b.json");
    CHECK(attention_params_per_layer(big) == 4096LL * 16384 + 2 * 4096LL * 512 + 8192LL * 4096 + 2 * 256);
    CHECK(linear_attention_params_per_layer(big) ==
          4096LL * 12288 + 4096LL * 8192 + 2 * 4096LL * 64 + 12288 * 4 + 2 * 64 + 128 + 8192LL * 4096);
    // The text model alone (model_type qwen3_5_moe_text) imports the same; its tie flag is its own then.
    json text = hf_file("qwen3.5-35b-a3b.json").at("text_config");
    ModelConfig alone = hf_json(text);
    CHECK(alone.family == "qwen3_5_moe");
    CHECK(count_params(alone).by_component == count_params(hf("qwen3.5-35b-a3b.json")).by_component);
}

TEST_CASE("GLM-5: MLA with GLM-5's head dims and the DSA indexer, 744B / 40B", "[hf_import][vendor]") {
    ModelConfig m = hf("glm-5.json");
    CHECK(m.family == "glm_moe_dsa");
    CHECK(m.attn.kind == AttentionKind::mla);
    CHECK(m.attn.q_lora_rank == 2048);
    CHECK(m.attn.qk_nope_head_dim == 192);
    CHECK(m.attn.v_head_dim == 256);
    CHECK(m.attn.head_dim == 256);  // nope + rope (the config's head_dim 64 is the RoPE part)
    CHECK(m.attn.indexer_heads == 32);
    CHECK(m.attn.indexer_head_dim == 128);
    CHECK(m.attn.indexer_topk == 2048);
    CHECK(m.num_dense_layers() == 3);
    CHECK(m.num_moe_layers() == 75);
    CHECK(m.moe.routing == RoutingKind::sigmoid_group_topk);
    CHECK(m.moe.routed_scaling_factor == 2.5);
    CHECK(m.num_mtp_layers == 1);
    // One attention layer by hand: q_a 6144 x 2048 + its norm, q_b 2048 x 64 x 256, kv_a 6144 x 576 + its norm 512,
    // kv_b 512 x 64 x (192 + 256), o 64 x 256 x 6144; the indexer wq_b 2048 x 32 x 128, wk 6144 x 128, k_norm
    // (LayerNorm) 2 x 128, weights_proj 6144 x 32.
    CHECK(attention_params_per_layer(m) == 6144LL * 2048 + 2048 + 2048LL * 64 * 256 + 6144LL * 576 + 512 +
                                               512LL * 64 * 448 + 64LL * 256 * 6144 + 2048LL * 32 * 128 + 6144LL * 128 +
                                               2 * 128 + 6144LL * 32);
    const ParamCounts p = count_params(m);
    CHECK(p.total == 743911218432);  // the independent counter
    CHECK(p.active == 41784728832);
    CHECK(count_params(m, with_mtp()).total == 753864139008);  // with the MTP layer (its own decoder layer)
    // Z.ai: "744B parameters (40B active)": MTP out, the embedding in for the total; the 40B matches the active
    // count without the embedding and head (41.78B with them).
    CHECK(consistent(static_cast<double>(p.total), 744e9, 1e9));        // counted 743.91B
    CHECK(consistent(without_embedding_and_head(p, true), 40e9, 1e9));  // counted 39.88B
    CHECK_FALSE(consistent(static_cast<double>(p.active), 40e9, 1e9));
    // KV cache: the MLA latent 512 + RoPE key 64, and the indexer's 128-wide key, per token on all 78 layers.
    CHECK(kv_elems_per_token_per_layer(m) == 512 + 64 + 128);
    CHECK(kv_bytes_per_token(m, 2.0) == 78.0 * 704 * 2);
}

TEST_CASE("the new families refuse fields they would mis-model, by name", "[hf_import]") {
    auto error_of = [](const json& j) { return test::config_error_of([&] { hf_json(j); }); };
    // Qwen3.5: a layer type the modelling code has no layer for; layer_types against full_attention_interval; a
    // dense layer the decoder never builds; another text model; two different RoPE fractions; no text_config object.
    json q = hf_file("qwen3.5-35b-a3b.json");
    q["text_config"]["layer_types"][3] = "sliding_attention";
    CHECK_THAT(error_of(q), Catch::Contains("text_config.layer_types[3]") && Catch::Contains("sliding_attention"));
    q = hf_file("qwen3.5-35b-a3b.json");
    q["text_config"]["layer_types"][2] = "full_attention";
    CHECK_THAT(error_of(q), Catch::Contains("layer_types[2]") && Catch::Contains("full_attention_interval"));
    q["text_config"].erase("full_attention_interval");  // layer_types alone decides
    CHECK(hf_json(q).num_linear_attention_layers() == 29);
    q = hf_file("qwen3.5-35b-a3b.json");
    q["text_config"]["mlp_only_layers"] = {0};
    CHECK_THAT(error_of(q), Catch::Contains("text_config.mlp_only_layers"));
    q = hf_file("qwen3.5-35b-a3b.json");
    q["text_config"]["model_type"] = "qwen3_5_text";
    CHECK_THAT(error_of(q), Catch::Contains("text_config.model_type") && Catch::Contains("qwen3_5_moe_text"));
    q = hf_file("qwen3.5-35b-a3b.json");
    q["text_config"]["rope_parameters"]["partial_rotary_factor"] = 0.5;  // read where transformers 5 writes it
    CHECK(hf_json(q).attn.rotary_dim == 128);
    q = hf_file("qwen3.5-35b-a3b.json");
    q["text_config"]["partial_rotary_factor"] = 0.5;
    CHECK_THAT(error_of(q), Catch::Contains("rope_parameters.partial_rotary_factor") && Catch::Contains("0.5"));
    q = hf_file("qwen3.5-35b-a3b.json");
    q["text_config"] = "text";
    CHECK_THAT(error_of(q), Catch::Contains("text_config"));
    // Kimi-K2.5: without its text model; tie flags that disagree.
    json k = hf_file("kimi-k2.5.json");
    k.erase("text_config");
    CHECK_THAT(error_of(k), Catch::Contains("text_config"));
    k = hf_file("kimi-k2.5.json");
    k["tie_word_embeddings"] = true;
    CHECK_THAT(error_of(k), Catch::Contains("text_config.tie_word_embeddings"));
    // MiniMax-M2: a lightning layer, another q/k norm, a shared expert, an unknown scoring function.
    json mm = hf_file("minimax-m2.5-reconstructed.json");
    mm["attn_type_list"][5] = 0;
    CHECK_THAT(error_of(mm), Catch::Contains("attn_type_list[5]") && Catch::Contains("model_type minimax"));
    mm = hf_file("minimax-m2.5-reconstructed.json");
    mm["qk_norm_type"] = "per_head";
    CHECK_THAT(error_of(mm), Catch::Contains("qk_norm_type") && Catch::Contains("per_head"));
    mm = hf_file("minimax-m2.5-reconstructed.json");
    mm["shared_intermediate_size"] = 1536;
    CHECK_THAT(error_of(mm), Catch::Contains("shared_intermediate_size"));
    mm = hf_file("minimax-m2.5-reconstructed.json");
    mm["scoring_func"] = "tanh";
    CHECK_THAT(error_of(mm), Catch::Contains("scoring_func") && Catch::Contains("tanh"));
    mm = hf_file("minimax-m2.5-reconstructed.json");
    mm["use_qk_norm"] = false;  // switched off: no norm weights
    CHECK(attention_params_per_layer(hf_json(mm)) == 3072LL * 6144 + 2 * 3072LL * 1024 + 6144LL * 3072);
    // GLM-5: qk_head_dim that is not nope + rope; layers without their own indexer (later GLM-MoE-DSA configs).
    json g = hf_file("glm-5.json");
    g["qk_head_dim"] = 192;
    CHECK_THAT(error_of(g), Catch::Contains("qk_head_dim") && Catch::Contains("256"));
    g = hf_file("glm-5.json");
    g["indexer_types"] = json::array();
    for (int i = 0; i < 78; ++i) g["indexer_types"].push_back(i % 4 == 0 ? "full" : "shared");
    CHECK_THAT(error_of(g), Catch::Contains("indexer_types[1]") && Catch::Contains("shared"));
    g = hf_file("glm-5.json");
    g["index_topk_freq"] = 2;
    CHECK_THAT(error_of(g), Catch::Contains("index_topk_freq"));
    g = hf_file("glm-5.json");
    g["index_topk_pattern"] = "FFSF";
    CHECK_THAT(error_of(g), Catch::Contains("index_topk_pattern"));
    g["index_topk_pattern"] = std::string(78, 'F');  // every layer its own indexer: accepted
    CHECK(hf_json(g).attn.indexer_heads == 32);
}

TEST_CASE("the deployed models through the binary: plan on h200-sxm and a sim run", "[hf_import][cli]") {
    for (const char* name :
         {"kimi-k2.5", "minimax-m2.5", "qwen3.5-397b-a17b", "qwen3.5-122b-a10b", "qwen3.5-35b-a3b", "glm-5"}) {
        INFO(name);
        test::CliResult r = test::run_cli(std::string("plan --model ") + name + " --hardware h200-sxm --dtype fp8");
        REQUIRE(r.exit_code == 0);
        CHECK_THAT(r.out, Catch::Contains("Parameters (counted)") && Catch::Contains("Memory per GPU (modeled)"));
        // Layers 2 and 3: a DeltaNet and a gated-attention layer (Qwen3.5), MoE layers elsewhere but GLM-5's (dense
        // to layer 2: its layer 3 is the first MoE one).
        r = test::run_cli(std::string("run --backend sim --hardware h200-sxm --model ") + name +
                          " --first-layer 2 --layers 2 --batch 16 --ep 8 --dtype fp8 --iters 2 --warmup 0 --out -");
        REQUIRE(r.exit_code == 0);
        CHECK_THAT(r.out, Catch::Contains("\"modeled\""));
    }
}
