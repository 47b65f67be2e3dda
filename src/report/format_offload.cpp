// SPDX-License-Identifier: Apache-2.0
// The text and CSV views of a moebench.offload/1 document (workload/offload_document.hpp), reading the document alone.
#include "common/flag_names.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

namespace moebench {

namespace {

std::string pct(double f) { return fmt::format("{:.1f}%", 100.0 * f); }

std::string mib_text(const json& v) {
    return v.is_number() ? fmt::format("{:.1f}", v.get<double>() / (1024.0 * 1024.0)) : std::string("-");
}

std::string point_text(const json& p, int64_t num_experts, bool per_layer) {
    std::string s = fmt::format(
        "resident {} of {} experts per layer ({}): hit rate {}, {:.3f} misses/token, {:.3f} fetches/token, {} MiB "
        "fetched/token, "
        "median reuse distance {} tokens\n",
        p.value("resident", int64_t{0}), num_experts, pct(p.value("resident_fraction", 0.0)),
        pct(p.value("hit_rate", 0.0)), p.value("misses_per_token", 0.0), p.value("fetches_per_token", 0.0),
        mib_text(p.at("bytes_fetched_per_token")), p.at("reuse_distance").value("median", 0.0));
    if (p.contains("prefetch"))
        s += fmt::format("  prefetch predictor: precision {}, recall {} ({} predicted, {} used)\n",
                         pct(p["prefetch"].value("precision", 0.0)), pct(p["prefetch"].value("recall", 0.0)),
                         p["prefetch"].value("predicted", int64_t{0}),
                         p["prefetch"].value("predicted_used", int64_t{0}));
    if (!per_layer) return s;
    s += fmt::format("  {:>5} {:>9} {:>12} {:>13} {:>14} {:>12}\n", "layer", "hit rate", "misses/tok", "fetches/tok",
                     "MiB/tok", "reuse p50");
    for (const json& l : p.at("per_layer"))
        s += fmt::format("  {:>5} {:>9} {:>12.3f} {:>13.3f} {:>14} {:>12}\n", l.value("layer", int64_t{0}),
                         pct(l.value("hit_rate", 0.0)), l.value("misses_per_token", 0.0),
                         l.value("fetches_per_token", 0.0), mib_text(l.at("bytes_fetched_per_token")),
                         l.at("reuse_distance").value("median", 0.0));
    return s;
}

std::vector<const json*> points_of(const json& doc) {
    std::vector<const json*> out;
    if (doc.contains("points"))
        for (const json& p : doc["points"]) out.push_back(&p);
    else
        out.push_back(&doc);
    return out;
}

}  // namespace

namespace formats_detail {

std::string render_offload_text(const json& doc) {
    std::string s = fmt::format(
        "offload replay of {} ({} tokens in {} sequences, {} layers, top-{} of {} experts), policy {} (counted)\n",
        doc.value("trace", ""), doc.value("num_tokens", int64_t{0}), doc.value("num_sequences", int64_t{0}),
        doc.value("num_layers", int64_t{0}), doc.value("top_k", int64_t{0}), doc.value("num_experts", int64_t{0}),
        doc.value("policy", ""));
    if (doc.at("expert_bytes").is_number())
        s +=
            fmt::format("  one expert: {:.1f} MiB in {} ({})\n", doc["expert_bytes"].get<double>() / (1024.0 * 1024.0),
                        doc.value("expert_dtype", ""), doc["model"].is_string() ? doc["model"].get<std::string>() : "");
    else
        s += "  bytes: give " + flag_of("model") + " (the trace names no model moebench knows)\n";
    const auto points = points_of(doc);
    for (const json* p : points) s += point_text(*p, doc.value("num_experts", int64_t{0}), points.size() == 1);
    return s;
}

std::string render_offload_csv(const json& doc) {
    std::string s =
        "policy,resident,layer,tokens,accesses,hits,misses,hit_rate,misses_per_token,fetches_per_token,"
        "bytes_fetched_per_token,reuse_median_tokens,prefetch_precision,prefetch_recall\n";
    const auto row = [&](const json& p, const json& c, const std::string& layer) {
        const json* pf = c.contains("prefetch") ? &c["prefetch"] : nullptr;
        s += fmt::format(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", doc.value("policy", ""), p.value("resident", int64_t{0}),
            layer, c.value("tokens", int64_t{0}), c.value("accesses", int64_t{0}), c.value("hits", int64_t{0}),
            c.value("misses", int64_t{0}), c.value("hit_rate", 0.0), c.value("misses_per_token", 0.0),
            c.value("fetches_per_token", 0.0),
            c.at("bytes_fetched_per_token").is_number() ? fmt::format("{}", c["bytes_fetched_per_token"].get<double>())
                                                        : "",
            c.at("reuse_distance").value("median", 0.0), pf ? fmt::format("{}", pf->value("precision", 0.0)) : "",
            pf ? fmt::format("{}", pf->value("recall", 0.0)) : "");
    };
    for (const json* p : points_of(doc)) {
        row(*p, *p, "all");
        for (const json& l : p->at("per_layer")) row(*p, l, std::to_string(l.value("layer", int64_t{0})));
    }
    return s;
}

}  // namespace formats_detail

}  // namespace moebench
