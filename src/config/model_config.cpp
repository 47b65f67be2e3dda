// SPDX-License-Identifier: Apache-2.0
// moebench's own model schema (docs/model-schema.md): parse, serialise, validate, and load by name or path
// (a Hugging Face config.json is detected and handed to hf_import.cpp).
#include "config/model_config.hpp"

#include "common/did_you_mean.hpp"
#include "common/error.hpp"
#include "common/file_memo.hpp"
#include "common/flag_names.hpp"
#include "common/names.hpp"
#include "common/paths.hpp"
#include "config/file_kind.hpp"
#include "config/model_ranges.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace moebench {

const char* to_string(AttentionKind k) {
    switch (k) {
        case AttentionKind::gqa: return "gqa";
        case AttentionKind::mla: return "mla";
    }
    return "?";
}
const char* to_string(NormKind k) {
    switch (k) {
        case NormKind::rmsnorm: return "rmsnorm";
        case NormKind::layernorm: return "layernorm";
    }
    return "?";
}
const char* to_string(Activation a) {
    switch (a) {
        case Activation::swiglu: return "swiglu";
        case Activation::geglu: return "geglu";
        case Activation::swiglu_oai: return "swiglu_oai";
    }
    return "?";
}
const char* to_string(RoutingKind r) {
    switch (r) {
        case RoutingKind::softmax_topk: return "softmax_topk";
        case RoutingKind::topk_softmax: return "topk_softmax";
        case RoutingKind::sigmoid_group_topk: return "sigmoid_group_topk";
        case RoutingKind::softmax_group_greedy: return "softmax_group_greedy";
        case RoutingKind::topk_sigmoid: return "topk_sigmoid";
        case RoutingKind::sparsemixer: return "sparsemixer";
    }
    return "?";
}

const char* to_string(LinearAttentionKind k) {
    switch (k) {
        case LinearAttentionKind::gated_delta_net: return "gated_delta_net";
        case LinearAttentionKind::lightning: return "lightning";
    }
    return "?";
}

int64_t LinearAttentionConfig::state_elems() const {
    return num_value_heads * key_head_dim * value_head_dim +
           (conv_kernel > 1 ? conv_channels() * (conv_kernel - 1) : 0);
}

bool ModelConfig::is_linear_attention_layer(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(layer_linear.size()) &&
           layer_linear[static_cast<size_t>(layer)] != 0;
}
int64_t ModelConfig::num_linear_attention_layers() const {
    return std::count(layer_linear.begin(), layer_linear.end(), uint8_t{1});
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
    if (moe.num_experts <= 0) return false;
    if (layer_is_moe.empty()) return true;
    MOEBENCH_CHECK(layer >= 0 && layer < static_cast<int64_t>(layer_is_moe.size()), "layer {} out of range", layer);
    return layer_is_moe[static_cast<size_t>(layer)] != 0;
}
int64_t ModelConfig::num_moe_layers() const {
    int64_t n = 0;
    for (int64_t l = 0; l < num_layers; ++l) n += is_moe_layer(l) ? 1 : 0;
    return n;
}
int64_t ModelConfig::num_dense_layers() const { return num_layers - num_moe_layers(); }

