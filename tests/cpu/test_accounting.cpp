// SPDX-License-Identifier: Apache-2.0
// Accounting against independent truth: hand-computed toy models (every component, FLOPs, KV bytes) and the
// vendor-published parameter counts of the five configs in tests/data/hf-configs.
#include "config/model_config.hpp"
#include "model/accounting.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

using namespace moebench;

namespace {

ModelConfig tiny(const std::string& name) { return load_model(std::string(MOEBENCH_TEST_DATA) + "/models/" + name); }
ModelConfig hf(const std::string& name) { return load_model(std::string(MOEBENCH_TEST_DATA) + "/hf-configs/" + name); }

int64_t comp(const ParamCounts& p, Component c) { return p.by_component[static_cast<int>(c)]; }
int64_t act(const ParamCounts& p, Component c) { return p.active_by_component[static_cast<int>(c)]; }
double fl(const FlopsPerToken& f, Component c) { return f.by_component[static_cast<int>(c)]; }

double rel_err(double counted, double published) { return std::fabs(counted - published) / published; }

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Hand-computed toy models. V = 100, H = 64, L = 2, 4 experts of width 32, top-2.

TEST_CASE("toy GQA: every parameter component by hand", "[accounting]") {
    ModelConfig m = tiny("tiny-gqa.json");  // heads 4, kv heads 2, head_dim 16, both layers MoE
    ParamCounts p = count_params(m);
    // embedding = lm_head = V*H = 100*64 = 6400
    CHECK(comp(p, Component::embedding) == 6400);
    CHECK(comp(p, Component::lm_head) == 6400);
    // attention per layer: q 64*4*16 = 4096, k = v = 64*2*16 = 2048, o 4*16*64 = 4096 -> 12288; x2 layers = 24576
    CHECK(attention_params_per_layer(m) == 12288);
    CHECK(comp(p, Component::attention) == 24576);
    // norms: 2 per layer * 64 * 2 layers + final 64 = 320
    CHECK(comp(p, Component::norms) == 320);
    // router: 64*4 = 256 per layer, x2 = 512
    CHECK(comp(p, Component::router) == 512);
    // one expert: 3*64*32 = 6144; routed = 4*6144*2 layers = 49152; active = 2*6144*2 = 24576
    CHECK(routed_expert_params(m) == 6144);
    CHECK(comp(p, Component::routed_experts) == 49152);
    CHECK(act(p, Component::routed_experts) == 24576);
    CHECK(comp(p, Component::shared_experts) == 0);
    CHECK(comp(p, Component::dense_mlp) == 0);
    CHECK(comp(p, Component::mtp) == 0);
    // total = 6400 + 6400 + 24576 + 320 + 512 + 49152 = 87360
    CHECK(p.total == 87360);
    // active = 87360 - (49152 - 24576) = 62784; without the input embedding: 62784 - 6400 = 56384
    CHECK(p.active == 62784);
    CHECK(p.active_excluding_embedding == 56384);
    CHECK(p.total_excluding_embedding == 80960);
}

TEST_CASE("toy GQA: FLOPs per token and KV bytes by hand", "[accounting]") {
    ModelConfig m = tiny("tiny-gqa.json");
    FlopsPerToken f = flops_per_token(m, 10);
    CHECK(fl(f, Component::embedding) == 0.0);
    CHECK(fl(f, Component::lm_head) == 12800.0);  // 2 * 100 * 64
    // context part per layer: QK^T 4 heads * 16 * 10 tokens + PV the same = 1280 MACs = 2560 FLOPs; x2 layers = 5120
    CHECK(f.attention_context == 5120.0);
    // projections: 2 * 12288 * 2 layers = 49152; + 5120 = 54272
    CHECK(fl(f, Component::attention) == 54272.0);
    CHECK(fl(f, Component::router) == 1024.0);           // 2 * 256 * 2 layers
    CHECK(fl(f, Component::routed_experts) == 49152.0);  // 2 * (2 experts * 6144) * 2 layers
    CHECK(fl(f, Component::norms) == 0.0);
    CHECK(f.total == 117248.0);  // 12800 + 54272 + 1024 + 49152
    // context 0: no attention context FLOPs, the rest unchanged
    CHECK(flops_per_token(m, 0).total == 117248.0 - 5120.0);
    // KV: 2 (K and V) * 2 kv heads * 16 = 64 elements per layer; 2 layers; bf16 = 2 bytes -> 256 bytes per token
    CHECK(kv_elems_per_token_per_layer(m) == 64);
    CHECK(kv_bytes_per_token(m, 2.0) == 256.0);
    CHECK(kv_bytes_per_sequence(m, 100, 2.0) == 25600.0);  // 100 tokens * 256
}

TEST_CASE("toy MLA: every parameter component by hand, MTP in and out", "[accounting]") {
    ModelConfig m = tiny("tiny-mla.json");  // q_lora 32, kv_lora 16, nope 8, rope 4, v 8; 1 shared + 4 routed
    // q_a 64*32 = 2048, q_a_norm 32, q_b 32*4*(8+4) = 1536, kv_a 64*(16+4) = 1280, kv_a_norm 16,
    // kv_b 16*4*(8+8) = 1024, o 4*8*64 = 2048 -> 7984 per layer
    CHECK(attention_params_per_layer(m) == 7984);
    CHECK(router_params_per_layer(m) == 260);  // 64*4 + 4 (score-correction bias)
    CHECK(shared_expert_params(m) == 6144);    // 1 * 3*64*32
    ParamCounts p = count_params(m);
    CHECK(comp(p, Component::embedding) == 6400);
    CHECK(comp(p, Component::lm_head) == 6400);
    CHECK(comp(p, Component::attention) == 15968);
    CHECK(comp(p, Component::norms) == 320);
    CHECK(comp(p, Component::router) == 520);
    CHECK(comp(p, Component::routed_experts) == 49152);
    CHECK(act(p, Component::routed_experts) == 24576);
    CHECK(comp(p, Component::shared_experts) == 12288);
    // total = 12800 + 15968 + 320 + 520 + 49152 + 12288 = 91048; active = 91048 - 24576 = 66472
    CHECK(p.total == 91048);
    CHECK(p.active == 66472);
    CHECK(p.active_excluding_embedding == 60072);

    // One MTP module: enorm + hnorm + head norm 3*64 = 192, eh_proj 2*64*64 = 8192, attention 7984, 2 norms 128,
    // router 260, shared 6144, routed 4*6144 = 24576 -> 47476; active with 2 experts: 47476 - 12288 = 35188.
    m.num_mtp_layers = 1;
    ParamCounts excl = count_params(m);
    CHECK(comp(excl, Component::mtp) == 47476);
    CHECK(act(excl, Component::mtp) == 35188);
    CHECK(excl.total == 91048);  // excluded by default
    ParamCounts incl = count_params(m, AccountingOptions{true});
    CHECK(incl.total == 91048 + 47476);
    CHECK(incl.active == 66472 + 35188);
}

TEST_CASE("toy MLA: FLOPs per token and KV bytes by hand", "[accounting]") {
    ModelConfig m = tiny("tiny-mla.json");
    FlopsPerToken f = flops_per_token(m, 10);
    // projections: q_a 2048 + q_b 1536 + kv_a 1280 + kv_b 1024 + o 2048 = 7936 MACs; 2 FLOPs * 2 layers = 31744.
    // context: 4 heads * (12 + 8) = 80 MACs per attended token; * 10 tokens * 2 layers * 2 = 3200.
    CHECK(f.attention_context == 3200.0);
    CHECK(fl(f, Component::attention) == 34944.0);
    CHECK(fl(f, Component::lm_head) == 12800.0);
    CHECK(fl(f, Component::router) == 1024.0);           // 2 * 64*4 * 2 layers (the bias is no MAC)
    CHECK(fl(f, Component::routed_experts) == 49152.0);  // 2 * 2*6144 * 2
    CHECK(fl(f, Component::shared_experts) == 24576.0);  // 2 * 6144 * 2
    CHECK(f.total == 122496.0);
    // MTP: eh_proj 8192 + attention 7936 + context 80*10 + head 6400 + router 256 + 2 experts 12288 + shared 6144
    // = 42016 MACs -> 84032 FLOPs; counted in by_component always, in total only with include_mtp.
    m.num_mtp_layers = 1;
    CHECK(fl(flops_per_token(m, 10), Component::mtp) == 84032.0);
    CHECK(flops_per_token(m, 10).total == 122496.0);
    CHECK(flops_per_token(m, 10, AccountingOptions{true}).total == 122496.0 + 84032.0);
    // KV: latent 16 + rope key 4 = 20 elements per layer, 2 layers, 2 bytes -> 80 bytes per token
    CHECK(kv_elems_per_token_per_layer(m) == 20);
    CHECK(kv_bytes_per_token(m, 2.0) == 80.0);
    CHECK(kv_bytes_per_token(m, 1.0) == 40.0);
}

TEST_CASE("toy gpt-oss-like: biases, sinks, sliding window by hand", "[accounting]") {
    ModelConfig m = tiny("tiny-gpt-oss.json");
    // attention: 12288 + q/k/v bias (4 + 2*2)*16 = 128 + o bias 64 + sinks 4 = 12484
    CHECK(attention_params_per_layer(m) == 12484);
    // expert: 6144 + gate/up bias 2*32 + down bias 64 = 6272; router 256 + 4 bias = 260
    CHECK(routed_expert_params(m) == 6272);
    CHECK(router_params_per_layer(m) == 260);
    ParamCounts p = count_params(m);
    // total = 12800 + 2*12484 + 320 + 2*260 + 2*4*6272 = 12800 + 24968 + 320 + 520 + 50176 = 88784
    CHECK(p.total == 88784);
    CHECK(p.active == 88784 - 2 * 2 * 6272);
    // layer 0 slides with window 8: at context 20 it attends 8 tokens, layer 1 all 20.
    CHECK(attended_tokens(m, 0, 20) == 8);
    CHECK(attended_tokens(m, 1, 20) == 20);
    CHECK(attended_tokens(m, 0, 5) == 5);
    // context FLOPs: (8 + 20) tokens * 2*4*16 MACs * 2 = 7168
    CHECK(flops_per_token(m, 20).attention_context == 7168.0);
    // KV for one 20-token sequence at 2 bytes: (8 + 20) * 64 elements * 2 = 3584
    CHECK(kv_bytes_per_sequence(m, 20, 2.0) == 3584.0);
}

TEST_CASE("toy dense-first-layer model by hand", "[accounting]") {
    ModelConfig m = tiny("tiny-dense-first.json");
    CHECK(m.num_dense_layers() == 1);
    CHECK(m.num_moe_layers() == 1);
    ParamCounts p = count_params(m);
    CHECK(comp(p, Component::dense_mlp) == 24576);       // 3*64*128, one layer
    CHECK(comp(p, Component::router) == 256);            // one MoE layer
    CHECK(comp(p, Component::routed_experts) == 24576);  // 4*6144, one layer
    CHECK(p.total == 6400 + 6400 + 24576 + 320 + 256 + 24576 + 24576);
    CHECK(fl(flops_per_token(m, 0), Component::dense_mlp) == 49152.0);
}

// ---------------------------------------------------------------------------------------------------------------
// Vendor-published counts (tests/data/README.md). Totals within 0.5 %, active within 1 % under the vendor's convention.

TEST_CASE("Mixtral-8x7B matches Mistral's 46.7B total / 12.9B active", "[accounting][vendor]") {
    // Source: Mistral AI, "Mixtral of experts" announcement (46.7B total, 12.9B per token; embedding and head
    // included).
    ParamCounts p = count_params(hf("mixtral-8x7b-v0.1.json"));
    CHECK(rel_err(static_cast<double>(p.total), 46.7e9) < 0.005);
    CHECK(rel_err(static_cast<double>(p.active), 12.9e9) < 0.01);
}

TEST_CASE("DeepSeek-V3 matches DeepSeek's 671B total; MTP excluded", "[accounting][vendor]") {
    // Source: DeepSeek-V3 README ("671B total parameters with 37B activated") and README_WEIGHTS.md (main model
    // 671B; MTP module 11.5B unique, 685B on the Hub together with the main model).
    ModelConfig m = hf("deepseek-v3.json");
    CHECK(m.num_dense_layers() == 3);
    CHECK(m.num_mtp_layers == 1);
    ParamCounts p = count_params(m);
    CHECK(rel_err(static_cast<double>(p.total), 671e9) < 0.005);
    // Active by hand from the shapes: per MoE layer 8 routed + 1 shared expert of 3*7168*2048 = 44,040,192 and a
    // router 7168*256 + 256; 58 MoE layers -> 58 * (9 * 44,040,192 + 1,835,264) = 23,095,425,536.
    // Attention 61 * 187,107,328 = 11,413,547,008; dense 3 * 3*7168*18432 = 1,189,085,184; norms 881,664;
    // embedding + head 2 * 129280*7168 = 1,853,358,080. Sum = 37,552,297,472.
    CHECK(p.active == 37552297472LL);
    // DeepSeek publishes "37B" (README) and "36.7B incl. 0.9B embedding and 0.9B head" (README_WEIGHTS). The shapes
    // give 37.55B with both included and 36.63B without the input embedding; the latter is within 0.2 % of 36.7B
    // and rounds to the headline 37B, so that is the convention that reproduces DeepSeek's figure.
    CHECK(rel_err(static_cast<double>(p.active_excluding_embedding), 36.7e9) < 0.01);
    CHECK(std::llround(static_cast<double>(p.active_excluding_embedding) / 1e9) == 37);
    // MTP: in by_component always, in the total only on request (671B + ~11.6B ~ the Hub's 685B minus shared parts).
    CHECK(rel_err(static_cast<double>(comp(p, Component::mtp)), 11.5e9) < 0.02);
    ParamCounts with_mtp = count_params(m, AccountingOptions{true});
    CHECK(with_mtp.total == p.total + comp(p, Component::mtp));
    // Hub total 685B = main model + MTP unique + the MTP copies of embedding and head (2 * 0.93B)
    CHECK(rel_err(static_cast<double>(with_mtp.total + comp(p, Component::embedding) + comp(p, Component::lm_head)),
                  685e9) < 0.005);
}

TEST_CASE("Qwen3-30B-A3B matches Qwen's 30.5B total / 29.9B non-embedding / 3.3B active", "[accounting][vendor]") {
    // Source: Qwen3-30B-A3B model card (30.5B total, 29.9B non-embedding, 3.3B activated).
    ParamCounts p = count_params(hf("qwen3-30b-a3b.json"));
    CHECK(rel_err(static_cast<double>(p.total), 30.5e9) < 0.005);
    // Qwen's "non-embedding" leaves out both the input embedding and the (untied) LM head.
    int64_t non_emb = p.total - comp(p, Component::embedding) - comp(p, Component::lm_head);
    CHECK(rel_err(static_cast<double>(non_emb), 29.9e9) < 0.005);
    // Active includes embedding and head: counted 3.353B; Qwen truncates to one decimal ("3.3B").
    CHECK(rel_err(static_cast<double>(p.active), 3.3e9) < 0.02);
    CHECK(std::floor(static_cast<double>(p.active) / 1e8) == 33);
}

TEST_CASE("Qwen2-57B-A14B matches Qwen's 57.41B total / 56.32B non-embedding / 14B active", "[accounting][vendor]") {
    // Source: Qwen2 blog model table (57.41B params, 56.32B non-embedding, A14B).
    ModelConfig m = hf("qwen2-57b-a14b.json");
    CHECK(m.moe.num_shared_experts == 1);
    CHECK(m.moe.shared_intermediate_size == 20480);
    CHECK(m.moe.shared_expert_gate);
    CHECK(m.attn.qkv_bias);
    ParamCounts p = count_params(m);
    CHECK(rel_err(static_cast<double>(p.total), 57.41e9) < 0.005);
    int64_t non_emb = p.total - comp(p, Component::embedding) - comp(p, Component::lm_head);
    CHECK(rel_err(static_cast<double>(non_emb), 56.32e9) < 0.005);
    // Active (embedding and head included, as Qwen counts): 28 layers * (8 routed * 3*3584*2560 + shared
    // 3*3584*20480 + gate 3584 + router 3584*64) + attention + norms + 2 * 151936*3584 = 14.25B. Qwen names it
    // "A14B": the published figure is the count truncated to whole billions.
    CHECK(rel_err(static_cast<double>(p.active), 14e9) < 0.02);
    CHECK(std::floor(static_cast<double>(p.active) / 1e9) == 14);
}

TEST_CASE("gpt-oss-20b matches OpenAI's 20.91B total / 3.61B active", "[accounting][vendor]") {
    // Source: gpt-oss model card (20.91B total; 3.61B active, counting the unembedding but not the embedding).
    ModelConfig m = hf("gpt-oss-20b.json");
    CHECK(m.attn.sinks);
    CHECK(m.moe.expert_bias);
    CHECK(m.moe.router_bias);
    ParamCounts p = count_params(m);
    CHECK(rel_err(static_cast<double>(p.total), 20.91e9) < 0.005);
    CHECK(rel_err(static_cast<double>(p.active_excluding_embedding), 3.61e9) < 0.01);
}
