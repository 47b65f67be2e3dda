// SPDX-License-Identifier: Apache-2.0
// Trace import from JSONL records and from the token-per-line text form.
#include "workload/trace_import.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/host_memory.hpp"
#include "common/json_util.hpp"
#include "common/read_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

namespace moebench {

std::string ImportSummary::describe() const {
    if (format != "jsonl" && format != "text") {  // an engine dump (workload/engine_dumps.hpp)
        std::string s = fmt::format("read an engine dump ({}{}): {} sequences, {} layers, {} tokens\n", format,
                                    lines > 0 ? fmt::format(", {} lines", lines) : std::string(), num_sequences,
                                    num_layers, tokens_kept);
        for (const auto& e : examples) s += "  " + e + "\n";
        return s;
    }
    std::string s = fmt::format("read {} lines ({}): {} records, {} malformed, {} duplicate\n", lines, format, records,
                                malformed, duplicates);
    s += fmt::format("{} sequences, {} layers, {} tokens seen; kept {} tokens present in every layer\n", num_sequences,
                     num_layers, tokens_seen, tokens_kept);
    if (tokens_incomplete > 0 || missing_records > 0)
        s += fmt::format("missing: {} (token, layer) records; dropped {} incomplete tokens\n", missing_records,
                         tokens_incomplete);
    if (position_gaps > 0) s += fmt::format("gaps: {} token positions have no record in any layer\n", position_gaps);
    for (const auto& e : examples) s += "  " + e + "\n";
    return s;
}

namespace {

std::ifstream open_text(const std::string& path) {
    require_readable_file(path);
    // What an import holds is proportional to the file (records, then the trace): refuse what cannot fit, up front.
    const int64_t size_bytes = file_size_bytes(path), avail_bytes = mem_available_bytes();
    if (avail_bytes > 0 && 8.0 * static_cast<double>(size_bytes) > static_cast<double>(avail_bytes))
        config_error(path,
                     fmt::format("is {}; importing it needs up to about {}, more than the {} available",
                                 human_bytes_iec(double(size_bytes)), human_bytes_iec(8.0 * double(size_bytes)),
                                 human_bytes_iec(double(avail_bytes))),
                     "", "import a shorter part of the trace (a trace replays cyclically)");
    std::ifstream in(path);
    if (!in) config_error(path, "cannot open trace file", "", "check the path");
    return in;
}

void note(ImportSummary& s, std::string msg) {
    if (s.examples.size() < 5) s.examples.push_back(std::move(msg));
}

void finish_metadata(RoutingTrace& t, const ImportSummary& s) {
    t.extra_metadata["import_format"] = s.format;
    t.extra_metadata["import_records"] = std::to_string(s.records);
    t.extra_metadata["import_malformed_lines"] = std::to_string(s.malformed);
    t.extra_metadata["import_missing_records"] = std::to_string(s.missing_records);
    t.extra_metadata["import_dropped_tokens"] = std::to_string(s.tokens_incomplete);
}

void check_experts(RoutingTrace& t, int64_t num_experts, int32_t max_id, const std::string& path) {
    if (num_experts > kMaxTraceExperts)
        config_error(path,
                     fmt::format("an expert count beyond {} was asked for, more than any model has", kMaxTraceExperts),
                     std::to_string(num_experts), "give the model's routed experts per layer");
    if (num_experts > 0) {
        if (max_id >= num_experts)
            config_error(path, "expert id " + std::to_string(max_id) + " is beyond " + flag_of("num_experts"),
                         std::to_string(num_experts), "pass the model's expert count");
        t.num_experts = num_experts;
    } else {
        t.num_experts = int64_t{max_id} + 1;
    }
}

}  // namespace

namespace {

// One line of a JSONL routing file, as read.
struct JsonlRecord {
    int64_t seq = 0, token = 0, layer = 0;
    std::vector<int32_t> ids;
    std::vector<float> probs;
};

// The records of a JSONL file: parses every line, skips (and counts, and notes) malformed ones; `seq_names` gets
// "dataset/problem_id" of each sequence in order of first appearance, `k` the experts per record.
struct JsonlRead {
    std::vector<JsonlRecord> records;
    std::vector<std::string> seq_names;
    int64_t k = -1;
};

// Why line `j` is no record ("" when it is one; then `r` holds it). `k`: experts per record so far (-1 = none yet).
std::string parse_jsonl_record(const json& j, int64_t k, JsonlRecord& r) {
    if (!j.is_object() || !j.contains("layer") || !j.contains("experts") || !j.contains("token_idx") ||
        !j["layer"].is_number_integer() || !j["token_idx"].is_number_integer() || !j["experts"].is_array())
        return "needs integer layer and token_idx and an experts array";
    r.layer = j["layer"].get<int64_t>();
    r.token = j["token_idx"].get<int64_t>();
    bool ok = r.layer >= 0 && r.layer < kMaxTraceLayers && r.token >= 0 && r.token <= kMaxTraceTokenIndex &&
              j["experts"].size() <= static_cast<size_t>(kMaxTraceExperts);
    for (const auto& e : j["experts"]) {
        if (!ok) break;
        if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= kMaxTraceExperts)
            ok = false;
        else
            r.ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
    }
    if (!ok || r.ids.empty())
        return fmt::format("layer (< {}), token_idx (< 2^40) or expert ids (< {}) out of range", kMaxTraceLayers,
                           kMaxTraceExperts);
    if (repeated_expert(r.ids.data(), static_cast<int64_t>(r.ids.size())) >= 0)
        return "an expert id appears twice in experts";
    if (j.contains("gating_probs")) {  // optional, but when present it must match experts one to one
        bool probs_ok = j["gating_probs"].is_array() && j["gating_probs"].size() == r.ids.size();
        if (probs_ok)
            for (const auto& p : j["gating_probs"]) {
                probs_ok = probs_ok && p.is_number() && std::isfinite(p.get<double>());
                if (probs_ok) r.probs.push_back(p.get<float>());
            }
        if (!probs_ok) return fmt::format("gating_probs must be {} finite numbers, one per expert", r.ids.size());
    }
    if (k >= 0 && static_cast<int64_t>(r.ids.size()) != k)
        return fmt::format("{} experts where earlier records have {}", r.ids.size(), k);
    return "";
}

JsonlRead read_jsonl_records(const std::string& path, ImportSummary& s) {
    JsonlRead out;
    std::map<std::string, int64_t> seq_index;  // "dataset/problem_id" -> sequence number (first appearance)
    std::ifstream in = open_text(path);
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        ++s.lines;
        auto malformed = [&](const std::string& why) {
            ++s.malformed;
            note(s, fmt::format("line {}: skipped, {}", line_no, why));
        };
        if (json_nesting_depth(line) > kMaxJsonDepth) {  // before parsing: nlohmann recurses on deep values
            malformed(fmt::format("nested more than {} levels deep", kMaxJsonDepth));
            continue;
        }
        json j;
        try {
            j = json::parse(line);
        } catch (const json::exception&) {
            malformed("not valid JSON");
            continue;
        }
        JsonlRecord r;
        if (const std::string why = parse_jsonl_record(j, out.k, r); !why.empty()) {
            malformed(why);
            continue;
        }
        if (out.k < 0) out.k = static_cast<int64_t>(r.ids.size());
        std::string dataset = j.contains("dataset") && j["dataset"].is_string() ? j["dataset"].get<std::string>() : "";
        std::string problem = j.contains("problem_id") ? j["problem_id"].dump() : "0";
        auto [it, inserted] = seq_index.emplace(dataset + "/" + problem, static_cast<int64_t>(out.seq_names.size()));
        if (inserted) out.seq_names.push_back(it->first);
        r.seq = it->second;
        out.records.push_back(std::move(r));
    }
    return out;
}