namespace {

// Parses an enum from its to_string() spelling; unknown -> ConfigError listing the choices.
template <typename E, size_t N>
E parse_enum(const JsonReader& r, const std::string& key, const E (&choices)[N], E dflt) {
    if (!r.has(key)) return dflt;
    std::string v = r.req_string(key);
    std::string list;
    for (E c : choices) {
        if (v == to_string(c)) return c;
        list += (list.empty() ? "" : ", ") + std::string(to_string(c));
    }
    config_error(r.field(key), "unknown value", "\"" + v + "\"", "use one of: " + list);
}

// Rejects keys not in `known` so that a typo does not silently become a default. Keys starting with '_'
// or named "comment" are free-form.
void reject_unknown_keys(const JsonReader& r, const std::set<std::string>& known) {
    for (auto it = r.raw().begin(); it != r.raw().end(); ++it) {
        const std::string& k = it.key();
        if (known.count(k) || k == "comment" || (!k.empty() && k[0] == '_')) continue;
        std::string list;
        for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
        config_error(r.field(k), "unknown field", "",
                     did_you_mean(k, {known.begin(), known.end()}, "remove it or use one of: " + list));
    }
}

// Reads a list of layer indices (each in [0, num_layers)) into a 0/1 mask.
std::vector<uint8_t> read_layer_list(const JsonReader& r, const std::string& key, int64_t num_layers, uint8_t listed,
                                     uint8_t unlisted) {
    std::vector<uint8_t> mask(static_cast<size_t>(std::max<int64_t>(num_layers, 0)), unlisted);
    if (!r.has(key)) return mask;
    const json& v = r.raw().at(key);
    if (!v.is_array()) config_error(r.field(key), "must be a list of layer indices", json_brief(v), "e.g. [0, 1, 2]");
    for (size_t i = 0; i < v.size(); ++i) {
        const json& e = v[i];
        std::string f = r.field(key) + "[" + std::to_string(i) + "]";
        if (!e.is_number_integer()) config_error(f, "must be an integer layer index", json_brief(e), "");
        int64_t idx = e.get<int64_t>();
        if (idx < 0 || idx >= num_layers)
            config_error(
                f, "layer index out of range", std::to_string(idx),
                "use 0.." + std::to_string(num_layers - 1) + " (num_layers = " + std::to_string(num_layers) + ")");
        mask[static_cast<size_t>(idx)] = listed;
    }
    return mask;
}

json layer_list(const std::vector<uint8_t>& mask, uint8_t want) {
    json out = json::array();
    for (size_t i = 0; i < mask.size(); ++i)
        if (mask[i] == want) out.push_back(static_cast<int64_t>(i));
    return out;
}

constexpr AttentionKind kAttnKinds[] = {AttentionKind::gqa, AttentionKind::mla};
constexpr NormKind kNormKinds[] = {NormKind::rmsnorm, NormKind::layernorm};
constexpr Activation kActivations[] = {Activation::swiglu, Activation::geglu, Activation::swiglu_oai};
constexpr RoutingKind kRoutings[] = {RoutingKind::softmax_topk,       RoutingKind::topk_softmax,
                                     RoutingKind::sigmoid_group_topk, RoutingKind::softmax_group_greedy,
                                     RoutingKind::topk_sigmoid,       RoutingKind::sparsemixer};
constexpr LinearAttentionKind kLinearKinds[] = {LinearAttentionKind::gated_delta_net, LinearAttentionKind::lightning};

std::string str(int64_t v) { return std::to_string(v); }

// Bounds far above any real model, so that a typo is refused by name instead of overflowing the int64 accounting
// or sizing an allocation (the per-layer lists are sized by num_layers as they are read).
constexpr int64_t kMaxDim = int64_t{1} << 24, kMaxTokens = int64_t{1} << 40;

// A required positive size, refused beyond `cap` before anything is sized by it.
int64_t req_bounded(const JsonReader& r, const std::string& key, int64_t cap = kMaxDim) {
    const int64_t v = r.req_positive(key);
    if (v > cap) config_error(r.field(key), "is too large", str(v), "use at most " + str(cap) + " (check for a typo)");
    return v;
}

}  // namespace

