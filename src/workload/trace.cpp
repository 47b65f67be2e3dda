// SPDX-License-Identifier: Apache-2.0
// Routing traces on disk: safetensors tensors topk_ids / topk_weights / token_ids / seq_starts plus string metadata.
#include "workload/trace.hpp"

#include "common/error.hpp"
#include "common/read_file.hpp"
#include "common/tensor_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

namespace moebench {

namespace {

const char* const kKnownMetadata[] = {"model", "num_experts", "num_layers",
                                      "top_k", "source",      "moebench_trace_version"};

// A metadata count, refused beyond `max_value` before anything is sized by it (a 354-byte trace claiming
// 2000000000 experts made trace info allocate ~24 GB).
int64_t metadata_int(const TensorFile& f, const std::string& key, const std::string& path, int64_t max_value) {
    const std::string& v = f.metadata.at(key);
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || end != v.c_str() + v.size() || x < 0 || errno == ERANGE)
        config_error(path, "metadata '" + key + "' is not a non-negative integer", v,
                     "write it as a decimal string, e.g. \"8\"");
    if (x > max_value)
        config_error(path, fmt::format("metadata '{}' is beyond {}, more than any model has", key, max_value), v,
                     "check the value (it describes the model the trace was recorded on)");
    return x;
}

}  // namespace

int64_t RoutingTrace::num_missing() const { return std::count(topk_ids.begin(), topk_ids.end(), -1); }

int64_t trace_token_at(const RoutingTrace& trace, int64_t pos, int64_t batch) {
    const auto S = static_cast<int64_t>(trace.seq_starts.size());
    if (batch <= 0 || S < 2) return pos % trace.num_tokens;  // one recorded sequence: the stream in order
    const int64_t step = pos / batch, row = pos % batch;
    const int64_t q = row % S, copy = row / S, copies = (batch + S - 1) / S;
    const int64_t first = trace.seq_starts[static_cast<size_t>(q)];
    const int64_t end = q + 1 < S ? trace.seq_starts[static_cast<size_t>(q + 1)] : trace.num_tokens;
    const int64_t len = std::max<int64_t>(1, end - first);
    return first + (step + copy * len / copies) % len;  // the copies of one sequence spread along it
}