// Per (sequence, token) the indices of its records, sorted by layer, the first of repeated layers kept. Only the
// layers a token has are stored: memory follows the records, not tokens x the largest layer index.
using TokenRecords = std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>>;
TokenRecords group_by_token(const JsonlRead& in, ImportSummary& s) {
    const std::vector<JsonlRecord>& records = in.records;
    TokenRecords tokens;
    for (size_t i = 0; i < records.size(); ++i)
        tokens[{records[i].seq, records[i].token}].push_back(static_cast<int32_t>(i));
    for (auto& [key, recs] : tokens) {
        std::stable_sort(recs.begin(), recs.end(), [&](int32_t a, int32_t b) {
            return records[static_cast<size_t>(a)].layer < records[static_cast<size_t>(b)].layer;
        });
        size_t kept_n = 0;
        for (size_t i = 0; i < recs.size(); ++i) {
            const JsonlRecord& r = records[static_cast<size_t>(recs[i])];
            if (kept_n > 0 && records[static_cast<size_t>(recs[kept_n - 1])].layer == r.layer) {
                ++s.duplicates;
                note(s, fmt::format("duplicate record: sequence {} token {} layer {} (kept the first)",
                                    in.seq_names[static_cast<size_t>(key.first)], key.second, r.layer));
                continue;
            }
            recs[kept_n++] = recs[i];
        }
        recs.resize(kept_n);
    }
    s.tokens_seen = static_cast<int64_t>(tokens.size());
    return tokens;
}

