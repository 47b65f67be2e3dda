// SPDX-License-Identifier: Apache-2.0
// Engine routing dumps -> RoutingTrace. Every reader ends in the same [tokens, layers, k] array per sequence, which
// `assemble` maps onto the model's MoE layers and checks; the formats are in docs/trace-format.md ("Engine dumps").
#include "workload/engine_dumps.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/json_util.hpp"
#include "common/npy.hpp"
#include "common/read_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

namespace moebench {

namespace {

// One request's (or step's) routing: ids[(t * layers + l) * k + j], as every engine lays it out.
struct DumpSeq {
    int64_t tokens = 0, layers = 0, k = 0;
    std::vector<int64_t> ids;
    std::string where;  // file: field, for messages
};

// The engines' own options that a fix names: theirs, not moebench's flags (no flag_of; tests/check_layers.py lets a
// line marked as another program's option spell one).
constexpr const char* kReturnRoutedExperts =
    "--enable-return-routed-experts";  // another program's option (vLLM, SGLang)
constexpr const char* kMegatronRoutingReplay = "--moe-enable-routing-replay";  // another program's option (Megatron)
constexpr const char* kMegatronRoutingTrace = "--moe-routing-trace-path";      // another program's option (Megatron)

const char* kLayoutFix =
    "give the routing as the engine wrote it: [tokens][layers][k] expert ids (docs/trace-format.md, "
    "Engine dumps)";

// Nested lists [T][L][K] of whole numbers (vLLM v0.21, Megatron's moe_topk_indices).
DumpSeq seq_from_lists(const json& j, const std::string& where) {
    if (!j.is_array()) config_error(where, "is not a list of tokens", json_brief(j), kLayoutFix);
    DumpSeq s;
    s.where = where;
    s.tokens = static_cast<int64_t>(j.size());
    for (size_t t = 0; t < j.size(); ++t) {
        const json& tok = j[t];
        const std::string wt = fmt::format("{}[{}]", where, t);
        if (!tok.is_array() || tok.empty())
            config_error(wt, "is not a non-empty list of layers", json_brief(tok), kLayoutFix);
        if (t == 0) s.layers = static_cast<int64_t>(tok.size());
        if (static_cast<int64_t>(tok.size()) != s.layers)
            config_error(wt, fmt::format("has {} layers where token 0 has {}", tok.size(), s.layers), "", kLayoutFix);
        for (size_t l = 0; l < tok.size(); ++l) {
            const json& sel = tok[l];
            const std::string wl = fmt::format("{}[{}]", wt, l);
            if (!sel.is_array() || sel.empty())
                config_error(wl, "is not a non-empty list of expert ids", json_brief(sel), kLayoutFix);
            if (t == 0 && l == 0) s.k = static_cast<int64_t>(sel.size());
            if (static_cast<int64_t>(sel.size()) != s.k)
                config_error(
                    wl, fmt::format("has {} expert ids where the first token's first layer has {}", sel.size(), s.k),
                    "", kLayoutFix);
            for (const json& e : sel) {
                if (!e.is_number_integer())
                    config_error(wl, "holds a value that is not a whole number", json_brief(e), kLayoutFix);
                s.ids.push_back(e.get<int64_t>());
            }
        }
    }
    return s;
}

DumpSeq seq_from_npy(std::string_view bytes, const std::string& where) {
    NpyArray a = parse_npy(bytes, where);
    if (a.shape.size() != 3)
        config_error(where + ": shape", fmt::format("has {} dimensions, not 3 ([tokens, layers, k])", a.shape.size()),
                     fmt::format("{}", fmt::join(a.shape, ", ")), kLayoutFix);
    DumpSeq s;
    s.where = where;
    s.tokens = a.shape[0], s.layers = a.shape[1], s.k = a.shape[2];
    s.ids = std::move(a.values);
    return s;
}

// SGLang's raw bytes: little-endian integers of `dtype`, flat, [T, L, K] with L and K from the model.
DumpSeq seq_from_raw(std::string_view bytes, const std::string& dtype, int64_t layers, int64_t k,
                     const std::string& where, const std::string& dtype_where) {
    const int64_t item = dtype == "int32" ? 4 : dtype == "uint16" ? 2 : dtype == "uint8" ? 1 : 0;
    if (item == 0)
        config_error(dtype_where, "is not int32, uint16 or uint8", dtype,
                     "give the dtype SGLang wrote (missing = int32)");
    const int64_t row = item * layers * k;
    if (row <= 0 || static_cast<int64_t>(bytes.size()) % row != 0)
        config_error(where,
                     fmt::format("holds {} bytes, not a whole number of tokens of {} layers x top-{} x {} bytes",
                                 bytes.size(), layers, k, item),
                     "",
                     fmt::format("give {} the model the server ran (its num_hidden_layers and top-k shape the "
                                 "array), and routed_experts_dtype as SGLang wrote it",
                                 flag_of("model")));
    DumpSeq s;
    s.where = where;
    s.tokens = static_cast<int64_t>(bytes.size()) / row, s.layers = layers, s.k = k;
    s.ids.resize(static_cast<size_t>(s.tokens * layers * k));
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    for (size_t e = 0; e < s.ids.size(); ++e, p += item) {
        uint32_t u = 0;
        for (int64_t b = item - 1; b >= 0; --b) u = (u << 8) | p[b];
        s.ids[e] = item == 4 ? static_cast<int64_t>(static_cast<int32_t>(u)) : static_cast<int64_t>(u);
    }
    return s;
}

DumpSeq concat(DumpSeq a, const DumpSeq& b) {
    if (a.layers != b.layers || a.k != b.k)
        config_error(b.where,
                     fmt::format("has {} layers x top-{} where {} has {} x {}", b.layers, b.k, a.where, a.layers, a.k),
                     "", "give the prompt's and the generation's routing of one request");
    a.ids.insert(a.ids.end(), b.ids.begin(), b.ids.end());
    a.tokens += b.tokens;
    return a;
}

// The responses of a file: one object, or a list of them (one per request).
std::vector<const json*> responses(const json& doc) {
    std::vector<const json*> out;
    if (doc.is_array())
        for (const json& r : doc) out.push_back(&r);
    else
        out.push_back(&doc);
    return out;
}

std::string at(const std::string& path, size_t r, size_t n, const std::string& field) {
    return n > 1 ? fmt::format("{}: [{}].{}", path, r, field) : fmt::format("{}: {}", path, field);
}

const json& choices_of(const json& resp, const std::string& where) {
    if (!resp.is_object() || !resp.contains("choices") || !resp["choices"].is_array() || resp["choices"].empty())
        config_error(where, "is missing or not a non-empty list",
                     resp.is_object() && resp.contains("choices") ? json_brief(resp["choices"]) : "",
                     "give the engine's whole response (its choices hold the routing)");
    return resp["choices"];
}

[[noreturn]] void null_routing(const std::string& where) {
    config_error(where, "is null: the engine returned no routing for this request", "null",
                 fmt::format("start the server with {} (SGLang: and ask for return_routed_experts in the request); an "
                             "aborted or re-prefilled request has none",
                             kReturnRoutedExperts));
}

std::vector<DumpSeq> read_vllm(const json& doc, const std::string& path) {
    std::vector<DumpSeq> out;
    const auto rs = responses(doc);
    for (size_t r = 0; r < rs.size(); ++r) {
        const json& resp = *rs[r];
        const json& choices = choices_of(resp, at(path, r, rs.size(), "choices"));
        std::optional<DumpSeq> prompt;  // v0.21: the prompt's rows, shared by the choices
        if (resp.contains("prompt_routed_experts") && !resp["prompt_routed_experts"].is_null())
            prompt = seq_from_lists(resp["prompt_routed_experts"], at(path, r, rs.size(), "prompt_routed_experts"));
        for (size_t c = 0; c < choices.size(); ++c) {
            const std::string where = at(path, r, rs.size(), fmt::format("choices[{}].routed_experts", c));
            const json& v =
                choices[c].is_object() && choices[c].contains("routed_experts") ? choices[c]["routed_experts"] : json();
            if (!choices[c].is_object() || !choices[c].contains("routed_experts"))
                config_error(where, "is missing", "", std::string("start vLLM with ") + kReturnRoutedExperts);
            if (v.is_null()) null_routing(where);
            if (v.is_string()) {
                const std::string bytes = decode_base64(v.get_ref<const std::string&>(), where);
                if (!is_npy(bytes))
                    config_error(where, "is base64 of something other than a .npy file", json_brief(v),
                                 "give the string vLLM returned (base64 of np.save's bytes; it starts k05VTVBZ)");
                out.push_back(seq_from_npy(bytes, where));
            } else if (v.is_array()) {
                DumpSeq gen = seq_from_lists(v, where);
                out.push_back(prompt ? concat(*prompt, gen) : gen);
            } else {
                config_error(where, "is neither base64 of a .npy nor nested lists", json_brief(v), kLayoutFix);
            }
        }
    }
    return out;
}

std::vector<DumpSeq> read_sglang(const json& doc, const std::string& path, const ModelConfig* model) {
    std::vector<DumpSeq> out;
    const auto rs = responses(doc);
    for (size_t r = 0; r < rs.size(); ++r) {
        const json& resp = *rs[r];
        const std::string mw = at(path, r, rs.size(), "meta_info");
        if (!resp.is_object() || !resp.contains("meta_info") || !resp["meta_info"].is_object())
            config_error(mw, "is missing or not an object", "", "give SGLang's whole /generate response");
        const json& meta = resp["meta_info"];
        const std::string where = mw + ".routed_experts";
        if (!meta.contains("routed_experts"))
            config_error(where, "is missing", "",
                         fmt::format("start SGLang with {} and send \"return_routed_experts\": "
                                     "true with the request",
                                     kReturnRoutedExperts));
        const json& v = meta["routed_experts"];
        if (v.is_null()) null_routing(where);
        if (v.is_string()) {
            if (model == nullptr)
                config_error(where, "is raw integers without a shape", "",
                             fmt::format("give {} the model the server ran: its num_hidden_layers and top-k shape "
                                         "the array",
                                         flag_of("model")));
            const json dt = meta.value("routed_experts_dtype", json("int32"));
            if (!dt.is_string())
                config_error(mw + ".routed_experts_dtype", "is not a string", json_brief(dt),
                             "use int32, uint16 or uint8");
            const std::string bytes = decode_base64(v.get_ref<const std::string&>(), where);
            out.push_back(seq_from_raw(bytes, dt.get<std::string>(), model->num_layers, model->moe.top_k, where,
                                       mw + ".routed_experts_dtype"));
        } else if (v.is_object()) {  // {"format": "masked_dense", "values": b64 int32, "shape": [T, L, K],
                                     // "valid_mask"?}
            if (!v.contains("values") || !v["values"].is_string() || !v.contains("shape") || !v["shape"].is_array() ||
                v["shape"].size() != 3 || !std::all_of(v["shape"].begin(), v["shape"].end(), [](const json& d) {
                    return d.is_number_integer() && d.get<int64_t>() > 0 && d.get<int64_t>() <= kMaxNpyElements;
                }))
                config_error(where, "is an object without values (base64 int32) and a shape [tokens, layers, k]",
                             json_brief(v), kLayoutFix);
            const std::string bytes = decode_base64(v["values"].get_ref<const std::string&>(), where + ".values");
            const int64_t L = v["shape"][1].get<int64_t>(), K = v["shape"][2].get<int64_t>();
            DumpSeq s = seq_from_raw(bytes, "int32", L, K, where + ".values", where);
            if (s.tokens != v["shape"][0].get<int64_t>())
                config_error(where + ".shape",
                             fmt::format("says {} tokens, the values hold {}", v["shape"][0].get<int64_t>(), s.tokens),
                             "", kLayoutFix);
            if (v.contains("valid_mask") && v["valid_mask"].is_string()) {
                const std::string mask =
                    decode_base64(v["valid_mask"].get_ref<const std::string&>(), where + ".valid_mask");
                if (mask.size() != s.ids.size())
                    config_error(where + ".valid_mask",
                                 fmt::format("holds {} entries for {} values", mask.size(), s.ids.size()), "",
                                 kLayoutFix);
                for (size_t e = 0; e < mask.size(); ++e)
                    if (mask[e] == 0) s.ids[e] = -1;  // no selection recorded
            }
            out.push_back(std::move(s));
        } else {
            config_error(where, "is neither base64 nor a masked_dense object", json_brief(v), kLayoutFix);
        }
    }
    return out;
}

std::vector<DumpSeq> read_megatron_chat(const json& doc, const std::string& path) {
    std::vector<DumpSeq> out;
    const auto rs = responses(doc);
    for (size_t r = 0; r < rs.size(); ++r) {
        const json& choices = choices_of(*rs[r], at(path, r, rs.size(), "choices"));
        for (size_t c = 0; c < choices.size(); ++c) {
            const std::string where = at(path, r, rs.size(), fmt::format("choices[{}].moe_topk_indices", c));
            if (!choices[c].is_object() || !choices[c].contains("moe_topk_indices"))
                config_error(where, "is missing", "",
                             std::string("run Megatron's server with ") + kMegatronRoutingReplay);
            if (choices[c]["moe_topk_indices"].is_null()) null_routing(where);
            out.push_back(seq_from_lists(choices[c]["moe_topk_indices"], where));
        }
    }
    return out;
}

// Megatron's router trace: one JSON record per (step, layer) and rank; each (rank, step) becomes a sequence of its
// num_tokens tokens, its layers in ascending layer number. MTP records (block "mtp") are not decoder layers: skipped.
std::vector<DumpSeq> read_megatron_trace(const std::string& path, ImportSummary* summary) {
    require_readable_file(path);
    std::ifstream in(path, std::ios::binary);
    struct Group {
        std::map<int64_t, std::vector<int64_t>> by_layer;
        int64_t tokens = -1, k = -1;
        std::string where;
    };
    std::vector<Group> groups;
    std::map<std::pair<int64_t, int64_t>, size_t> index;
    std::string line;
    int64_t line_no = 0, mtp = 0;
    const auto int_field = [&](const json& rec, const char* key, const std::string& where, bool required,
                               int64_t dflt) {
        if (!rec.contains(key)) {
            if (required)
                config_error(where + "." + key, "is missing", "",
                             fmt::format("give the router trace Megatron wrote ({})", kMegatronRoutingTrace));
            return dflt;
        }
        if (!rec[key].is_number_integer() || rec[key].get<int64_t>() < 0)
            config_error(where + "." + key, "is not a whole number >= 0", json_brief(rec[key]),
                         "give the router trace "
                         "Megatron wrote");
        return rec[key].get<int64_t>();
    };
    while (std::getline(in, line)) {
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = fmt::format("{}:{}", path, line_no);
        json rec;
        try {
            rec = json::parse(line);
        } catch (const json::exception&) {
            config_error(where, "is not a JSON record", line.substr(0, 80),
                         "give the router trace Megatron wrote, one "
                         "JSON object per line");
        }
        if (!rec.is_object()) config_error(where, "is not a JSON object", json_brief(rec), "give one record per line");
        if (rec.value("block", json("decoder")) == json("mtp")) {
            ++mtp;
            continue;
        }
        const int64_t step = int_field(rec, "step", where, true, 0), layer = int_field(rec, "layer", where, true, 0);
        const int64_t rank = int_field(rec, "rank", where, false, 0);
        if (!rec.contains("top_indices"))
            config_error(where + ".top_indices", "is missing", "",
                         "give the router trace "
                         "Megatron wrote");
        DumpSeq one;  // [num_tokens][k] as one layer of one token each
        const json& ti = rec["top_indices"];
        if (!ti.is_array()) config_error(where + ".top_indices", "is not a list of tokens", json_brief(ti), kLayoutFix);
        json wrapped = json::array();
        for (const json& tok : ti) wrapped.push_back(json::array({tok}));
        one = seq_from_lists(wrapped, where + ".top_indices");
        if (rec.contains("num_tokens") && int_field(rec, "num_tokens", where, false, 0) != one.tokens)
            config_error(
                where + ".num_tokens",
                fmt::format("says {} tokens, top_indices holds {}", rec["num_tokens"].get<int64_t>(), one.tokens), "",
                "give the record as Megatron wrote it");
        if (rec.contains("topk") && one.tokens > 0 && int_field(rec, "topk", where, false, 0) != one.k)
            config_error(where + ".topk",
                         fmt::format("says {}, top_indices rows hold {}", rec["topk"].get<int64_t>(), one.k), "",
                         "give the record as Megatron wrote it");
        auto [it, fresh] = index.emplace(std::make_pair(rank, step), groups.size());
        if (fresh) groups.push_back(Group{{}, one.tokens, one.k, where});
        Group& g = groups[it->second];
        if (one.tokens != g.tokens || (one.tokens > 0 && one.k != g.k))
            config_error(where,
                         fmt::format("has {} tokens x top-{} where layer {} of rank {} step {} has {} x {}", one.tokens,
                                     one.k, g.by_layer.begin()->first, rank, step, g.tokens, g.k),
                         "", "give every layer of a step the same tokens (as Megatron records them)");
        if (!g.by_layer.emplace(layer, std::move(one.ids)).second)
            config_error(where + ".layer", fmt::format("repeats layer {} of rank {} step {}", layer, rank, step), "",
                         "give each (rank, step, layer) record once");
    }
    if (groups.empty()) config_error(path, "holds no router trace record", "", "give the router trace Megatron wrote");
    std::vector<DumpSeq> out;
    std::set<int64_t> layers;
    for (const auto& [l, ids] : groups.front().by_layer) layers.insert(l);
    for (const Group& g : groups) {
        std::set<int64_t> these;
        for (const auto& [l, ids] : g.by_layer) these.insert(l);
        if (these != layers)
            config_error(
                g.where,
                fmt::format("starts a step with {} layers, the first step has {}", these.size(), layers.size()), "",
                "give whole steps (every MoE layer of every step)");
        DumpSeq s;
        s.where = g.where;
        s.tokens = g.tokens, s.layers = static_cast<int64_t>(layers.size()), s.k = g.k;
        s.ids.resize(static_cast<size_t>(s.tokens * s.layers * s.k));
        int64_t slot = 0;
        for (const auto& [l, ids] : g.by_layer) {
            for (int64_t t = 0; t < s.tokens; ++t)
                for (int64_t j = 0; j < s.k; ++j)
                    s.ids[static_cast<size_t>((t * s.layers + slot) * s.k + j)] = ids[static_cast<size_t>(t * s.k + j)];
            ++slot;
        }
        if (s.tokens > 0) out.push_back(std::move(s));
    }
    if (summary) {
        summary->lines = line_no;
        if (mtp > 0) summary->examples.push_back(fmt::format("skipped {} MTP records (block mtp)", mtp));
    }
    return out;
}

// The sequences as one trace: the layer axis mapped onto the model's MoE layers, ids checked.
RoutingTrace assemble(std::vector<DumpSeq> seqs, const ModelConfig* model, int64_t num_experts, const std::string& path,
                      const std::string& kind, ImportSummary* summary) {
    if (seqs.empty()) config_error(path, "holds no routing", "", "give a dump with at least one request");
    const DumpSeq& first = seqs.front();
    for (const DumpSeq& s : seqs)
        if (s.layers != first.layers || s.k != first.k)
            config_error(s.where,
                         fmt::format("has {} layers x top-{} where {} has {} x {}", s.layers, s.k, first.where,
                                     first.layers, first.k),
                         "", "give requests of one model");
    if (first.layers < 1 || first.k < 1 || first.layers > kMaxTraceLayers)
        config_error(first.where, fmt::format("has {} layers x top-{}", first.layers, first.k), "", kLayoutFix);
    std::vector<int64_t> keep, model_layer;  // dump layer rows kept, and the model layer of each
    for (int64_t l = 0; l < first.layers; ++l) keep.push_back(l);
    std::string dropped;
    if (model) {
        std::vector<int64_t> moe_layers;
        for (int64_t l = 0; l < model->num_layers; ++l)
            if (model->is_moe_layer(l)) moe_layers.push_back(l);
        if (first.k != model->moe.top_k)
            config_error(first.where,
                         fmt::format("selects {} experts per token; model {} routes top-{}", first.k, model->name,
                                     model->moe.top_k),
                         "", fmt::format("give {} the model the engine ran", flag_of("model")));
        if (first.layers == model->num_layers && static_cast<int64_t>(moe_layers.size()) != model->num_layers) {
            keep = moe_layers;  // every layer has a row (vLLM, SGLang): the dense layers' rows hold placeholders
            dropped = fmt::format("dropped the rows of {} dense layers (model {})",
                                  model->num_layers - static_cast<int64_t>(keep.size()), model->name);
        } else if (first.layers != static_cast<int64_t>(moe_layers.size())) {
            config_error(first.where,
                         fmt::format("has {} layers; model {} has {} layers, {} of them MoE", first.layers, model->name,
                                     model->num_layers, moe_layers.size()),
                         "", fmt::format("give {} the model the engine ran", flag_of("model")));
        }
        model_layer = moe_layers;
        if (num_experts == 0) num_experts = model->moe.num_experts;
    }
    int64_t largest = -1, total = 0;
    for (const DumpSeq& s : seqs) {
        total += s.tokens;
        for (int64_t t = 0; t < s.tokens; ++t)
            for (int64_t l : keep)
                for (int64_t j = 0; j < s.k; ++j) {
                    const int64_t e = s.ids[static_cast<size_t>((t * s.layers + l) * s.k + j)];
                    if (e < -1 || e >= kMaxTraceExperts || (num_experts > 0 && e >= num_experts))
                        config_error(fmt::format("{}[{}][{}][{}]", s.where, t, l, j),
                                     fmt::format("is no expert id (0..{}, or -1 for none)",
                                                 (num_experts > 0 ? num_experts : kMaxTraceExperts) - 1),
                                     std::to_string(e),
                                     fmt::format("give logical expert ids (with EPLB replicas, map physical slots "
                                                 "through the engine's physical_to_logical_map first), and {} or {} of "
                                                 "the model the engine ran",
                                                 flag_of("model"), flag_of("num_experts")));
                    largest = std::max(largest, e);
                }
    }
    RoutingTrace t;
    t.num_layers = static_cast<int64_t>(keep.size());
    t.num_tokens = total;
    t.top_k = first.k;
    t.num_experts = num_experts > 0 ? num_experts : largest + 1;
    if (t.num_experts < 1)
        config_error(path, "selects no expert at all (every id is -1)", "", "give " + flag_of("num_experts"));
    t.topk_ids.resize(static_cast<size_t>(t.num_layers * t.num_tokens * t.top_k));
    int64_t base = 0;
    for (const DumpSeq& s : seqs) {
        t.seq_starts.push_back(base);
        for (size_t slot = 0; slot < keep.size(); ++slot)
            for (int64_t tok = 0; tok < s.tokens; ++tok)
                for (int64_t j = 0; j < s.k; ++j)
                    t.topk_ids[static_cast<size_t>((static_cast<int64_t>(slot) * total + base + tok) * t.top_k + j)] =
                        static_cast<int32_t>(s.ids[static_cast<size_t>((tok * s.layers + keep[slot]) * s.k + j)]);
        base += s.tokens;
    }
    if (model) {
        t.model = model->name;
        std::string list;
        for (int64_t l : model_layer) list += (list.empty() ? "" : ",") + std::to_string(l);
        t.extra_metadata["layer_indices"] = list;
    }
    t.source = "moebench trace convert " + path + " (" + kind + ")";
    t.extra_metadata["import_format"] = kind;
    if (summary) {
        summary->format = kind;
        summary->records = static_cast<int64_t>(seqs.size());
        summary->num_layers = t.num_layers;
        summary->num_sequences = static_cast<int64_t>(seqs.size());
        summary->tokens_seen = summary->tokens_kept = total;
        if (!dropped.empty()) summary->examples.push_back(dropped);
    }
    validate_trace(t, path);
    return t;
}

// A JSON document of the whole file, or null when it is none (JSONL, text, or larger than a response can be).
json whole_json(const std::string& path) {
    if (file_size_bytes(path) > kMaxReportBytes) return nullptr;
    const std::string text = read_file_bytes(path, kMaxReportBytes, "an engine dump");
    if (json_nesting_depth(text) > kMaxJsonDepth) return nullptr;
    try {
        return json::parse(text);
    } catch (const json::exception&) {
        return nullptr;
    }
}

bool any_choice_has(const json& doc, const char* key) {
    for (const json* r : responses(doc))
        if (r->is_object() && r->contains("choices") && (*r)["choices"].is_array())
            for (const json& c : (*r)["choices"])
                if (c.is_object() && c.contains(key)) return true;
    return false;
}

}  // namespace

std::string engine_dump_kind(const std::string& path) {
    require_readable_file(path);
    const std::string head = peek_file_bytes(path, 1 << 16);
    if (is_npy(head)) return "npy";
    const std::string first_line = head.substr(0, head.find('\n'));
    if (first_line.rfind("layer_id,expert_id,count", 0) == 0)
        config_error(path,
                     "is SGLang's expert distribution CSV (layer_id,expert_id,count): counts per expert, not each "
                     "token's experts",
                     "",
                     fmt::format("dump per-token routing (SGLang: {}, or the recorder's "
                                 "per_token mode) and convert that",
                                 kReturnRoutedExperts));
    if (head.find("\"top_indices\"") != std::string::npos) return "megatron-trace";
    const size_t pos = head.find_first_not_of(" \t\r\n");
    if (pos == std::string::npos || (head[pos] != '{' && head[pos] != '[')) return "";
    // Moebench's own JSONL: one record per (token, layer) with "experts"; the first line says so without reading on.
    if (first_line.find("\"experts\"") != std::string::npos && first_line.find("\"choices\"") == std::string::npos)
        return "";
    const json doc = whole_json(path);
    if (doc.is_null()) return "";
    const json& one = doc.is_array() && !doc.empty() ? doc[0] : doc;
    if (!one.is_object()) return "";
    if (one.contains("logical_count"))
        config_error(path, "is SGLang's logical_count (expert load per layer): counts, not each token's experts", "",
                     fmt::format("dump per-token routing (SGLang: {}) and convert that", kReturnRoutedExperts));
    if (one.contains("meta_info")) return "sglang";
    if (any_choice_has(doc, "moe_topk_indices")) return "megatron-chat";
    if (one.contains("prompt_routed_experts") || any_choice_has(doc, "routed_experts")) return "vllm";
    return "";
}

RoutingTrace trace_from_engine_dump(const std::string& path, const std::string& kind, const ModelConfig* model,
                                    int64_t num_experts, ImportSummary* summary) {
    std::vector<DumpSeq> seqs;
    if (kind == "npy") {
        const std::string bytes = read_file_bytes(path, kMaxReportBytes, "a .npy routing dump");
        seqs.push_back(seq_from_npy(bytes, path));
    } else if (kind == "megatron-trace") {
        seqs = read_megatron_trace(path, summary);
    } else {
        const json doc = whole_json(path);
        if (doc.is_null())
            config_error(path, "is not a JSON document", "", "give the engine's response as it returned it");
        if (kind == "vllm")
            seqs = read_vllm(doc, path);
        else if (kind == "sglang")
            seqs = read_sglang(doc, path, model);
        else if (kind == "megatron-chat")
            seqs = read_megatron_chat(doc, path);
        else
            MOEBENCH_CHECK(false, "unknown engine dump kind {}", kind);
    }
    return assemble(std::move(seqs), model, num_experts, path, kind, summary);
}

}  // namespace moebench