namespace {

// The "attention" block of a moebench model file.
AttentionConfig attention_from_json(const JsonReader& r, int64_t hidden_size) {
    JsonReader a = r.child("attention");
    reject_unknown_keys(
        a,
        {"kind",        "num_heads",     "num_kv_heads",     "head_dim",        "qkv_bias",         "o_bias",
         "qk_norm",     "qk_norm_full",  "q_lora_rank",      "kv_lora_rank",    "qk_nope_head_dim", "qk_rope_head_dim",
         "v_head_dim",  "sinks",         "sliding_window",   "attention_chunk", "rope_theta",       "rotary_dim",
         "output_gate", "indexer_heads", "indexer_head_dim", "indexer_topk"});
    AttentionConfig at;
    at.kind = parse_enum(a, "kind", kAttnKinds, AttentionKind::gqa);
    at.num_heads = a.req_positive("num_heads");
    if (at.kind == AttentionKind::gqa) {
        at.num_kv_heads = a.has("num_kv_heads") ? a.req_positive("num_kv_heads") : at.num_heads;
        at.head_dim = a.has("head_dim") ? a.req_positive("head_dim") : hidden_size / at.num_heads;
    } else {
        at.num_kv_heads = a.opt_nonneg("num_kv_heads", at.num_heads);
        at.head_dim = a.opt_nonneg("head_dim", 0);
        at.q_lora_rank = a.opt_nonneg("q_lora_rank", 0);
        at.kv_lora_rank = a.req_positive("kv_lora_rank");
        at.qk_nope_head_dim = a.opt_nonneg("qk_nope_head_dim", 0);
        at.qk_rope_head_dim = a.req_positive("qk_rope_head_dim");
        at.v_head_dim = a.req_positive("v_head_dim");
    }
    at.qkv_bias = a.opt_bool("qkv_bias", false);
    at.o_bias = a.opt_bool("o_bias", false);
    at.qk_norm = a.opt_bool("qk_norm", false);
    at.qk_norm_full = a.opt_bool("qk_norm_full", false);
    at.sinks = a.opt_bool("sinks", false);
    at.sliding_window = a.opt_nonneg("sliding_window", 0);
    at.attention_chunk = a.opt_nonneg("attention_chunk", 0);
    at.rope_theta = a.opt_double("rope_theta", 10000.0);
    at.rotary_dim = a.opt_nonneg("rotary_dim", 0);
    at.output_gate = a.opt_bool("output_gate", false);
    at.indexer_heads = a.opt_nonneg("indexer_heads", 0);
    at.indexer_head_dim = a.opt_nonneg("indexer_head_dim", 0);
    at.indexer_topk = a.opt_nonneg("indexer_topk", 0);
    return at;
}

// The optional "linear_attention" block (hybrid models; the layers are listed in linear_attention_layers).
LinearAttentionConfig linear_attention_from_json(const JsonReader& r) {
    LinearAttentionConfig la;
    auto b = r.opt_child("linear_attention");
    if (!b) return la;
    reject_unknown_keys(*b,
                        {"kind", "num_key_heads", "num_value_heads", "key_head_dim", "value_head_dim", "conv_kernel"});
    la.kind = parse_enum(*b, "kind", kLinearKinds, LinearAttentionKind::gated_delta_net);
    la.num_key_heads = b->req_positive("num_key_heads");
    la.num_value_heads = b->has("num_value_heads") ? b->req_positive("num_value_heads") : la.num_key_heads;
    la.key_head_dim = b->req_positive("key_head_dim");
    la.value_head_dim = b->has("value_head_dim") ? b->req_positive("value_head_dim") : la.key_head_dim;
    la.conv_kernel = b->opt_nonneg("conv_kernel", 0);
    return la;
}

// The optional "moe" block (absent: a dense model).
MoeConfig moe_from_json(const JsonReader& r) {
    MoeConfig e;
    auto mo = r.opt_child("moe");
    if (!mo) return e;
    reject_unknown_keys(
        *mo, {"num_experts", "top_k", "expert_intermediate_size", "num_shared_experts", "shared_intermediate_size",
              "shared_expert_gate", "expert_bias", "router_bias", "router_correction_bias", "routing", "norm_topk_prob",
              "routed_scaling_factor", "num_groups", "topk_groups", "router_jitter_noise"});
    e.num_experts = mo->req_positive("num_experts");
    e.top_k = mo->req_positive("top_k");
    e.expert_intermediate_size = mo->req_positive("expert_intermediate_size");
    e.num_shared_experts = mo->opt_nonneg("num_shared_experts", 0);
    e.shared_intermediate_size = e.num_shared_experts > 0
                                     ? mo->opt_nonneg("shared_intermediate_size", e.expert_intermediate_size)
                                     : mo->opt_nonneg("shared_intermediate_size", 0);
    e.shared_expert_gate = mo->opt_bool("shared_expert_gate", false);
    e.expert_bias = mo->opt_bool("expert_bias", false);
    e.router_bias = mo->opt_bool("router_bias", false);
    e.router_correction_bias = mo->opt_bool("router_correction_bias", false);
    e.routing = parse_enum(*mo, "routing", kRoutings, RoutingKind::softmax_topk);
    e.norm_topk_prob = mo->opt_bool("norm_topk_prob", false);
    e.routed_scaling_factor = mo->opt_double("routed_scaling_factor", 1.0);
    e.num_groups = mo->opt_int("num_groups", 1);
    e.topk_groups = mo->opt_int("topk_groups", 1);
    e.router_jitter_noise = mo->opt_double("router_jitter_noise", 0.01);
    return e;
}

}  // namespace