// The complete tokens, in (sequence, token_idx) order, as the trace's ids (and weights when every record has
// gating_probs); each sequence of the input is one sequence of the trace.
void fill_trace(const JsonlRead& in, const TokenRecords& tokens, int64_t num_layers, const std::string& path,
                ImportSummary& s, RoutingTrace& t) {
    const std::vector<JsonlRecord>& records = in.records;
    const int64_t k = in.k;
    bool all_probs = true;
    std::vector<const std::vector<int32_t>*> kept;  // per kept token: its record of each layer, in layer order
    int64_t prev_seq = -1, prev_token = -1, last_kept_seq = -1;
    for (const auto& [key, recs] : tokens) {
        if (key.first != prev_seq) prev_token = -1;
        s.position_gaps += key.second - prev_token - 1;
        prev_seq = key.first;
        prev_token = key.second;
        const int64_t missing = num_layers - static_cast<int64_t>(recs.size());
        if (missing > 0) {
            s.missing_records += missing;
            ++s.tokens_incomplete;
            note(s, fmt::format("sequence {} token {}: {} of {} layers missing, token dropped",
                                in.seq_names[static_cast<size_t>(key.first)], key.second, missing, num_layers));
            continue;
        }
        if (key.first != last_kept_seq) t.seq_starts.push_back(static_cast<int64_t>(kept.size()));
        last_kept_seq = key.first;
        for (int32_t idx : recs) all_probs &= !records[static_cast<size_t>(idx)].probs.empty();
        kept.push_back(&recs);
    }
    s.tokens_kept = static_cast<int64_t>(kept.size());
    t.num_tokens = s.tokens_kept;
    if (t.num_tokens == 0)
        config_error(path, "no token has records for every layer", fmt::format("{} tokens seen", s.tokens_seen),
                     "check that the file holds one record per (token, layer)");
    t.topk_ids.assign(static_cast<size_t>(num_layers * t.num_tokens * k), -1);
    if (all_probs) t.topk_weights.assign(t.topk_ids.size(), 0.0f);
    for (int64_t tok = 0; tok < t.num_tokens; ++tok)
        for (int64_t l = 0; l < num_layers; ++l) {
            const JsonlRecord& r =
                records[static_cast<size_t>((*kept[static_cast<size_t>(tok)])[static_cast<size_t>(l)])];
            for (int64_t j = 0; j < k; ++j) {
                size_t at = static_cast<size_t>((l * t.num_tokens + tok) * k + j);
                t.topk_ids[at] = r.ids[static_cast<size_t>(j)];
                if (all_probs) t.topk_weights[at] = r.probs[static_cast<size_t>(j)];
            }
        }
}

}  // namespace

