// SPDX-License-Identifier: Apache-2.0
// Hugging Face config.json -> ModelConfig, one function per family, each following that family's reference
// modelling code (which layers are MoE, which projections carry biases, what the shared expert looks like).
#include "common/error.hpp"
#include "config/model_config.hpp"
#include "config/model_ranges.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

namespace moebench {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Upper bounds on a single size. No published model comes within 100x of them; they exist so that a typo such as
// 1e30 is refused by name instead of overflowing the int64 accounting (validate() also bounds the total count).
constexpr int64_t kMaxDim = int64_t{1} << 24;     // widths, vocab, experts, heads, layers
constexpr int64_t kMaxTokens = int64_t{1} << 40;  // positions, windows

void check_bound(const JsonReader& r, const std::string& key, int64_t cap) {
    if (!r.has(key)) return;
    const json& v = r.raw().at(key);
    if (v.is_number() && v.get<double>() > static_cast<double>(cap))
        config_error(r.field(key), "is too large", json_brief(v),
                     "use at most " + str(cap) + " (check for a typo; no real model is near this)");
}
// A required size: a positive whole number, bounded.
int64_t req_dim(const JsonReader& r, const std::string& key, int64_t cap = kMaxDim) {
    check_bound(r, key, cap);
    return r.req_positive(key);
}
// An optional size or count: a non-negative whole number, bounded; null or absent -> dflt.
int64_t opt_dim(const JsonReader& r, const std::string& key, int64_t dflt, int64_t cap = kMaxDim) {
    check_bound(r, key, cap);
    return r.opt_nonneg(key, dflt);
}

// The errors HF users need, in HF field names: `small` must not exceed `large`.
void require_at_most(const JsonReader& r, const std::string& small_key, int64_t small, const std::string& large_key,
                     int64_t large) {
    if (small > large)
        config_error(r.field(small_key), "is larger than " + large_key + " (" + str(large) + ")", str(small),
                     "use a value between 1 and " + str(large));
}

// Reads a list whose entries all pass `is_entry` (null or absent -> empty); `list_of` and `entry` name the kind in
// errors ("integers" / "an integer").
template <typename T>
std::vector<T> typed_list(const JsonReader& r, const std::string& key, bool (*is_entry)(const json&),
                          const std::string& list_of, const std::string& entry) {
    std::vector<T> out;
    if (!r.has(key)) return out;
    const json& v = r.raw().at(key);
    if (!v.is_array()) config_error(r.field(key), "must be a list of " + list_of, json_brief(v), "");
    for (size_t i = 0; i < v.size(); ++i) {
        if (!is_entry(v[i]))
            config_error(r.field(key) + "[" + std::to_string(i) + "]", "must be " + entry, json_brief(v[i]), "");
        out.push_back(v[i].get<T>());
    }
    return out;
}

// A list of integers (e.g. mlp_only_layers).
std::vector<int64_t> int_list(const JsonReader& r, const std::string& key) {
    return typed_list<int64_t>(
        r, key, [](const json& e) { return e.is_number_integer(); }, "integers", "an integer");
}

// A list of strings (e.g. layer_types).
std::vector<std::string> string_list(const JsonReader& r, const std::string& key) {
    return typed_list<std::string>(
        r, key, [](const json& e) { return e.is_string(); }, "strings", "a string");
}

// Gated FFN activation named by hidden_act.
Activation activation_from(const JsonReader& r, const std::string& key, Activation dflt) {
    if (!r.has(key)) return dflt;
    std::string act = r.req_string(key);
    if (act == "silu" || act == "swish") return Activation::swiglu;
    if (act.rfind("gelu", 0) == 0) return Activation::geglu;
    config_error(r.field(key), "unsupported activation", "\"" + act + "\"",
                 "moebench models gated FFNs with silu (SwiGLU) or gelu (GeGLU)");
}

// GQA: the KV heads must divide the query heads (MHA: equal, MQA: 1).
void require_kv_heads_divide(const JsonReader& r, const std::string& kv_key, int64_t kv, const std::string& heads_key,
                             int64_t heads) {
    if (kv > heads || heads % kv != 0)
        config_error(r.field(kv_key), "must divide " + heads_key + " (" + str(heads) + ")", str(kv),
                     "use a divisor of " + heads_key + " (equal for MHA, 1 for MQA)");
}

// A real number within its plausible range (config/model_ranges.hpp), refused under the config's own key name.
double opt_ranged(const JsonReader& r, const std::string& key, double dflt, const ModelRange& range) {
    const double v = r.opt_double(key, dflt);
    if (r.has(key)) check_model_range(r.field(key), v, range);
    return v;
}

// rope_theta, or (configs saved by transformers 5) rope_parameters.rope_theta.
double rope_theta(const JsonReader& r) {
    if (r.has("rope_theta")) return opt_ranged(r, "rope_theta", 10000.0, model_range::kRopeTheta);
    if (auto p = r.opt_child("rope_parameters")) return opt_ranged(*p, "rope_theta", 10000.0, model_range::kRopeTheta);
    return 10000.0;
}

// RoPE scaling (YaRN, llama3, linear, dynamic) changes neither the parameters nor the work, so moebench does not
// model it; its factor is still checked, so that a corrupt config is not taken for a real one.
void check_rope_scaling(const JsonReader& r) {
    for (const char* block : {"rope_scaling", "rope_parameters"})
        if (r.has(block) && r.raw().at(block).is_object())
            (void)opt_ranged(r.child(block), "factor", 1.0, model_range::kRopeScalingFactor);
}

// Fields nearly every family spells the Llama way.
void read_llama_common(const JsonReader& r, ModelConfig& m) {
    m.vocab_size = req_dim(r, "vocab_size");
    m.hidden_size = req_dim(r, "hidden_size");
    m.num_layers = req_dim(r, "num_hidden_layers");
    m.max_position_embeddings = opt_dim(r, "max_position_embeddings", 0, kMaxTokens);
    AttentionConfig& a = m.attn;
    a.kind = AttentionKind::gqa;
    a.num_heads = req_dim(r, "num_attention_heads");
    a.num_kv_heads = r.has("num_key_value_heads") ? req_dim(r, "num_key_value_heads") : a.num_heads;
    a.head_dim = r.has("head_dim") ? req_dim(r, "head_dim") : m.hidden_size / a.num_heads;
    if (!r.has("head_dim") && m.hidden_size % a.num_heads != 0)
        config_error(r.field("num_attention_heads"), "does not divide hidden_size (" + str(m.hidden_size) + ")",
                     str(a.num_heads), "set head_dim explicitly");
    require_kv_heads_divide(r, "num_key_value_heads", a.num_kv_heads, "num_attention_heads", a.num_heads);
    a.rope_theta = rope_theta(r);
    check_rope_scaling(r);
    m.norm = NormKind::rmsnorm;
    m.norm_eps = opt_ranged(r, "rms_norm_eps", 1e-6, model_range::kNormEps);
    m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", false);
    m.activation = activation_from(r, "hidden_act", Activation::swiglu);
}

void all_layers(ModelConfig& m, uint8_t is_moe) { m.layer_is_moe.assign(static_cast<size_t>(m.num_layers), is_moe); }

// Experts and top-k under the family's key names (num_local_experts / num_experts / moe_num_experts, ...).
void read_experts(const JsonReader& r, ModelConfig& m, const std::string& experts_key, const std::string& topk_key) {
    m.moe.num_experts = req_dim(r, experts_key);
    m.moe.top_k = req_dim(r, topk_key);
    require_at_most(r, topk_key, m.moe.top_k, experts_key, m.moe.num_experts);
}

// One shared expert of `width` (none when 0); `gated`: sigmoid(Linear(hidden, 1)) scales its output (Qwen).
void one_shared_expert(MoeConfig& e, int64_t width, bool gated) {
    if (width <= 0) return;
    e.num_shared_experts = 1;
    e.shared_intermediate_size = width;
    e.shared_expert_gate = gated;
}

// Sliding window for every layer when the config sets one (Mixtral, PhiMoE); null = full attention.
void uniform_sliding(const JsonReader& r, ModelConfig& m) {
    if (r.has("sliding_window") && r.opt_bool("use_sliding_window", true)) {
        m.attn.sliding_window = req_dim(r, "sliding_window", kMaxTokens);
        m.layer_sliding.assign(static_cast<size_t>(m.num_layers), 1);
    }
}

// A per-layer list (layer_types, no_rope_layers) must have one entry per layer.
void require_per_layer(const JsonReader& r, const std::string& key, size_t entries, const ModelConfig& m) {
    if (static_cast<int64_t>(entries) != m.num_layers)
        config_error(r.field(key), "must have num_hidden_layers entries (" + str(m.num_layers) + ")",
                     str(static_cast<int64_t>(entries)), "");
}

// layer_types ("sliding_attention" / "full_attention" per layer) -> layer_sliding.
void sliding_from_layer_types(const JsonReader& r, ModelConfig& m, const std::vector<std::string>& types) {
    require_per_layer(r, "layer_types", types.size(), m);
    m.layer_sliding.assign(types.size(), 0);
    for (size_t i = 0; i < types.size(); ++i) m.layer_sliding[i] = types[i] == "sliding_attention";
}

// Any sliding layer needs sliding_window; with none, layer_sliding is left empty (= full attention everywhere).
void require_window_if_sliding(const JsonReader& r, ModelConfig& m) {
    if (std::any_of(m.layer_sliding.begin(), m.layer_sliding.end(), [](uint8_t v) { return v != 0; }))
        m.attn.sliding_window = req_dim(r, "sliding_window", kMaxTokens);
    else
        m.layer_sliding.clear();
}

// Qwen2 / Qwen2-MoE / Qwen3-MoE: layer_types if present, else sliding from max_window_layers on when enabled.
void qwen_sliding(const JsonReader& r, ModelConfig& m) {
    auto types = string_list(r, "layer_types");
    if (!types.empty()) {
        sliding_from_layer_types(r, m, types);
    } else if (r.opt_bool("use_sliding_window", false) && r.has("sliding_window")) {
        int64_t from = opt_dim(r, "max_window_layers", 0);
        m.layer_sliding.assign(static_cast<size_t>(m.num_layers), 0);
        for (int64_t i = from; i < m.num_layers; ++i) m.layer_sliding[static_cast<size_t>(i)] = 1;
    }
    require_window_if_sliding(r, m);
}

// Qwen MoE layer pattern: MoE unless listed in mlp_only_layers, and only every decoder_sparse_step-th layer.
void qwen_moe_layers(const JsonReader& r, ModelConfig& m) {
    int64_t step = r.has("decoder_sparse_step") ? req_dim(r, "decoder_sparse_step") : 1;
    auto mlp_only = int_list(r, "mlp_only_layers");
    std::sort(mlp_only.begin(), mlp_only.end());  // searched once per layer: a linear find was layers x list long
    m.layer_is_moe.assign(static_cast<size_t>(m.num_layers), 0);
    for (int64_t i = 0; i < m.num_layers; ++i) {
        bool dense = std::binary_search(mlp_only.begin(), mlp_only.end(), i);
        m.layer_is_moe[static_cast<size_t>(i)] = (!dense && (i + 1) % step == 0) ? 1 : 0;
    }
}

// n_group / topk_group of group-limited routing (absent or null: the family's defaults), checked against the experts.
void read_groups(const JsonReader& r, MoeConfig& e, const std::string& experts_key, int64_t groups_dflt,
                 int64_t topk_groups_dflt) {
    e.num_groups = opt_dim(r, "n_group", groups_dflt);
    e.topk_groups = opt_dim(r, "topk_group", topk_groups_dflt);
    if (e.num_groups < 1)
        config_error(r.field("n_group"), "must be positive", str(e.num_groups), "use 1 for no groups");
    if (e.num_experts % e.num_groups != 0)
        config_error(r.field("n_group"), "must divide " + experts_key + " (" + str(e.num_experts) + ")",
                     str(e.num_groups), "use a divisor of " + experts_key + " (1 = no groups)");
    if (e.topk_groups < 1) config_error(r.field("topk_group"), "must be positive", str(e.topk_groups), "");
    require_at_most(r, "topk_group", e.topk_groups, "n_group", e.num_groups);
    int64_t reachable = e.topk_groups * (e.num_experts / e.num_groups);
    if (e.top_k > reachable)
        config_error(r.field("num_experts_per_tok"),
                     "exceeds the experts in the selected groups (topk_group * " + experts_key +
                         " / n_group = " + str(reachable) + ")",
                     str(e.top_k), "raise topk_group or lower num_experts_per_tok");
}

// Dense first layers, then MoE (first_k_dense_replace).
void first_dense_layers(const JsonReader& r, ModelConfig& m, int64_t dflt) {
    const int64_t first_dense = std::min(opt_dim(r, "first_k_dense_replace", dflt), m.num_layers);
    m.layer_is_moe.assign(static_cast<size_t>(m.num_layers), 1);
    for (int64_t i = 0; i < first_dense; ++i) m.layer_is_moe[static_cast<size_t>(i)] = 0;
    if (m.num_dense_layers() > 0) m.dense_intermediate_size = req_dim(r, "intermediate_size");
}

// Partial RoPE: int(head_dim * partial_rotary_factor) dims of each q/k head (the whole head when it rounds to it).
// The factor sits at the top level or (configs saved by transformers 5, Qwen3.5) in rope_parameters.
void partial_rotary(const JsonReader& r, ModelConfig& m, double dflt) {
    const std::optional<JsonReader> params = r.opt_child("rope_parameters");
    const bool nested = params && params->has("partial_rotary_factor");
    if (nested && r.has("partial_rotary_factor") &&
        params->opt_double("partial_rotary_factor", dflt) != r.opt_double("partial_rotary_factor", dflt))
        config_error(params->field("partial_rotary_factor"),
                     "differs from partial_rotary_factor (" + json_brief(r.raw().at("partial_rotary_factor")) + ")",
                     json_brief(params->raw().at("partial_rotary_factor")), "keep one of the two");
    const JsonReader& src = nested ? *params : r;
    const double f = src.opt_double("partial_rotary_factor", dflt);
    if (!(f > 0 && f <= 1))
        config_error(src.field("partial_rotary_factor"), "must be in (0, 1]", fmt::format("{}", f), "e.g. 0.5");
    const auto dims = static_cast<int64_t>(static_cast<double>(m.attn.head_dim) * f);
    m.attn.rotary_dim = dims >= m.attn.head_dim ? 0 : dims - dims % 2;
}

// DeepSeek-V3-style MoE on GQA attention (GLM-4.5, dots.llm1, Ling 2.0): sigmoid scores plus a selection-only
// correction bias, optional groups, shared experts of the routed width.
void sigmoid_biased_moe(const JsonReader& r, ModelConfig& m, const std::string& experts_key, bool norm_dflt,
                        int64_t groups_dflt, int64_t topk_groups_dflt) {
    MoeConfig& e = m.moe;
    read_experts(r, m, experts_key, "num_experts_per_tok");
    e.expert_intermediate_size = req_dim(r, "moe_intermediate_size");
    e.num_shared_experts = opt_dim(r, r.has("n_shared_experts") ? "n_shared_experts" : "num_shared_experts", 0);
    if (e.num_shared_experts > 0) e.shared_intermediate_size = e.expert_intermediate_size;
    e.routing = RoutingKind::sigmoid_group_topk;
    e.router_correction_bias = true;
    e.norm_topk_prob = r.opt_bool("norm_topk_prob", norm_dflt);
    e.routed_scaling_factor = opt_ranged(r, "routed_scaling_factor", 1.0, model_range::kRoutedScalingFactor);
    read_groups(r, e, experts_key, groups_dflt, topk_groups_dflt);
}

ModelConfig import_mixtral(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    read_experts(r, m, "num_local_experts", "num_experts_per_tok");
    m.moe.expert_intermediate_size = req_dim(r, "intermediate_size");
    m.moe.routing = RoutingKind::topk_softmax;
    m.moe.norm_topk_prob = true;
    all_layers(m, 1);
    uniform_sliding(r, m);
    return m;
}

// `hybrid` (Qwen3-Next, Qwen3.5): layer_types names each layer's attention kind (delta_net_layers), not windows.
ModelConfig import_qwen_moe(const JsonReader& r, bool qwen3, bool hybrid = false) {
    ModelConfig m;
    read_llama_common(r, m);
    read_experts(r, m, "num_experts", "num_experts_per_tok");
    m.moe.expert_intermediate_size = req_dim(r, "moe_intermediate_size");
    m.moe.routing = RoutingKind::softmax_topk;
    m.moe.norm_topk_prob = r.opt_bool("norm_topk_prob", false);
    qwen_moe_layers(r, m);
    m.dense_intermediate_size =
        m.num_dense_layers() > 0 ? req_dim(r, "intermediate_size") : opt_dim(r, "intermediate_size", 0);
    if (qwen3) {
        m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
        m.attn.qk_norm = true;  // Qwen3 q_norm / k_norm: RMSNorm(head_dim) shared by all heads
    } else {
        m.attn.qkv_bias = true;  // Qwen2: q/k/v projections always carry a bias, o does not
        one_shared_expert(m.moe, opt_dim(r, "shared_expert_intermediate_size", 0), true);
    }
    if (!hybrid) qwen_sliding(r, m);
    return m;
}

// Later GLM-MoE-DSA configs let some layers reuse the previous layer's top-k instead of running an indexer
// (indexer_types "shared", or the index_topk_pattern / index_topk_freq schedule it is made from). Those layers have no
// indexer weights and no indexer work; moebench models an indexer on every layer, so such a config is refused rather
// than over-counted. GLM-5 and DeepSeek-V3.2 run one on every layer.
void refuse_shared_indexers(const JsonReader& r) {
    const std::string fix =
        "moebench models an indexer on every layer (GLM-5, DeepSeek-V3.2); drop the key to count "
        "them all";
    const std::vector<std::string> types = string_list(r, "indexer_types");
    for (size_t i = 0; i < types.size(); ++i)
        if (types[i] != "full")
            config_error(r.field("indexer_types") + "[" + std::to_string(i) + "]",
                         "a layer without its own indexer is not modelled", "\"" + types[i] + "\"", fix);
    if (r.has("index_topk_pattern")) {  // "FSSF..." or a list of "full" / "shared"
        const json& p = r.raw().at("index_topk_pattern");
        bool all_full = p.is_string() && p.get<std::string>().find_first_not_of('F') == std::string::npos;
        if (p.is_array())
            all_full = std::all_of(p.begin(), p.end(), [](const json& e) { return e == "full" || e == "F"; });
        if (!all_full)
            config_error(r.field("index_topk_pattern"), "a layer without its own indexer is not modelled",
                         json_brief(p), fix);
    }
    if (opt_dim(r, "index_topk_freq", 1) > 1)
        config_error(r.field("index_topk_freq"), "a layer without its own indexer is not modelled",
                     str(opt_dim(r, "index_topk_freq", 1)), fix);
}

// DeepSeekMoE (deepseek), DeepSeek-V2, DeepSeek-V3, Kimi-K2 and GLM-5 share the layer pattern and shared experts.
ModelConfig import_deepseek(const JsonReader& r, const std::string& type) {
    ModelConfig m;
    read_llama_common(r, m);
    bool v1 = type == "deepseek";
    const bool sparse = type == "deepseek_v32" || type == "glm_moe_dsa";  // DSA: a lightning indexer per layer
    bool v3 = type == "deepseek_v3" || type == "kimi_k2" || sparse;
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
    if (!v1) {
        AttentionConfig& a = m.attn;
        a.kind = AttentionKind::mla;
        a.num_kv_heads = a.num_heads;
        a.q_lora_rank = opt_dim(r, "q_lora_rank", 0);  // null -> q projected directly (V2-Lite)
        a.kv_lora_rank = req_dim(r, "kv_lora_rank");
        a.qk_nope_head_dim = req_dim(r, "qk_nope_head_dim");
        a.qk_rope_head_dim = req_dim(r, "qk_rope_head_dim");
        a.v_head_dim = req_dim(r, "v_head_dim");
        a.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
        // GLM-5 also states the sum (its head_dim is the RoPE part, as transformers' GlmMoeDsaConfig sets it).
        if (r.has("qk_head_dim") && req_dim(r, "qk_head_dim") != a.head_dim)
            config_error(r.field("qk_head_dim"),
                         "differs from qk_nope_head_dim + qk_rope_head_dim (" + str(a.head_dim) + ")",
                         str(req_dim(r, "qk_head_dim")), "use " + str(a.head_dim) + " or correct the two parts");
    }
    MoeConfig& e = m.moe;
    e.num_experts = opt_dim(r, "n_routed_experts", 0);
    int64_t first_dense = opt_dim(r, "first_k_dense_replace", 0);
    int64_t freq = r.has("moe_layer_freq") ? req_dim(r, "moe_layer_freq") : 1;
    m.layer_is_moe.assign(static_cast<size_t>(m.num_layers), 0);
    if (e.num_experts > 0) {
        for (int64_t i = first_dense; i < m.num_layers; ++i)
            m.layer_is_moe[static_cast<size_t>(i)] = i % freq == 0 ? 1 : 0;
        e.top_k = req_dim(r, "num_experts_per_tok");
        require_at_most(r, "num_experts_per_tok", e.top_k, "n_routed_experts", e.num_experts);
        e.expert_intermediate_size = req_dim(r, "moe_intermediate_size");
        e.num_shared_experts = opt_dim(r, "n_shared_experts", 0);
        if (e.num_shared_experts > 0) e.shared_intermediate_size = e.expert_intermediate_size;
        // Absent fields take the transformers config class's defaults (DeepseekV3Config: true and 2.5).
        e.norm_topk_prob = r.opt_bool("norm_topk_prob", v3);
        e.routed_scaling_factor =
            opt_ranged(r, "routed_scaling_factor", v3 ? 2.5 : 1.0, model_range::kRoutedScalingFactor);
        std::string method = r.opt_string("topk_method", v3 ? "noaux_tc" : "greedy");
        std::string scoring = r.opt_string("scoring_func", v3 ? "sigmoid" : "softmax");
        // The values DeepSeek's modeling code knows; another would silently route by softmax top-k.
        if (method != "noaux_tc" && method != "greedy" && method != "group_limited_greedy")
            config_error(r.field("topk_method"), "is not a DeepSeek top-k method", method,
                         "use noaux_tc, greedy or group_limited_greedy");
        if (scoring != "sigmoid" && scoring != "softmax")
            config_error(r.field("scoring_func"), "is not a DeepSeek scoring function", scoring,
                         "use sigmoid or softmax");
        if (method == "noaux_tc" || scoring == "sigmoid") {
            e.routing = RoutingKind::sigmoid_group_topk;
            e.router_correction_bias = method == "noaux_tc";
        } else if (method == "group_limited_greedy") {
            e.routing = RoutingKind::softmax_group_greedy;
        } else {
            e.routing = RoutingKind::softmax_topk;
        }
        if (e.routing != RoutingKind::softmax_topk)
            read_groups(r, e, "n_routed_experts", 1, 1);  // only group-limited routing uses them
    }
    if (sparse) {  // the lightning indexer of its sparse attention, on every layer
        m.attn.indexer_heads = req_dim(r, "index_n_heads");
        m.attn.indexer_head_dim = req_dim(r, "index_head_dim");
        m.attn.indexer_topk = opt_dim(r, "index_topk", 2048, kMaxTokens);
        refuse_shared_indexers(r);
    }
    if (m.num_dense_layers() > 0) m.dense_intermediate_size = req_dim(r, "intermediate_size");
    if (v3) m.num_mtp_layers = opt_dim(r, "num_nextn_predict_layers", 0);
    return m;
}

ModelConfig import_dbrx(const JsonReader& r) {
    ModelConfig m;
    m.vocab_size = req_dim(r, "vocab_size");
    m.hidden_size = req_dim(r, "d_model");
    m.num_layers = req_dim(r, "n_layers");
    m.max_position_embeddings = opt_dim(r, "max_seq_len", 0, kMaxTokens);
    m.attn.num_heads = req_dim(r, "n_heads");
    if (m.hidden_size % m.attn.num_heads != 0)
        config_error(r.field("n_heads"), "does not divide d_model (" + str(m.hidden_size) + ")", str(m.attn.num_heads),
                     "use a divisor of d_model");
    m.attn.head_dim = m.hidden_size / m.attn.num_heads;
    JsonReader a = r.child("attn_config");
    m.attn.num_kv_heads = a.has("kv_n_heads") ? req_dim(a, "kv_n_heads") : m.attn.num_heads;
    require_kv_heads_divide(a, "kv_n_heads", m.attn.num_kv_heads, "n_heads", m.attn.num_heads);
    m.attn.rope_theta = opt_ranged(a, "rope_theta", 10000.0, model_range::kRopeTheta);
    JsonReader f = r.child("ffn_config");
    read_experts(f, m, "moe_num_experts", "moe_top_k");
    m.moe.expert_intermediate_size = req_dim(f, "ffn_hidden_size");
    m.moe.routing = RoutingKind::softmax_topk;
    // DbrxRouter divides the top-k weights by their p-norm, p = moe_normalize_expert_weights (DbrxFFNConfig default
    // 1.0, which dbrx-base leaves implicit); null or 0: no normalisation. Only p = 1 (the sum) is modelled.
    const bool explicit_null =
        f.raw().contains("moe_normalize_expert_weights") && !f.has("moe_normalize_expert_weights");
    const double p_norm = explicit_null ? 0.0 : f.opt_double("moe_normalize_expert_weights", 1.0);
    if (p_norm != 0.0 && p_norm != 1.0)
        config_error(f.field("moe_normalize_expert_weights"), "is a p-norm moebench does not model",
                     fmt::format("{}", p_norm), "use 1 (renormalise by the sum, as DBRX) or null");
    m.moe.norm_topk_prob = p_norm == 1.0;
    all_layers(m, 1);
    m.norm = NormKind::layernorm;  // nn.LayerNorm(bias=False)
    m.norm_eps = 1e-5;
    m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", false);
    m.activation = Activation::swiglu;
    return m;
}

ModelConfig import_olmoe(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    read_experts(r, m, "num_experts", "num_experts_per_tok");
    m.moe.expert_intermediate_size = req_dim(r, "intermediate_size");
    m.moe.routing = RoutingKind::softmax_topk;
    m.moe.norm_topk_prob = r.opt_bool("norm_topk_prob", false);
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
    m.attn.qk_norm_full = true;  // q_norm = RMSNorm(nh*hd), k_norm = RMSNorm(nkv*hd)
    all_layers(m, 1);
    return m;
}

ModelConfig import_gpt_oss(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    std::string topk_key = r.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token";
    read_experts(r, m, "num_local_experts", topk_key);
    m.moe.expert_intermediate_size = req_dim(r, "intermediate_size");
    m.moe.routing = RoutingKind::topk_softmax;
    m.moe.norm_topk_prob = true;
    m.moe.expert_bias = true;  // gate_up_proj_bias (2I) and down_proj_bias (H)
    m.moe.router_bias = true;
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", true);
    m.attn.sinks = true;
    m.activation = Activation::swiglu_oai;
    m.swiglu_limit = opt_ranged(r, "swiglu_limit", 7.0, model_range::kSwigluLimit);
    all_layers(m, 1);
    auto types = string_list(r, "layer_types");
    if (types.empty()) {  // the reference alternates sliding (even) and full (odd) layers
        for (int64_t i = 0; i < m.num_layers; ++i) types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    }
    sliding_from_layer_types(r, m, types);
    require_window_if_sliding(r, m);
    return m;
}

// Llama-4: the text model sits in text_config (the vision tower is out of scope).
ModelConfig import_llama4(const JsonReader& top) {
    std::optional<JsonReader> nested = top.opt_child("text_config");
    const JsonReader& r = nested ? *nested : top;
    ModelConfig m;
    read_llama_common(r, m);
    if (top.has("tie_word_embeddings") && !r.has("tie_word_embeddings"))
        m.tie_word_embeddings = top.opt_bool("tie_word_embeddings", false);
    read_experts(r, m, "num_local_experts", "num_experts_per_tok");
    m.moe.expert_intermediate_size = req_dim(r, "intermediate_size");
    m.moe.num_shared_experts = 1;  // Llama4TextMoe.shared_expert, same width as a routed expert
    m.moe.shared_intermediate_size = m.moe.expert_intermediate_size;
    m.moe.routing = RoutingKind::topk_sigmoid;
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
    // use_qk_norm is an L2 norm without weights: no parameters, so qk_norm stays false.
    std::vector<int64_t> moe_layers = int_list(r, "moe_layers");
    if (!r.has("moe_layers")) {
        int64_t step = r.has("interleave_moe_layer_step") ? req_dim(r, "interleave_moe_layer_step") : 1;
        for (int64_t i = step - 1; i < m.num_layers; i += step) moe_layers.push_back(i);
    }
    m.layer_is_moe.assign(static_cast<size_t>(m.num_layers), 0);
    for (size_t i = 0; i < moe_layers.size(); ++i) {
        int64_t l = moe_layers[i];
        if (l < 0 || l >= m.num_layers)
            config_error(r.field("moe_layers") + "[" + std::to_string(i) + "]", "layer index out of range", str(l),
                         "use 0.." + str(m.num_layers - 1));
        m.layer_is_moe[static_cast<size_t>(l)] = 1;
    }
    if (m.num_dense_layers() > 0) m.dense_intermediate_size = req_dim(r, "intermediate_size_mlp");
    // Chunked local attention on the RoPE layers; every no_rope_layer_interval-th layer is global NoPE.
    if (r.has("attention_chunk_size")) {
        m.attn.attention_chunk = req_dim(r, "attention_chunk_size", kMaxTokens);
        std::vector<int64_t> rope = int_list(r, "no_rope_layers");
        if (rope.empty()) {
            int64_t interval = r.has("no_rope_layer_interval") ? req_dim(r, "no_rope_layer_interval") : 4;
            for (int64_t i = 0; i < m.num_layers; ++i) rope.push_back((i + 1) % interval != 0 ? 1 : 0);
        }
        require_per_layer(r, "no_rope_layers", rope.size(), m);
        m.layer_sliding.assign(rope.size(), 0);
        for (size_t i = 0; i < rope.size(); ++i) m.layer_sliding[i] = rope[i] != 0;
    }
    return m;
}

// Grok-1 (hpcai-tech/grok-1 and converted checkpoints): GeGLU experts, 4 RMSNorms per layer, tied head.
ModelConfig import_grok1(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    read_experts(r, m, r.has("num_experts") ? "num_experts" : "num_local_experts", "num_experts_per_tok");
    m.moe.expert_intermediate_size = req_dim(r, "intermediate_size");
    m.moe.routing = RoutingKind::softmax_topk;  // softmax over all experts, top-2, no renormalisation
    m.moe.norm_topk_prob = false;
    m.activation = Activation::geglu;
    m.norms_per_layer = 4;
    m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", true);
    all_layers(m, 1);
    return m;
}

ModelConfig import_phimoe(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    read_experts(r, m, "num_local_experts", "num_experts_per_tok");
    m.moe.expert_intermediate_size = req_dim(r, "intermediate_size");
    // sparsemixer (modeling_phimoe.py) also at inference: top-2 of the logits, each weight a softmax over the
    // logits within router_jitter_noise of it; not Mixtral's renormalised pair.
    m.moe.routing = RoutingKind::sparsemixer;
    m.moe.router_jitter_noise = opt_ranged(r, "router_jitter_noise", 0.01, model_range::kRouterJitterNoise);
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
    m.lm_head_bias = r.opt_bool("lm_head_bias", false);
    m.norm = NormKind::layernorm;  // nn.LayerNorm with bias
    m.norm_bias = true;
    all_layers(m, 1);
    uniform_sliding(r, m);
    return m;
}

ModelConfig import_llama(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
    m.dense_intermediate_size = req_dim(r, "intermediate_size");
    all_layers(m, 0);
    return m;
}

ModelConfig import_qwen2(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    m.attn.qkv_bias = true;
    m.dense_intermediate_size = req_dim(r, "intermediate_size");
    all_layers(m, 0);
    qwen_sliding(r, m);
    return m;
}

// GLM-4.5 / 4.6 / 4.5-Air (transformers modeling_glm4_moe.py): q/k/v biases (never o), per-head q/k RMSNorm when
// use_qk_norm, RoPE on half of each head, first_k_dense_replace dense layers, nextn (MTP) layers counted apart.
ModelConfig import_glm4_moe(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    sigmoid_biased_moe(r, m, "n_routed_experts", true, 1, 1);
    first_dense_layers(r, m, 1);
    m.attn.qkv_bias = r.opt_bool("attention_bias", false);
    m.attn.qk_norm = r.opt_bool("use_qk_norm", false);
    partial_rotary(r, m, 0.5);
    m.num_mtp_layers = opt_dim(r, "num_nextn_predict_layers", 0);
    return m;
}

// dots.llm1 (modeling_dots1.py): DeepSeek-V3's MoE on GQA with per-head q/k norms, full RoPE, no MTP.
ModelConfig import_dots1(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    sigmoid_biased_moe(r, m, "n_routed_experts", false, 1, 1);
    first_dense_layers(r, m, 0);
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
    m.attn.qk_norm = true;
    return m;
}

// Ling (inclusionAI, modeling_bailing_moe.py): softmax top-k with shared experts; Ling 2.0 (architectures
// BailingMoeV2ForCausalLM, same model_type) switched to sigmoid + expert_bias with groups, q/k norms, partial RoPE,
// MTP.
ModelConfig import_bailing_moe(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    bool v2 = false;
    if (r.has("architectures") && r.raw().at("architectures").is_array() && !r.raw().at("architectures").empty())
        v2 = r.raw().at("architectures")[0] == "BailingMoeV2ForCausalLM";
    if (v2) {
        sigmoid_biased_moe(r, m, "num_experts", true, 8, 4);
        m.moe.norm_topk_prob = true;  // the v2 gate always renormalises
        first_dense_layers(r, m, 1);
        m.attn.qk_norm = r.opt_bool("use_qk_norm", true);
        partial_rotary(r, m, 1.0);
        m.num_mtp_layers = opt_dim(r, "num_nextn_predict_layers", 0);
    } else {
        read_experts(r, m, "num_experts", "num_experts_per_tok");
        m.moe.expert_intermediate_size = req_dim(r, "moe_intermediate_size");
        m.moe.num_shared_experts = opt_dim(r, "num_shared_experts", 0);
        if (m.moe.num_shared_experts > 0) m.moe.shared_intermediate_size = m.moe.expert_intermediate_size;
        m.moe.routing = RoutingKind::softmax_topk;
        m.moe.norm_topk_prob = r.opt_bool("norm_topk_prob", true);
        first_dense_layers(r, m, 0);
    }
    m.attn.qkv_bias = r.opt_bool("use_qkv_bias", false);
    m.attn.o_bias = r.opt_bool("use_bias", false);
    return m;
}

// A per-layer setting written as one value or one per layer (Hunyuan's moe_topk, num_shared_expert, ...); moebench
// models one value for every layer, so a list must hold one value.
int64_t uniform_per_layer(const JsonReader& r, const std::string& key, const ModelConfig& m, int64_t dflt,
                          bool positive) {
    if (!r.has(key)) return dflt;
    if (!r.raw().at(key).is_array()) return positive ? req_dim(r, key) : opt_dim(r, key, dflt);
    const std::vector<int64_t> v = int_list(r, key);
    require_per_layer(r, key, v.size(), m);
    for (size_t i = 0; i < v.size(); ++i)
        if (v[i] != v[0] || v[i] < (positive ? 1 : 0))
            config_error(r.field(key) + "[" + std::to_string(i) + "]",
                         v[i] != v[0]
                             ? "differs from layer 0 (" + str(v[0]) + "); moebench models one value for all layers"
                             : "must be " + std::string(positive ? "positive" : "non-negative"),
                         str(v[i]), "use one value for every layer");
    return v[0];
}

// Hunyuan-A13B (HunYuanMoEV1ForCausalLM): softmax top-k, a shared MLP of intermediate_size x num_shared_expert,
// per-head q/k RMSNorm, tied embeddings; cross-layer attention (use_cla) is not modelled.
ModelConfig import_hunyuan(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    if (r.has("attention_head_dim")) m.attn.head_dim = req_dim(r, "attention_head_dim");
    if (r.opt_bool("use_cla", false))
        config_error(r.field("use_cla"), "cross-layer attention (K/V shared by layers) is not modelled", "true",
                     "set use_cla to false to count the model without the sharing (more K/V weights)");
    if (r.opt_bool("use_mla", false))
        config_error(r.field("use_mla"), "Hunyuan's MLA variant is not modelled", "true", "set use_mla to false");
    MoeConfig& e = m.moe;
    e.num_experts = req_dim(r, "num_experts");
    e.top_k = uniform_per_layer(r, "moe_topk", m, 0, true);
    if (e.top_k == 0) e.top_k = req_dim(r, "moe_topk");
    require_at_most(r, "moe_topk", e.top_k, "num_experts", e.num_experts);
    const int64_t inter = req_dim(r, "intermediate_size");
    e.expert_intermediate_size = uniform_per_layer(r, "moe_intermediate_size", m, inter, true);
    one_shared_expert(e, inter * uniform_per_layer(r, "num_shared_expert", m, 0, false), false);
    e.routing = RoutingKind::softmax_topk;
    e.norm_topk_prob = r.opt_bool("norm_topk_prob", true);
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
    m.attn.qk_norm = r.opt_bool("use_qk_norm", false);
    m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", true);
    all_layers(m, 1);
    return m;
}

// GraniteMoE (IBM Granite 3.x MoE): top-k of the logits then a softmax over the k (Mixtral's math); the
// embedding/residual/attention/logit multipliers are scalars that change neither the parameters nor the work.
// granitemoeshared adds one shared expert of shared_intermediate_size.
ModelConfig import_granitemoe(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    read_experts(r, m, "num_local_experts", "num_experts_per_tok");
    m.moe.expert_intermediate_size = req_dim(r, "intermediate_size");
    m.moe.routing = RoutingKind::topk_softmax;
    m.moe.norm_topk_prob = true;
    one_shared_expert(m.moe, opt_dim(r, "shared_intermediate_size", 0), false);
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
    m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", true);
    all_layers(m, 1);
    return m;
}

// The linear-attention layers of a hybrid model from its per-layer list (`linear` marks the linear entries).
void linear_layers_from(const JsonReader& r, ModelConfig& m, const std::string& key,
                        const std::function<bool(const json&)>& linear) {
    const json& v = r.raw().at(key);
    if (!v.is_array()) config_error(r.field(key), "must be a list with one entry per layer", json_brief(v), "");
    require_per_layer(r, key, v.size(), m);
    m.layer_linear.assign(v.size(), 0);
    for (size_t i = 0; i < v.size(); ++i) m.layer_linear[i] = linear(v[i]) ? 1 : 0;
}

// Which layers of a Qwen3-Next / Qwen3.5 hybrid run gated DeltaNet: layer_types ("linear_attention" or
// "full_attention" per layer; the modelling code builds nothing for another entry), else every layer but each
// full_attention_interval-th (default 4). With both, they must agree: a disagreement means a corrupt config.
void delta_net_layers(const JsonReader& r, ModelConfig& m) {
    const bool has_interval = r.has("full_attention_interval");
    const int64_t interval = has_interval ? req_dim(r, "full_attention_interval") : 4;
    m.layer_linear.assign(static_cast<size_t>(m.num_layers), 0);
    for (int64_t i = 0; i < m.num_layers; ++i) m.layer_linear[static_cast<size_t>(i)] = (i + 1) % interval != 0;
    if (!r.has("layer_types")) return;
    const std::vector<std::string> types = string_list(r, "layer_types");
    require_per_layer(r, "layer_types", types.size(), m);
    for (size_t i = 0; i < types.size(); ++i) {
        const std::string at = r.field("layer_types") + "[" + std::to_string(i) + "]";
        if (types[i] != "linear_attention" && types[i] != "full_attention")
            config_error(at, "is not a layer type of this hybrid", "\"" + types[i] + "\"",
                         "use linear_attention or full_attention");
        const uint8_t linear = types[i] == "linear_attention" ? 1 : 0;
        if (has_interval && linear != m.layer_linear[i])
            config_error(at, "contradicts full_attention_interval (" + str(interval) + ")", "\"" + types[i] + "\"",
                         "make layer_types and full_attention_interval agree, or drop full_attention_interval");
        m.layer_linear[i] = linear;
    }
}

// Gated DeltaNet's shapes (linear_*) and the layers that run it.
void read_delta_net(const JsonReader& r, ModelConfig& m) {
    LinearAttentionConfig& la = m.linear_attn;
    la.kind = LinearAttentionKind::gated_delta_net;
    la.num_key_heads = req_dim(r, "linear_num_key_heads");
    la.num_value_heads = req_dim(r, "linear_num_value_heads");
    la.key_head_dim = req_dim(r, "linear_key_head_dim");
    la.value_head_dim = req_dim(r, "linear_value_head_dim");
    la.conv_kernel = opt_dim(r, "linear_conv_kernel_dim", 4);
    delta_net_layers(r, m);
}

// Qwen3-Next (modeling_qwen3_next.py): gated DeltaNet on 3 of every 4 layers, gated full attention (output gate,
// per-head q/k norm, RoPE on a quarter of the head) on the rest; 512 experts + a gated shared expert; one MTP layer
// (the config has no key for it; vLLM and the checkpoint have one).
ModelConfig import_qwen3_next(const JsonReader& r) {
    ModelConfig m = import_qwen_moe(r, true, true);
    one_shared_expert(m.moe, opt_dim(r, "shared_expert_intermediate_size", 0), true);
    m.attn.output_gate = true;
    partial_rotary(r, m, 0.25);
    read_delta_net(r, m);
    m.num_mtp_layers = opt_dim(r, "num_nextn_predict_layers", 1);
    return m;
}

// MiniMax's partial RoPE: rotary_dim dims of each q/k head (the whole head: 0).
void rotary_dim_from(const JsonReader& r, ModelConfig& m) {
    if (!r.has("rotary_dim")) return;
    const int64_t rot = req_dim(r, "rotary_dim");
    require_at_most(r, "rotary_dim", rot, "head_dim", m.attn.head_dim);
    m.attn.rotary_dim = rot >= m.attn.head_dim ? 0 : rot;
}

// MiniMax-Text-01 / MiniMax-M1 (modeling_minimax.py): lightning attention on the layers attn_type_list marks 0,
// softmax GQA with RoPE on rotary_dim dims on the others; softmax top-k renormalised (Mixtral's math), no shared
// expert. The post-norm alpha/beta factors are scalars (no parameters, no work).
ModelConfig import_minimax(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    read_experts(r, m, "num_local_experts", "num_experts_per_tok");
    m.moe.expert_intermediate_size = req_dim(r, "intermediate_size");
    m.moe.routing = RoutingKind::topk_softmax;
    m.moe.norm_topk_prob = true;
    if (opt_dim(r, "shared_intermediate_size", 0) > 0)
        config_error(r.field("shared_intermediate_size"), "MiniMax's shared expert is not modelled",
                     str(opt_dim(r, "shared_intermediate_size", 0)), "set it to 0 (as the published models)");
    all_layers(m, 1);
    rotary_dim_from(r, m);
    LinearAttentionConfig& la = m.linear_attn;
    la.kind = LinearAttentionKind::lightning;
    la.num_key_heads = la.num_value_heads = m.attn.num_heads;
    la.key_head_dim = la.value_head_dim = m.attn.head_dim;
    if (r.has("attn_type_list"))
        linear_layers_from(r, m, "attn_type_list", [](const json& e) { return e.is_number() && e.get<double>() == 0; });
    return m;
}

// MiniMax-M2 / M2.5 (modeling_minimax_m2.py): softmax GQA on every layer (48 q heads of 128 on a 3072 hidden: the
// attention is wider than the model), RoPE on rotary_dim dims, q_norm / k_norm each one RMSNorm over the whole q
// (k) width with a weight per element (qk_norm_type "per_layer"); every layer MoE, no shared expert; sigmoid scores,
// the top-k picked on scores + e_score_correction_bias (use_routing_bias), the unbiased scores of the k renormalised
// and scaled by routed_scaling_factor. The MTP modules (use_mtp, num_mtp_modules) are not modelled: the config gives
// no shapes for them (MiniMax's 230B total leaves them out too). mlp_intermediate_size is a legacy key the MoE
// layers do not read.
ModelConfig import_minimax_m2(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    all_layers(m, 1);
    read_experts(r, m, "num_local_experts", "num_experts_per_tok");
    MoeConfig& e = m.moe;
    e.expert_intermediate_size = req_dim(r, "intermediate_size");
    if (opt_dim(r, "shared_intermediate_size", 0) > 0)
        config_error(r.field("shared_intermediate_size"), "MiniMax's shared expert is not modelled",
                     str(opt_dim(r, "shared_intermediate_size", 0)), "set it to 0 (as the published models)");
    const std::string scoring = r.opt_string("scoring_func", "sigmoid");
    if (scoring != "sigmoid" && scoring != "softmax")
        config_error(r.field("scoring_func"), "is not a MiniMax-M2 scoring function", "\"" + scoring + "\"",
                     "use sigmoid (as the published models) or softmax");
    // Both score kinds: top-k on the (biased) scores, the unbiased scores of the k renormalised (ERNIE's softmax
    // with a correction bias, DeepSeek-V3's sigmoid with one group).
    e.routing = scoring == "sigmoid" ? RoutingKind::sigmoid_group_topk : RoutingKind::softmax_topk;
    e.router_correction_bias = r.opt_bool("use_routing_bias", true);
    e.norm_topk_prob = true;
    e.routed_scaling_factor = opt_ranged(r, "routed_scaling_factor", 1.0, model_range::kRoutedScalingFactor);
    if (r.opt_bool("use_grouped_topk", false))
        config_error(r.field("use_grouped_topk"), "group-limited routing is not modelled for MiniMax-M2", "true",
                     "set it to false (as the published models)");
    m.attn.qkv_bias = m.attn.o_bias = r.opt_bool("attention_bias", false);
    if (r.opt_bool("use_qk_norm", false)) {
        const std::string norm = r.opt_string("qk_norm_type", "per_layer");
        if (norm != "per_layer")
            config_error(r.field("qk_norm_type"), "is not a q/k norm moebench models for MiniMax-M2",
                         "\"" + norm + "\"", "use per_layer (one RMSNorm over all q heads and one over all k heads)");
        m.attn.qk_norm_full = true;
    }
    rotary_dim_from(r, m);
    if (r.has("attn_type_list")) {  // a MiniMax-01 leftover: 1 = softmax attention on every layer
        const std::vector<int64_t> types = int_list(r, "attn_type_list");
        require_per_layer(r, "attn_type_list", types.size(), m);
        for (size_t i = 0; i < types.size(); ++i)
            if (types[i] != 1)
                config_error(r.field("attn_type_list") + "[" + std::to_string(i) + "]",
                             "MiniMax-M2 runs softmax attention on every layer (0 = lightning attention is "
                             "MiniMax-01 / M1's)",
                             str(types[i]), "use 1 on every layer, or model_type minimax for a lightning hybrid");
    }
    if (r.opt_bool("use_mtp", false) && opt_dim(r, "num_mtp_modules", 0) > 0)
        m.notes = "its " + str(opt_dim(r, "num_mtp_modules", 0)) +
                  " MTP modules are not counted (the config gives no shapes for them)";
    return m;
}

// The text model of a multimodal config (text_config, required), of one of `types` when it names its model_type.
JsonReader text_model(const JsonReader& top, const std::vector<std::string>& types) {
    JsonReader r = top.child("text_config");
    const std::string type = r.opt_string("model_type", types.front());
    if (std::find(types.begin(), types.end(), type) == types.end())
        config_error(r.field("model_type"), "is not the text model this config's model_type carries",
                     "\"" + type + "\"", "use " + types.front());
    return r;
}

// tie_word_embeddings of a nested text model: its own, else the outer config's (Qwen3.5 keeps it outside); when
// both say it, they must agree.
void nested_tie(const JsonReader& top, const JsonReader& r, ModelConfig& m) {
    if (&top.raw() == &r.raw() || !top.has("tie_word_embeddings")) return;
    const bool outer = top.opt_bool("tie_word_embeddings", false);
    if (r.has("tie_word_embeddings") && r.opt_bool("tie_word_embeddings", false) != outer)
        config_error(r.field("tie_word_embeddings"),
                     std::string("differs from the outer tie_word_embeddings (") + (outer ? "true" : "false") + ")",
                     outer ? "false" : "true", "keep one of the two");
    m.tie_word_embeddings = outer;
}

constexpr const char* kVisionNote = "the text model (text_config); the vision tower (vision_config) is not modelled";

// Kimi-K2.5 (KimiK25ForConditionalGeneration): a MoonViT vision tower and projector (vision_config) in front of a
// kimi_k2 text model in text_config (DeepSeek-V3's layout: MLA, 384 experts, one shared, the first layer dense).
// Only the text model is modelled; Moonshot lists the vision encoder ("400M") apart from the 1T.
ModelConfig import_kimi_k25(const JsonReader& top) {
    const JsonReader r = text_model(top, {"kimi_k2", "deepseek_v3"});
    ModelConfig m = import_deepseek(r, "kimi_k2");
    nested_tie(top, r, m);
    m.notes = kVisionNote;
    return m;
}

// Qwen3.5 MoE (modeling_qwen3_5_moe.py): a vision tower (vision_config, not modelled) and the text model in
// text_config (model_type qwen3_5_moe_text; accepted on its own too). The text model is Qwen3-Next's hybrid: gated
// DeltaNet (in_proj_qkv / in_proj_z / in_proj_b / in_proj_a: Qwen3-Next's fused in_proj_qkvz and in_proj_ba split,
// the same weights) on the layers layer_types marks linear_attention, gated full attention (q_proj also yields the
// output gate when attn_output_gate, per-head q/k norm, RoPE on rope_parameters.partial_rotary_factor of the head)
// on the others; every layer MoE (the decoder layer always builds the sparse block) with a sigmoid-gated shared
// expert; softmax top-k renormalised (norm_topk_prob absent: true, as vLLM reads it); mtp_num_hidden_layers MTP
// layers.
ModelConfig import_qwen3_5_moe(const JsonReader& top) {
    const bool nested = top.has("text_config");
    const JsonReader r = nested ? text_model(top, {"qwen3_5_moe_text"}) : top;
    if (!int_list(r, "mlp_only_layers").empty())
        config_error(r.field("mlp_only_layers"), "Qwen3.5's decoder layer builds a MoE block on every layer",
                     json_brief(r.raw().at("mlp_only_layers")), "use [] (as the published models)");
    if (r.has("decoder_sparse_step") && req_dim(r, "decoder_sparse_step") != 1)
        config_error(r.field("decoder_sparse_step"), "Qwen3.5's decoder layer builds a MoE block on every layer",
                     str(req_dim(r, "decoder_sparse_step")), "use 1 (as the published models)");
    ModelConfig m = import_qwen_moe(r, true, true);
    m.moe.norm_topk_prob = r.opt_bool("norm_topk_prob", true);
    one_shared_expert(m.moe, opt_dim(r, "shared_expert_intermediate_size", 0), true);
    m.attn.output_gate = r.opt_bool("attn_output_gate", true);
    partial_rotary(r, m, 0.25);
    read_delta_net(r, m);
    m.num_mtp_layers = opt_dim(r, "mtp_num_hidden_layers", 0);
    nested_tie(top, r, m);
    if (nested) m.notes = kVisionNote;
    return m;
}

// GLM-5 (GlmMoeDsaForCausalLM, modeling_glm_moe_dsa.py): DeepSeek-V3.2's layout with GLM-5's sizes: MLA (64 heads,
// q_lora 2048, nope 192 + rope 64, v 256), the DSA lightning indexer on every layer (transformers' GlmMoeDsaIndexer
// is DeepSeek-V3.2's), first_k_dense_replace dense layers, sigmoid + noaux_tc routing, num_nextn_predict_layers MTP.
ModelConfig import_glm_moe_dsa(const JsonReader& r) { return import_deepseek(r, "glm_moe_dsa"); }

// ERNIE-4.5 MoE (modeling_ernie4_5_moe.py): MoE on layers moe_layer_start_index..moe_layer_end_index (inclusive,
// -1 = the last) every moe_layer_interval-th; softmax scores, top-k picked on scores + e_score_correction_bias,
// weights the unbiased scores renormalised; shared experts of the routed width; use_bias on every linear.
ModelConfig import_ernie4_5_moe(const JsonReader& r) {
    ModelConfig m;
    read_llama_common(r, m);
    read_experts(r, m, "moe_num_experts", "moe_k");
    MoeConfig& e = m.moe;
    e.expert_intermediate_size = req_dim(r, "moe_intermediate_size");
    e.num_shared_experts = opt_dim(r, "moe_num_shared_experts", 0);
    if (e.num_shared_experts > 0) e.shared_intermediate_size = e.expert_intermediate_size;
    e.routing = RoutingKind::softmax_topk;
    e.norm_topk_prob = true;
    e.router_correction_bias = r.opt_bool("moe_use_aux_free", true);
    const int64_t start = opt_dim(r, "moe_layer_start_index", 0);
    int64_t end = r.has("moe_layer_end_index") ? r.req_int("moe_layer_end_index") : -1;
    if (end < 0) end = m.num_layers - 1;
    const int64_t interval = r.has("moe_layer_interval") ? req_dim(r, "moe_layer_interval") : 1;
    m.layer_is_moe.assign(static_cast<size_t>(m.num_layers), 0);
    for (int64_t i = start; i <= end && i < m.num_layers; ++i)
        m.layer_is_moe[static_cast<size_t>(i)] = (i + 1) % interval == 0 ? 1 : 0;
    if (m.num_dense_layers() > 0) m.dense_intermediate_size = req_dim(r, "intermediate_size");
    const bool bias = r.opt_bool("use_bias", false);
    m.attn.qkv_bias = m.attn.o_bias = bias;
    if (bias)
        config_error(r.field("use_bias"), "biases on ERNIE's MLPs are not modelled", "true",
                     "set use_bias to false (as the published models)");
    m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", true);
    m.num_mtp_layers = opt_dim(r, "num_nextn_predict_layers", 0);
    return m;
}

using Importer = std::function<ModelConfig(const JsonReader&)>;

const std::map<std::string, Importer>& importers() {
    static const std::map<std::string, Importer> table = {
        {"mixtral", import_mixtral},
        {"qwen2_moe", [](const JsonReader& r) { return import_qwen_moe(r, false); }},
        {"qwen3_moe", [](const JsonReader& r) { return import_qwen_moe(r, true); }},
        {"deepseek", [](const JsonReader& r) { return import_deepseek(r, "deepseek"); }},
        {"deepseek_v2", [](const JsonReader& r) { return import_deepseek(r, "deepseek_v2"); }},
        {"deepseek_v3", [](const JsonReader& r) { return import_deepseek(r, "deepseek_v3"); }},
        {"kimi_k2", [](const JsonReader& r) { return import_deepseek(r, "kimi_k2"); }},
        // DeepSeek-V3.2: V3 plus a small lightning indexer per layer (counted: about 0.1 % of the total).
        {"deepseek_v32", [](const JsonReader& r) { return import_deepseek(r, "deepseek_v32"); }},
        {"dbrx", import_dbrx},
        {"olmoe", import_olmoe},
        {"gpt_oss", import_gpt_oss},
        {"llama4", import_llama4},
        {"llama4_text", import_llama4},
        {"grok-1", import_grok1},
        {"phimoe", import_phimoe},
        {"llama", import_llama},
        {"qwen2", import_qwen2},
        {"glm4_moe", import_glm4_moe},
        {"dots1", import_dots1},
        {"bailing_moe", import_bailing_moe},
        {"hunyuan_v1_moe", import_hunyuan},
        {"hunyuan", import_hunyuan},
        {"granitemoe", import_granitemoe},
        {"granitemoeshared", import_granitemoe},
        {"qwen3_next", import_qwen3_next},
        {"minimax", import_minimax},
        {"minimax_m1", import_minimax},
        {"ernie4_5_moe", import_ernie4_5_moe},
        {"minimax_m2", import_minimax_m2},
        {"kimi_k25", import_kimi_k25},
        {"qwen3_5_moe", import_qwen3_5_moe},
        {"qwen3_5_moe_text", import_qwen3_5_moe},
        {"glm_moe_dsa", import_glm_moe_dsa},
    };
    return table;
}

// architectures[0] -> model_type, for configs without (or with a misleading) model_type.
const std::map<std::string, std::string>& architecture_types() {
    static const std::map<std::string, std::string> table = {
        {"MixtralForCausalLM", "mixtral"},
        {"Qwen2MoeForCausalLM", "qwen2_moe"},
        {"Qwen3MoeForCausalLM", "qwen3_moe"},
        {"DeepseekForCausalLM", "deepseek"},
        {"DeepseekV2ForCausalLM", "deepseek_v2"},
        {"DeepseekV3ForCausalLM", "deepseek_v3"},
        {"DeepseekV32ForCausalLM", "deepseek_v32"},
        {"DbrxForCausalLM", "dbrx"},
        {"OlmoeForCausalLM", "olmoe"},
        {"GptOssForCausalLM", "gpt_oss"},
        {"Llama4ForConditionalGeneration", "llama4"},
        {"Llama4ForCausalLM", "llama4_text"},
        {"Grok1ModelForCausalLM", "grok-1"},
        {"Grok1ForCausalLM", "grok-1"},
        {"PhiMoEForCausalLM", "phimoe"},
        {"LlamaForCausalLM", "llama"},
        {"Qwen2ForCausalLM", "qwen2"},
        {"Glm4MoeForCausalLM", "glm4_moe"},
        {"Dots1ForCausalLM", "dots1"},
        {"BailingMoeForCausalLM", "bailing_moe"},
        {"BailingMoeV2ForCausalLM", "bailing_moe"},
        {"HunYuanMoEV1ForCausalLM", "hunyuan_v1_moe"},
        {"GraniteMoeForCausalLM", "granitemoe"},
        {"GraniteMoeSharedForCausalLM", "granitemoeshared"},
        {"Qwen3NextForCausalLM", "qwen3_next"},
        {"MiniMaxText01ForCausalLM", "minimax"},
        {"MiniMaxM1ForCausalLM", "minimax"},
        {"MiniMaxForCausalLM", "minimax"},
        {"Ernie4_5_MoeForCausalLM", "ernie4_5_moe"},
        {"MiniMaxM2ForCausalLM", "minimax_m2"},
        {"KimiK25ForConditionalGeneration", "kimi_k25"},
        {"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe"},
        {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text"},
        {"GlmMoeDsaForCausalLM", "glm_moe_dsa"},
    };
    return table;
}

}  // namespace

std::vector<std::string> supported_hf_model_types() {
    std::vector<std::string> out;
    for (const auto& [k, v] : importers()) out.push_back(k);
    for (const auto& [k, v] : architecture_types()) out.push_back(k);
    return out;
}

ModelConfig model_from_hf(const json& j, const std::string& path) {
    JsonReader r(j, path);
    std::string type = r.opt_string("model_type", "");
    std::string arch;
    if (r.has("architectures")) {
        const json& a = j.at("architectures");
        if (!a.is_array())
            config_error(r.field("architectures"), "must be a list of class names", json_brief(a),
                         "e.g. [\"MixtralForCausalLM\"]");
        for (size_t i = 0; i < a.size(); ++i)
            if (!a[i].is_string())
                config_error(r.field("architectures") + "[" + std::to_string(i) + "]", "must be a class name string",
                             json_brief(a[i]), "e.g. \"MixtralForCausalLM\"");
        if (!a.empty()) arch = a[0].get<std::string>();  // an empty list is fine when model_type says enough
    }
    // Grok-1 checkpoints are sometimes labelled model_type "mixtral"; the architecture is the reliable signal.
    if (arch.rfind("Grok1", 0) == 0) type = "grok-1";
    if (!importers().count(type)) {  // no or unknown model_type: fall back to the architecture name
        auto it = architecture_types().find(arch);
        if (it != architecture_types().end()) type = it->second;
    }
    auto imp = importers().find(type);
    if (imp == importers().end()) {
        std::string list;
        for (const auto& [k, v] : importers()) list += (list.empty() ? "" : ", ") + k;
        std::string shown = type.empty() ? (arch.empty() ? "none" : "architectures " + arch) : "\"" + type + "\"";
        config_error(r.field("model_type"), "unsupported model family", shown,
                     "supported model_type values: " + list + " (or a moebench model file)");
    }
    ModelConfig m = imp->second(r);
    static const std::map<std::string, std::string> aliases = {{"llama4_text", "llama4"},
                                                               {"hunyuan", "hunyuan_v1_moe"},
                                                               {"minimax_m1", "minimax"},
                                                               {"qwen3_5_moe_text", "qwen3_5_moe"}};
    const auto alias = aliases.find(type);
    m.family = alias != aliases.end() ? alias->second : type;
    // An importer's own note (what of the checkpoint is not modelled) follows the provenance.
    m.notes = "imported from Hugging Face config.json (" + (arch.empty() ? type : arch) + ")" +
              (m.notes.empty() ? "" : "; " + m.notes);
    return m;
}

}  // namespace moebench