void validate_trace(const RoutingTrace& t, const std::string& where) {
    auto bad = [&](const std::string& what, const std::string& value, const std::string& fix) {
        config_error(where, "invalid routing trace: " + what, value, fix);
    };
    if (t.num_layers < 1) bad("it has no layers", std::to_string(t.num_layers), "record at least one MoE layer");
    if (t.top_k < 1) bad("top_k must be >= 1", std::to_string(t.top_k), "topk_ids is [layers, tokens, k]");
    if (t.num_tokens < 0) bad("negative token count", std::to_string(t.num_tokens), "");
    if (t.num_experts < 1)
        bad("num_experts must be >= 1", std::to_string(t.num_experts), "set the num_experts metadata");
    if (t.num_experts > kMaxTraceExperts)
        bad(fmt::format("num_experts is beyond {}, more than any model has", kMaxTraceExperts),
            std::to_string(t.num_experts), "check the expert count (the routed experts per layer of the model)");
    if (t.num_layers > kMaxTraceLayers)
        bad(fmt::format("more than {} layers", kMaxTraceLayers), std::to_string(t.num_layers),
            "a trace holds one slot per MoE layer of its model");
    if (t.top_k > t.num_experts)
        bad("top_k exceeds num_experts", std::to_string(t.top_k) + " > " + std::to_string(t.num_experts), "");
    const size_t n = static_cast<size_t>(t.num_layers * t.num_tokens * t.top_k);
    if (t.topk_ids.size() != n)
        bad("topk_ids holds " + std::to_string(t.topk_ids.size()) + " values", "",
            "expected layers*tokens*k = " + std::to_string(n));
    if (!t.topk_weights.empty() && t.topk_weights.size() != n)
        bad("topk_weights does not match topk_ids", std::to_string(t.topk_weights.size()), "use the same shape");
    if (!t.token_ids.empty() && static_cast<int64_t>(t.token_ids.size()) != t.num_tokens)
        bad("token_ids length differs from the token count", std::to_string(t.token_ids.size()),
            "give one id per token or leave it out");
    for (size_t i = 0; i < t.topk_ids.size(); ++i) {
        int32_t e = t.topk_ids[i];
        if (e < -1 || e >= t.num_experts) {
            int64_t per_layer = t.num_tokens * t.top_k;
            bad("expert id " + std::to_string(e) + " at layer " + std::to_string(static_cast<int64_t>(i) / per_layer) +
                    ", token " + std::to_string((static_cast<int64_t>(i) % per_layer) / t.top_k) +
                    " is outside [0, num_experts = " + std::to_string(t.num_experts) + ")",
                std::to_string(e), "ids must be < num_experts; -1 marks a missing selection");
        }
    }
    // A token that picks one expert twice would run that expert twice (or, with capacity, take two slots).
    for (size_t row = 0; row < n; row += static_cast<size_t>(t.top_k)) {
        const int32_t e = repeated_expert(t.topk_ids.data() + row, t.top_k);
        if (e >= 0) {
            const int64_t per_layer = t.num_tokens * t.top_k, i = static_cast<int64_t>(row);
            bad(fmt::format("expert {} is selected twice by token {} at layer {}", e, (i % per_layer) / t.top_k,
                            i / per_layer),
                std::to_string(e), "each token's k ids must differ (-1 marks a missing selection)");
        }
    }
    for (size_t i = 0; i < t.topk_weights.size(); ++i)
        if (!std::isfinite(t.topk_weights[i]) || t.topk_weights[i] < 0)  // gates are probabilities or scores >= 0
            bad(fmt::format("topk_weights[{}] is not a finite number >= 0", i), fmt::format("{}", t.topk_weights[i]),
                "record the router's combine weights (non-negative), or leave topk_weights out");
    if (t.num_tokens > 0 && (t.seq_starts.empty() || t.seq_starts[0] != 0))
        bad("seq_starts must begin with 0", t.seq_starts.empty() ? "empty" : std::to_string(t.seq_starts[0]),
            "list the first token of every sequence, starting with 0");
    for (size_t i = 0; i < t.seq_starts.size(); ++i) {
        if (t.seq_starts[i] < 0 || t.seq_starts[i] >= std::max<int64_t>(t.num_tokens, 1) ||
            (i > 0 && t.seq_starts[i] <= t.seq_starts[i - 1]))
            bad("seq_starts must be strictly increasing token indices below the token count",
                std::to_string(t.seq_starts[i]), "fix entry " + std::to_string(i));
    }
}

int32_t repeated_expert(const int32_t* ids, int64_t k) {
    for (int64_t a = 0; a < k; ++a)
        for (int64_t b = a + 1; b < k; ++b)
            if (ids[a] >= 0 && ids[a] == ids[b]) return ids[a];
    return -1;
}

std::vector<int64_t> model_layers_of(const RoutingTrace& t) {
    std::vector<int64_t> layers;
    const auto it = t.extra_metadata.find("layer_indices");
    if (it == t.extra_metadata.end()) return layers;
    std::stringstream list(it->second);
    std::string item;
    while (std::getline(list, item, ',')) {
        char* end = nullptr;
        const long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 0) return {};
        layers.push_back(v);
    }
    if (static_cast<int64_t>(layers.size()) != t.num_layers) return {};
    return layers;
}

void write_trace(const std::string& path, const RoutingTrace& t) {
    validate_trace(t, path);
    TensorFile f;
    f.tensors.push_back(NamedTensor::i32("topk_ids", {t.num_layers, t.num_tokens, t.top_k}, t.topk_ids.data()));
    if (!t.topk_weights.empty())
        f.tensors.push_back(
            NamedTensor::f32("topk_weights", {t.num_layers, t.num_tokens, t.top_k}, t.topk_weights.data()));
    if (!t.token_ids.empty()) f.tensors.push_back(NamedTensor::i32("token_ids", {t.num_tokens}, t.token_ids.data()));
    f.tensors.push_back(
        NamedTensor::i64("seq_starts", {static_cast<int64_t>(t.seq_starts.size())}, t.seq_starts.data()));
    f.metadata = t.extra_metadata;
    f.metadata["model"] = t.model;
    f.metadata["num_experts"] = std::to_string(t.num_experts);
    f.metadata["num_layers"] = std::to_string(t.num_layers);
    f.metadata["top_k"] = std::to_string(t.top_k);
    f.metadata["source"] = t.source;
    f.metadata["moebench_trace_version"] = kTraceFormatVersion;
    write_safetensors(path, f);
}