RoutingTrace trace_from_jsonl(const std::string& path, int64_t num_experts, ImportSummary* summary) {
    ImportSummary local;
    ImportSummary& s = summary ? *summary : local;
    s = ImportSummary{};
    s.format = "jsonl";
    const JsonlRead in = read_jsonl_records(path, s);
    s.records = static_cast<int64_t>(in.records.size());
    if (in.records.empty())
        config_error(path, "no usable JSONL routing records",
                     fmt::format("{} lines, {} malformed{}", s.lines, s.malformed,
                                 s.examples.empty() ? "" : "; first: " + s.examples.front()),
                     "one object per line with layer, token_idx and experts (docs/trace-format.md)");
    int64_t num_layers = 0;
    int32_t max_id = -1;
    for (const auto& r : in.records) {
        num_layers = std::max(num_layers, r.layer + 1);
        for (int32_t e : r.ids) max_id = std::max(max_id, e);
    }
    s.num_layers = num_layers;
    s.num_sequences = static_cast<int64_t>(in.seq_names.size());
    const TokenRecords tokens = group_by_token(in, s);

    RoutingTrace t;
    t.num_layers = num_layers;
    t.top_k = in.k;
    fill_trace(in, tokens, num_layers, path, s, t);
    check_experts(t, num_experts, max_id, path);
    t.source = "moebench trace convert " + path;
    std::string names;
    for (const auto& n : in.seq_names) names += (names.empty() ? "" : ",") + n;
    t.extra_metadata["sequences"] = names;
    finish_metadata(t, s);
    validate_trace(t, path);
    return t;
}

namespace {

// One token line of a text trace: k ids (id or id:weight) per layer group, groups separated by '|'.
struct TextLine {
    std::vector<int32_t> ids;
    std::vector<float> weights;
    int64_t layers = 0, weighted = 0, plain = 0;
};

// `k`: ids per group (set by the first line); `max_id` grows; `fail` throws with the line's position.
template <class Fail>
TextLine parse_text_line(const std::string& line, int64_t& k, int32_t& max_id, const Fail& fail) {
    TextLine out;
    std::stringstream groups(line);
    std::string group;
    while (std::getline(groups, group, '|')) {
        std::stringstream items(group);
        std::string item;
        int64_t in_group = 0;
        while (items >> item) {
            size_t colon = item.find(':');
            std::string id_text = item.substr(0, colon);
            // The whole text must be the number (from_chars stops at a NUL that strtol's C string would end at).
            int64_t v = 0;
            const auto [id_end, id_ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), v);
            if (id_text.empty() || id_ec != std::errc() || id_end != id_text.data() + id_text.size() || v < -1 ||
                v >= kMaxTraceExperts)
                fail(fmt::format("bad expert id '{}' (ids are -1 or 0..{})", id_text, kMaxTraceExperts - 1));
            out.ids.push_back(static_cast<int32_t>(v));
            max_id = std::max<int32_t>(max_id, static_cast<int32_t>(v));
            if (colon != std::string::npos) {
                std::string w_text = item.substr(colon + 1);
                char* end = nullptr;
                const float w = std::strtof(w_text.c_str(), &end);
                if (w_text.empty() || end != w_text.c_str() + w_text.size()) fail("bad weight '" + w_text + "'");
                out.weights.push_back(w);
                ++out.weighted;
            } else {
                ++out.plain;
            }
            ++in_group;
        }
        if (k < 0) k = in_group;
        if (in_group != k || k == 0)
            fail(fmt::format("layer group {} has {} ids, expected {}", out.layers, in_group, k));
        if (++out.layers > kMaxTraceLayers) fail(fmt::format("more than {} layer groups", kMaxTraceLayers));
    }
    return out;
}

// The token lines of a text trace, token-major as read: [tokens, layers * k] ids (and weights when given).
struct TextTokens {
    std::vector<int32_t> ids;
    std::vector<float> weights;
    std::vector<int64_t> seq_starts;
    int64_t num_tokens = 0, num_layers = -1, k = -1;
    bool has_weights = false;
    int32_t max_id = -1;
};