ModelConfig model_from_json(const json& j, const std::string& path) {
    JsonReader r(j, path);
    reject_unknown_keys(r, {"moebench",
                            "name",
                            "family",
                            "notes",
                            "unconfirmed",
                            "vocab_size",
                            "hidden_size",
                            "num_layers",
                            "max_position_embeddings",
                            "attention",
                            "moe",
                            "dense_intermediate_size",
                            "dense_layers",
                            "sliding_layers",
                            "activation",
                            "swiglu_limit",
                            "norm",
                            "norm_bias",
                            "norms_per_layer",
                            "norm_eps",
                            "tie_word_embeddings",
                            "lm_head_bias",
                            "num_mtp_layers",
                            "linear_attention",
                            "linear_attention_layers"});
    if (r.has("moebench")) {
        std::string s = r.req_string("moebench");
        if (s != "model/1")
            config_error(r.field("moebench"), "unsupported schema version", "\"" + s + "\"", "use \"model/1\"");
    }
    ModelConfig m;
    m.name = r.req_string("name");
    m.family = r.opt_string("family", "custom");
    m.notes = r.opt_string("notes", "");
    m.unconfirmed = r.opt_bool("unconfirmed", false);
    m.vocab_size = req_bounded(r, "vocab_size");
    m.hidden_size = req_bounded(r, "hidden_size");
    m.num_layers = req_bounded(r, "num_layers");
    m.max_position_embeddings = r.opt_nonneg("max_position_embeddings", 0);

    m.attn = attention_from_json(r, m.hidden_size);
    m.moe = moe_from_json(r);
    m.dense_intermediate_size = r.opt_nonneg("dense_intermediate_size", 0);
    // Without a "moe" block every layer is dense; with one, only the listed dense_layers are.
    if (m.moe.num_experts > 0) {
        m.layer_is_moe = read_layer_list(r, "dense_layers", m.num_layers, 0, 1);
    } else {
        m.layer_is_moe.assign(static_cast<size_t>(m.num_layers), 0);
        if (r.has("dense_layers")) read_layer_list(r, "dense_layers", m.num_layers, 0, 0);  // still range-checked
    }
    if (r.has("sliding_layers")) m.layer_sliding = read_layer_list(r, "sliding_layers", m.num_layers, 1, 0);
    m.linear_attn = linear_attention_from_json(r);
    if (r.has("linear_attention_layers")) {
        if (!r.has("linear_attention"))
            config_error(r.field("linear_attention_layers"), "lists layers but there is no linear_attention block", "",
                         "add \"linear_attention\": {\"kind\": ..., \"num_key_heads\": ..., \"key_head_dim\": ...}");
        m.layer_linear = read_layer_list(r, "linear_attention_layers", m.num_layers, 1, 0);
    }

    m.activation = parse_enum(r, "activation", kActivations, Activation::swiglu);
    m.swiglu_limit = r.opt_double("swiglu_limit", 0.0);
    m.norm = parse_enum(r, "norm", kNormKinds, NormKind::rmsnorm);
    m.norm_bias = r.opt_bool("norm_bias", false);
    m.norms_per_layer = r.opt_int("norms_per_layer", 2);
    m.norm_eps = r.opt_double("norm_eps", 1e-6);
    m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", false);
    m.lm_head_bias = r.opt_bool("lm_head_bias", false);
    m.num_mtp_layers = r.opt_nonneg("num_mtp_layers", 0);
    return m;
}

json model_to_json(const ModelConfig& m) {
    json j;
    j["moebench"] = "model/1";
    j["name"] = m.name;
    j["family"] = m.family;
    j["notes"] = m.notes;
    j["unconfirmed"] = m.unconfirmed;
    j["vocab_size"] = m.vocab_size;
    j["hidden_size"] = m.hidden_size;
    j["num_layers"] = m.num_layers;
    j["max_position_embeddings"] = m.max_position_embeddings;

    const AttentionConfig& at = m.attn;
    json a;
    a["kind"] = to_string(at.kind);
    a["num_heads"] = at.num_heads;
    a["num_kv_heads"] = at.num_kv_heads;
    a["head_dim"] = at.head_dim;
    if (at.kind == AttentionKind::mla) {
        a["q_lora_rank"] = at.q_lora_rank;
        a["kv_lora_rank"] = at.kv_lora_rank;
        a["qk_nope_head_dim"] = at.qk_nope_head_dim;
        a["qk_rope_head_dim"] = at.qk_rope_head_dim;
        a["v_head_dim"] = at.v_head_dim;
    }
    a["qkv_bias"] = at.qkv_bias;
    a["o_bias"] = at.o_bias;
    a["qk_norm"] = at.qk_norm;
    a["qk_norm_full"] = at.qk_norm_full;
    a["sinks"] = at.sinks;
    a["sliding_window"] = at.sliding_window;
    a["attention_chunk"] = at.attention_chunk;
    a["rope_theta"] = at.rope_theta;
    a["rotary_dim"] = at.rotary_dim;
    a["output_gate"] = at.output_gate;
    if (at.indexer_heads > 0) {
        a["indexer_heads"] = at.indexer_heads;
        a["indexer_head_dim"] = at.indexer_head_dim;
        a["indexer_topk"] = at.indexer_topk;
    }
    j["attention"] = a;
    if (m.num_linear_attention_layers() > 0) {
        const LinearAttentionConfig& la = m.linear_attn;
        j["linear_attention"] = {{"kind", to_string(la.kind)},
                                 {"num_key_heads", la.num_key_heads},
                                 {"num_value_heads", la.num_value_heads},
                                 {"key_head_dim", la.key_head_dim},
                                 {"value_head_dim", la.value_head_dim},
                                 {"conv_kernel", la.conv_kernel}};
        j["linear_attention_layers"] = layer_list(m.layer_linear, 1);
    }

    if (m.moe.num_experts > 0) {
        const MoeConfig& e = m.moe;
        json mo;
        mo["num_experts"] = e.num_experts;
        mo["top_k"] = e.top_k;
        mo["expert_intermediate_size"] = e.expert_intermediate_size;
        mo["num_shared_experts"] = e.num_shared_experts;
        mo["shared_intermediate_size"] = e.shared_intermediate_size;
        mo["shared_expert_gate"] = e.shared_expert_gate;
        mo["expert_bias"] = e.expert_bias;
        mo["router_bias"] = e.router_bias;
        mo["router_correction_bias"] = e.router_correction_bias;
        mo["routing"] = to_string(e.routing);
        mo["norm_topk_prob"] = e.norm_topk_prob;
        mo["routed_scaling_factor"] = e.routed_scaling_factor;
        mo["num_groups"] = e.num_groups;
        mo["topk_groups"] = e.topk_groups;
        if (e.routing == RoutingKind::sparsemixer) mo["router_jitter_noise"] = e.router_jitter_noise;
        j["moe"] = mo;
        j["dense_layers"] = layer_list(m.layer_is_moe, 0);
    }
    j["dense_intermediate_size"] = m.dense_intermediate_size;
    if (!m.layer_sliding.empty()) j["sliding_layers"] = layer_list(m.layer_sliding, 1);
    j["activation"] = to_string(m.activation);
    j["swiglu_limit"] = m.swiglu_limit;
    j["norm"] = to_string(m.norm);
    j["norm_bias"] = m.norm_bias;
    j["norms_per_layer"] = m.norms_per_layer;
    j["norm_eps"] = m.norm_eps;
    j["tie_word_embeddings"] = m.tie_word_embeddings;
    j["lm_head_bias"] = m.lm_head_bias;
    j["num_mtp_layers"] = m.num_mtp_layers;
    return j;
}