// A JSONL or text trace given where a safetensors one is expected: its first 8 bytes read as a header length of
// petabytes. Say what it is and how to convert it, instead of that.
static void reject_text_trace(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char head[8] = {};
    if (!in.read(head, sizeof head)) return;  // short or unreadable: read_safetensors says so
    const bool printable = std::all_of(std::begin(head), std::end(head), [](char c) {
        return (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\r' || c == '\t';
    });
    if (printable)  // a real header length has zero high bytes, so never 8 printable characters
        config_error(
            path, "is a text file (JSONL or text routing records?), not a safetensors trace",
            std::string(head, sizeof head) + "...",
            "convert it first: moebench trace convert " + path + " -o trace.safetensors (docs/trace-format.md)");
}

RoutingTrace read_trace(const std::string& path) {
    require_readable_file(path);  // before any open: a FIFO would block it, a device would never end
    reject_text_trace(path);
    TensorFile f = read_safetensors(path);
    auto fix = std::string("see docs/trace-format.md");
    const NamedTensor* ids = f.find("topk_ids");
    if (!ids) config_error(path, "routing trace has no 'topk_ids' tensor", "", fix);
    if (ids->shape.size() != 3)
        config_error(path, "topk_ids must be 3-D [layers, tokens, k]", std::to_string(ids->shape.size()) + "-D", fix);
    if (f.metadata.count("moebench_trace_version") && f.metadata.at("moebench_trace_version") != kTraceFormatVersion)
        config_error(path, "unsupported moebench_trace_version", f.metadata.at("moebench_trace_version"),
                     std::string("this moebench reads version ") + kTraceFormatVersion);
    RoutingTrace t;
    t.num_layers = ids->shape[0];
    t.num_tokens = ids->shape[1];
    t.top_k = ids->shape[2];
    t.topk_ids = ids->as_i32();
    if (const NamedTensor* w = f.find("topk_weights")) {
        if (w->shape != ids->shape) config_error(path, "topk_weights shape differs from topk_ids", "", fix);
        t.topk_weights = w->as_f32();
    }
    if (const NamedTensor* tok = f.find("token_ids")) {
        if (tok->shape.size() != 1 || tok->shape[0] != t.num_tokens)
            config_error(path, "token_ids must be [tokens]", "", fix);
        t.token_ids = tok->as_i32();
    }
    if (const NamedTensor* s = f.find("seq_starts")) {
        if (s->shape.size() != 1) config_error(path, "seq_starts must be 1-D", "", fix);
        t.seq_starts = s->as_i64();
    } else if (t.num_tokens > 0) {
        t.seq_starts = {0};  // no boundaries recorded: one sequence
    }
    // Metadata: the shape is authoritative; metadata that contradicts it is an error.
    for (const char* key : {"num_layers", "top_k"}) {
        if (!f.metadata.count(key)) continue;
        int64_t v = metadata_int(f, key, path, std::numeric_limits<int64_t>::max());
        int64_t actual = std::string(key) == "num_layers" ? t.num_layers : t.top_k;
        if (v != actual)
            config_error(path, std::string("metadata '") + key + "' contradicts the topk_ids shape",
                         std::to_string(v) + " vs " + std::to_string(actual), fix);
    }
    int32_t max_id = -1;
    for (int32_t e : t.topk_ids) max_id = std::max(max_id, e);
    t.num_experts =
        f.metadata.count("num_experts") ? metadata_int(f, "num_experts", path, kMaxTraceExperts) : int64_t{max_id} + 1;
    if (f.metadata.count("model")) t.model = f.metadata.at("model");
    if (f.metadata.count("source")) t.source = f.metadata.at("source");
    for (const auto& [k, v] : f.metadata) {
        bool known = false;
        for (const char* kk : kKnownMetadata) known |= (k == kk);
        if (!known) t.extra_metadata[k] = v;
    }
    validate_trace(t, path);
    return t;
}

}  // namespace moebench