TextTokens read_text_tokens(const std::string& path, ImportSummary& s) {
    TextTokens tt;
    std::ifstream in = open_text(path);
    std::string line;
    int64_t line_no = 0;
    bool new_sequence = true;
    while (std::getline(in, line)) {
        ++line_no;
        const size_t hash = line.find('#');
        if (hash != std::string::npos) line.resize(hash);
        if (line.find_first_not_of(" \t\r") == std::string::npos) {
            // A blank line ends a sequence (comment-only lines do not).
            if (hash == std::string::npos && tt.num_tokens > 0) new_sequence = true;
            continue;
        }
        ++s.lines;
        auto fail = [&](const std::string& what) {
            config_error(fmt::format("{}:{}", path, line_no), what, line,
                         "one line per token: k ids per layer, layers separated by '|' (docs/trace-format.md)");
        };
        // A text trace is text: a NUL or another control byte (a binary file, a corrupt copy) is refused, not read
        // as separators or as the end of a number.
        const auto control = std::find_if(line.begin(), line.end(), [](char c) {
            const auto b = static_cast<unsigned char>(c);
            return (b < 0x20 && c != '\t' && c != '\r') || b == 0x7f;
        });
        if (control != line.end())
            fail(fmt::format("holds control byte 0x{:02x} at column {} (a text trace is text)",
                             static_cast<unsigned char>(*control), control - line.begin() + 1));
        const TextLine tl = parse_text_line(line, tt.k, tt.max_id, fail);
        if (tt.num_layers < 0) {
            tt.num_layers = tl.layers;
            tt.has_weights = tl.weighted > 0;
        }
        if (tl.layers != tt.num_layers) fail(fmt::format("{} layer groups, expected {}", tl.layers, tt.num_layers));
        if ((tt.has_weights && tl.plain > 0) || (!tt.has_weights && tl.weighted > 0))
            fail("give weights for every id (id:weight) or for none");
        if (new_sequence) tt.seq_starts.push_back(tt.num_tokens);
        new_sequence = false;
        tt.ids.insert(tt.ids.end(), tl.ids.begin(), tl.ids.end());
        tt.weights.insert(tt.weights.end(), tl.weights.begin(), tl.weights.end());
        ++tt.num_tokens;
        ++s.records;
    }
    return tt;
}

}  // namespace

RoutingTrace trace_from_text(const std::string& path, int64_t num_experts, ImportSummary* summary) {
    ImportSummary local;
    ImportSummary& s = summary ? *summary : local;
    s = ImportSummary{};
    s.format = "text";
    // Flat [tokens, layers * k], in file order (one vector per token cost ~20x the text of a short line).
    const TextTokens tt = read_text_tokens(path, s);
    if (tt.num_tokens == 0)
        config_error(path, "no token lines found", "", "one line per token: k ids per layer, layers separated by '|'");
    RoutingTrace t;
    const int64_t num_layers = tt.num_layers, k = tt.k;
    t.seq_starts = tt.seq_starts;
    t.num_layers = num_layers;
    t.top_k = k;
    t.num_tokens = tt.num_tokens;
    t.topk_ids.resize(static_cast<size_t>(num_layers * t.num_tokens * k));
    if (tt.has_weights) t.topk_weights.resize(t.topk_ids.size());
    for (int64_t tok = 0; tok < t.num_tokens; ++tok)
        for (int64_t l = 0; l < num_layers; ++l)
            for (int64_t j = 0; j < k; ++j) {
                size_t at = static_cast<size_t>((l * t.num_tokens + tok) * k + j);
                const size_t from = static_cast<size_t>((tok * num_layers + l) * k + j);
                t.topk_ids[at] = tt.ids[from];
                if (tt.has_weights) t.topk_weights[at] = tt.weights[from];
            }
    s.num_layers = num_layers;
    s.num_sequences = static_cast<int64_t>(t.seq_starts.size());
    s.tokens_seen = s.tokens_kept = t.num_tokens;
    if (tt.max_id < 0 && num_experts <= 0)
        config_error(path, "every selection is -1, so the expert count is unknown", "",
                     "pass " + flag_of("num_experts"));
    check_experts(t, num_experts, tt.max_id, path);
    t.source = "moebench trace convert " + path;
    finish_metadata(t, s);
    validate_trace(t, path);
    return t;
}

RoutingTrace import_trace(const std::string& path, int64_t num_experts, ImportSummary* summary) {
    // A .jsonl file is JSONL whatever its first line holds (a non-JSON first line is a malformed record, counted).
    if (path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0)
        return trace_from_jsonl(path, num_experts, summary);
    std::ifstream in = open_text(path);
    std::string line;
    while (std::getline(in, line)) {
        size_t pos = line.find_first_not_of(" \t\r");
        if (pos == std::string::npos || line[pos] == '#') continue;
        if (line[pos] == '{') return trace_from_jsonl(path, num_experts, summary);
        break;
    }
    return trace_from_text(path, num_experts, summary);
}

}  // namespace moebench