bool is_hf_config(const json& j) {
    if (!j.is_object() || j.contains("moebench")) return false;
    return j.contains("model_type") || j.contains("architectures");
}

namespace {

// The checks every model field gets, naming the field under `path`.
struct FieldChecks {
    const std::string& path;
    std::string f(const std::string& name) const { return path.empty() ? name : path + "." + name; }
    void positive(const std::string& name, int64_t v) const {
        if (v <= 0) config_error(f(name), "must be positive", str(v), "use a value >= 1");
    }
    void nonneg(const std::string& name, int64_t v) const {
        if (v < 0) config_error(f(name), "must not be negative", str(v), "use a value >= 0");
    }
    // Each size within kMaxDim / kMaxTokens (the total is bounded again by check_param_total).
    void bounded(const std::string& name, int64_t v, int64_t cap) const {
        if (v > cap) config_error(f(name), "is too large", str(v), "use at most " + str(cap) + " (check for a typo)");
    }
};

void check_sizes(const ModelConfig& m, const FieldChecks& c) {
    c.positive("vocab_size", m.vocab_size);
    c.positive("hidden_size", m.hidden_size);
    c.positive("num_layers", m.num_layers);
    c.nonneg("max_position_embeddings", m.max_position_embeddings);
    c.bounded("vocab_size", m.vocab_size, kMaxDim);
    c.bounded("hidden_size", m.hidden_size, kMaxDim);
    c.bounded("num_layers", m.num_layers, kMaxDim);
    c.bounded("max_position_embeddings", m.max_position_embeddings, kMaxTokens);
    for (const auto& [name, v] : {std::pair<const char*, int64_t>{"attention.num_heads", m.attn.num_heads},
                                  {"attention.num_kv_heads", m.attn.num_kv_heads},
                                  {"attention.head_dim", m.attn.head_dim},
                                  {"attention.q_lora_rank", m.attn.q_lora_rank},
                                  {"attention.kv_lora_rank", m.attn.kv_lora_rank},
                                  {"attention.qk_nope_head_dim", m.attn.qk_nope_head_dim},
                                  {"attention.qk_rope_head_dim", m.attn.qk_rope_head_dim},
                                  {"attention.v_head_dim", m.attn.v_head_dim},
                                  {"moe.num_experts", m.moe.num_experts},
                                  {"moe.top_k", m.moe.top_k},
                                  {"moe.expert_intermediate_size", m.moe.expert_intermediate_size},
                                  {"moe.num_shared_experts", m.moe.num_shared_experts},
                                  {"moe.shared_intermediate_size", m.moe.shared_intermediate_size},
                                  {"moe.num_groups", m.moe.num_groups},
                                  {"dense_intermediate_size", m.dense_intermediate_size},
                                  {"norms_per_layer", m.norms_per_layer},
                                  {"num_mtp_layers", m.num_mtp_layers},
                                  {"attention.rotary_dim", m.attn.rotary_dim},
                                  {"attention.indexer_heads", m.attn.indexer_heads},
                                  {"attention.indexer_head_dim", m.attn.indexer_head_dim},
                                  {"linear_attention.num_key_heads", m.linear_attn.num_key_heads},
                                  {"linear_attention.num_value_heads", m.linear_attn.num_value_heads},
                                  {"linear_attention.key_head_dim", m.linear_attn.key_head_dim},
                                  {"linear_attention.value_head_dim", m.linear_attn.value_head_dim},
                                  {"linear_attention.conv_kernel", m.linear_attn.conv_kernel}})
        c.bounded(name, v, kMaxDim);
    c.bounded("attention.sliding_window", m.attn.sliding_window, kMaxTokens);
    c.bounded("attention.attention_chunk", m.attn.attention_chunk, kMaxTokens);
}

void check_param_total(const ModelConfig& m, const FieldChecks& c) {
    // Each size is bounded, their products are not: estimate the parameter count in floating point (an upper
    // bound of count_params) and refuse beyond 10^15, which keeps every int64 count and byte total exact.
    const double H = static_cast<double>(m.hidden_size), L = static_cast<double>(m.num_layers);
    const double heads = static_cast<double>(std::max<int64_t>(m.attn.num_heads, 0));
    const double hd = static_cast<double>(
        std::max({m.attn.head_dim, m.attn.qk_nope_head_dim + m.attn.qk_rope_head_dim, m.attn.v_head_dim, int64_t{0}}));
    const double lora =
        static_cast<double>(std::max<int64_t>(m.attn.q_lora_rank, 0) + std::max<int64_t>(m.attn.kv_lora_rank, 0));
    const LinearAttentionConfig& la = m.linear_attn;
    const double linear = 4.0 * (H + static_cast<double>(la.conv_kernel)) *
                          static_cast<double>(std::max<int64_t>(la.num_key_heads, 0) * la.key_head_dim +
                                              std::max<int64_t>(la.num_value_heads, 0) * la.value_head_dim + 1);
    const double attn = 4.0 * (H + lora) * (2.0 * heads * hd + lora + H) + linear;
    const double experts = static_cast<double>(std::max<int64_t>(m.moe.num_experts, 0)) *
                           (3.0 * H * static_cast<double>(m.moe.expert_intermediate_size) + 3.0 * H);
    const double shared =
        static_cast<double>(m.moe.num_shared_experts) * 3.0 * H * static_cast<double>(m.moe.shared_intermediate_size);
    const double dense = 3.0 * H * static_cast<double>(m.dense_intermediate_size);
    const double layer = attn + experts + shared + dense + 8.0 * H * static_cast<double>(m.norms_per_layer + 1);
    const double total = (L + static_cast<double>(m.num_mtp_layers)) * (layer + 2.0 * H * H) +
                         2.0 * static_cast<double>(m.vocab_size) * (H + 1);
    if (!(total <= 1e15))
        config_error(c.f(experts >= attn + dense ? "moe.num_experts" : "hidden_size"),
                     "the shapes imply more than 10^15 parameters, beyond what moebench accounts for",
                     fmt::format("about {:.3g} parameters", total),
                     "check hidden_size, num_layers, the expert count and the intermediate sizes for a typo");
}

void check_attention(const ModelConfig& m, const FieldChecks& c) {
    const AttentionConfig& at = m.attn;
    c.positive("attention.num_heads", at.num_heads);
    if (at.kind == AttentionKind::gqa) {
        c.positive("attention.num_kv_heads", at.num_kv_heads);
        c.positive("attention.head_dim", at.head_dim);
        if (at.num_kv_heads > at.num_heads || at.num_heads % at.num_kv_heads != 0)
            config_error(c.f("attention.num_kv_heads"), "must divide attention.num_heads (" + str(at.num_heads) + ")",
                         str(at.num_kv_heads), "use a divisor of num_heads (num_heads for MHA, 1 for MQA)");
    } else {
        c.nonneg("attention.q_lora_rank", at.q_lora_rank);
        c.positive("attention.kv_lora_rank", at.kv_lora_rank);
        c.nonneg("attention.qk_nope_head_dim", at.qk_nope_head_dim);
        c.positive("attention.qk_rope_head_dim", at.qk_rope_head_dim);
        c.positive("attention.v_head_dim", at.v_head_dim);
    }
    c.nonneg("attention.sliding_window", at.sliding_window);
    c.nonneg("attention.attention_chunk", at.attention_chunk);
    check_model_range(c.f("attention.rope_theta"), at.rope_theta, model_range::kRopeTheta);
    c.nonneg("attention.rotary_dim", at.rotary_dim);
    if (at.rotary_dim != 0 && at.kind == AttentionKind::mla)
        config_error(c.f("attention.rotary_dim"), "applies to gqa attention only (MLA rotates qk_rope_head_dim)",
                     str(at.rotary_dim), "remove it");
    if (at.kind == AttentionKind::gqa && (at.rotary_dim > at.head_dim || at.rotary_dim % 2 != 0))
        config_error(c.f("attention.rotary_dim"),
                     "must be an even number of dims within head_dim (" + str(at.head_dim) + ")", str(at.rotary_dim),
                     "use 0 (the whole head) or an even value <= head_dim");
    // RoPE rotates pairs of dims (rotate-half): the rotated width must be even.
    if (at.kind == AttentionKind::gqa && at.rotary_dim == 0 && at.head_dim % 2 != 0)
        config_error(c.f("attention.head_dim"), "must be even when RoPE rotates the whole head (pairs of dims)",
                     str(at.head_dim), "use an even head_dim, or set rotary_dim to an even part of it");
    if (at.kind == AttentionKind::mla && at.qk_rope_head_dim % 2 != 0)
        config_error(c.f("attention.qk_rope_head_dim"), "must be even (RoPE rotates pairs of dims)",
                     str(at.qk_rope_head_dim), "use an even value (DeepSeek: 64)");
    if (at.indexer_heads > 0 && (at.kind != AttentionKind::mla || at.q_lora_rank <= 0 || at.indexer_head_dim <= 0))
        config_error(c.f("attention.indexer_heads"), "needs MLA attention with a q_lora_rank and an indexer_head_dim",
                     str(at.indexer_heads), "set indexer_head_dim (DeepSeek-V3.2: 128), or 0 for dense attention");
    if (at.output_gate && at.kind == AttentionKind::mla)
        config_error(c.f("attention.output_gate"), "applies to gqa attention only", "true", "set it to false");
}

void check_linear_attention(const ModelConfig& m, const FieldChecks& c) {
    if (m.layer_linear.empty()) return;
    if (static_cast<int64_t>(m.layer_linear.size()) != m.num_layers)
        config_error(
            c.f("layer_linear"), "must be empty or have one entry per layer (num_layers = " + str(m.num_layers) + ")",
            str(static_cast<int64_t>(m.layer_linear.size())) + " entries", "give exactly num_layers entries or none");
    if (m.num_linear_attention_layers() == 0) return;
    const LinearAttentionConfig& la = m.linear_attn;
    c.positive("linear_attention.num_key_heads", la.num_key_heads);
    c.positive("linear_attention.num_value_heads", la.num_value_heads);
    c.positive("linear_attention.key_head_dim", la.key_head_dim);
    c.positive("linear_attention.value_head_dim", la.value_head_dim);
    c.nonneg("linear_attention.conv_kernel", la.conv_kernel);
    if (la.num_value_heads % la.num_key_heads != 0)
        config_error(c.f("linear_attention.num_key_heads"),
                     "must divide linear_attention.num_value_heads (" + str(la.num_value_heads) + ")",
                     str(la.num_key_heads), "use a divisor of num_value_heads");
    if (la.kind == LinearAttentionKind::lightning &&
        (la.num_key_heads != la.num_value_heads || la.key_head_dim != la.value_head_dim || la.conv_kernel != 0))
        config_error(c.f("linear_attention.kind"), "lightning attention has one head count and one head dim, no conv",
                     "lightning", "give equal key/value heads and dims and conv_kernel 0");
}

void check_layer_lists(const ModelConfig& m, const FieldChecks& c) {
    const AttentionConfig& at = m.attn;
    if (static_cast<int64_t>(m.layer_is_moe.size()) != m.num_layers)
        config_error(c.f("layer_is_moe"), "must have one entry per layer (num_layers = " + str(m.num_layers) + ")",
                     str(static_cast<int64_t>(m.layer_is_moe.size())) + " entries", "give exactly num_layers entries");
    for (size_t i = 0; i < m.layer_is_moe.size(); ++i)
        if (m.layer_is_moe[i] > 1)
            config_error(c.f("layer_is_moe[" + std::to_string(i) + "]"), "must be 0 or 1", str(m.layer_is_moe[i]), "");
    if (!m.layer_sliding.empty()) {
        if (static_cast<int64_t>(m.layer_sliding.size()) != m.num_layers)
            config_error(c.f("layer_sliding"),
                         "must be empty or have one entry per layer (num_layers = " + str(m.num_layers) + ")",
                         str(static_cast<int64_t>(m.layer_sliding.size())) + " entries",
                         "give exactly num_layers entries or none");
        bool any = std::any_of(m.layer_sliding.begin(), m.layer_sliding.end(), [](uint8_t v) { return v != 0; });
        if (any && at.sliding_window <= 0 && at.attention_chunk <= 0)
            config_error(c.f("attention.sliding_window"), "sliding layers are listed but no window is set", "0",
                         "set attention.sliding_window (or attention.attention_chunk) to the window in tokens");
    }
}

void check_moe(const ModelConfig& m, const FieldChecks& c) {
    const MoeConfig& e = m.moe;
    // The listed flags, not num_moe_layers(): a layer flagged MoE in a model without experts must be refused here.
    const auto moe_layers = std::count(m.layer_is_moe.begin(), m.layer_is_moe.end(), uint8_t{1});
    if (moe_layers > 0 || e.num_experts > 0) {
        c.positive("moe.num_experts", e.num_experts);
        c.positive("moe.top_k", e.top_k);
        if (e.top_k > e.num_experts)
            config_error(c.f("moe.top_k"), "is larger than moe.num_experts (" + str(e.num_experts) + ")", str(e.top_k),
                         "use a top_k between 1 and " + str(e.num_experts));
        c.positive("moe.expert_intermediate_size", e.expert_intermediate_size);
        c.nonneg("moe.num_shared_experts", e.num_shared_experts);
        if (e.num_shared_experts > 0)
            c.positive("moe.shared_intermediate_size", e.shared_intermediate_size);
        else
            c.nonneg("moe.shared_intermediate_size", e.shared_intermediate_size);
        if (e.shared_expert_gate && e.num_shared_experts == 0)
            config_error(c.f("moe.shared_expert_gate"), "is set but there is no shared expert", "true",
                         "set moe.num_shared_experts >= 1 or shared_expert_gate to false");
        c.positive("moe.num_groups", e.num_groups);
        if (e.num_experts % e.num_groups != 0)
            config_error(c.f("moe.num_groups"), "must divide moe.num_experts (" + str(e.num_experts) + ")",
                         str(e.num_groups), "use a divisor of num_experts (1 = no groups)");
        c.positive("moe.topk_groups", e.topk_groups);
        if (e.topk_groups > e.num_groups)
            config_error(c.f("moe.topk_groups"), "is larger than moe.num_groups (" + str(e.num_groups) + ")",
                         str(e.topk_groups), "use a value between 1 and num_groups");
        int64_t reachable = e.topk_groups * (e.num_experts / e.num_groups);
        if (e.top_k > reachable)
            config_error(c.f("moe.top_k"),
                         "exceeds the experts in the selected groups (topk_groups * num_experts / "
                         "num_groups = " +
                             str(reachable) + ")",
                         str(e.top_k), "raise moe.topk_groups or lower top_k");
        check_model_range(c.f("moe.routed_scaling_factor"), e.routed_scaling_factor, model_range::kRoutedScalingFactor);
        if (e.routing == RoutingKind::sparsemixer && e.top_k != 2)
            config_error(c.f("moe.top_k"), "must be 2 for routing sparsemixer (PhiMoE's router picks exactly two)",
                         str(e.top_k), "set top_k to 2 or choose another routing");
        check_model_range(c.f("moe.router_jitter_noise"), e.router_jitter_noise, model_range::kRouterJitterNoise);
    }
    if (moe_layers == 0 && e.num_experts > 0)
        config_error(c.f("dense_layers"), "lists every layer although moe.num_experts > 0", "",
                     "drop the moe block or "
                     "make at least one layer MoE");
}

void check_ffn_and_norms(const ModelConfig& m, const FieldChecks& c) {
    if (m.num_dense_layers() > 0)
        c.positive("dense_intermediate_size", m.dense_intermediate_size);
    else
        c.nonneg("dense_intermediate_size", m.dense_intermediate_size);

    if (m.activation == Activation::swiglu_oai && !(m.swiglu_limit > 0))
        config_error(c.f("swiglu_limit"), "must be positive for activation swiglu_oai",
                     fmt::format("{}", m.swiglu_limit), "gpt-oss uses 7.0");
    check_model_range(c.f("swiglu_limit"), m.swiglu_limit, model_range::kSwigluLimit);
    c.nonneg("norms_per_layer", m.norms_per_layer);
    check_model_range(c.f("norm_eps"), m.norm_eps, model_range::kNormEps);
    c.nonneg("num_mtp_layers", m.num_mtp_layers);
}

}  // namespace

void check_model_range(const std::string& field, double value, const ModelRange& range) {
    if (!(std::isfinite(value) && value >= range.lo && value <= range.hi))
        config_error(field, fmt::format("is outside the plausible range ({:g} to {:g})", range.lo, range.hi),
                     fmt::format("{}", value), range.fix);
}

void validate(const ModelConfig& m, const std::string& path) {
    const FieldChecks c{path};
    require_printable_name(c.f("name"), m.name);
    require_printable_name(c.f("family"), m.family);
    check_sizes(m, c);
    check_param_total(m, c);
    check_attention(m, c);
    check_layer_lists(m, c);
    check_linear_attention(m, c);
    check_moe(m, c);
    check_ffn_and_norms(m, c);
}

ModelConfig load_model(const std::string& name_or_path) {
    const std::string path = resolve_config("models", name_or_path, flag_of("model"));
    // Read, parsed and checked once while the file is unchanged (a sweep loads it for every point).
    static FileMemo<ModelConfig> memo;
    return memo.get(path, [&] {
        json j = load_json_file(path, kMaxConfigBytes);
        refuse_other_file_kind(j, flag_of("model") + " " + path, {FileKind::model, FileKind::hf_config});
        ModelConfig m = is_hf_config(j) ? model_from_hf(j, path) : model_from_json(j, path);
        m.source = path;
        if (m.name.empty()) {
            // An HF config.json is named after its folder (".../Mixtral-8x7B-v0.1/config.json"), else after the file.
            std::filesystem::path p(path);
            std::string stem = p.stem().string();
            if (stem == "config" && p.has_parent_path() && !p.parent_path().filename().empty())
                stem = p.parent_path().filename().string();
            m.name = stem;
        }
        validate(m, path);
        return m;
    });
}

}  // namespace moebench
