// SPDX-License-Identifier: Apache-2.0
// The terminal view of a moebench.trace_info/1 document (metrics/trace_info.hpp): one row per layer, the summary
// over layers, the tokens per expert of small models and the windows when asked for.
#include "core/report_keys.hpp"

#include "common/flag_names.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

namespace moebench::formats_detail {

std::string render_trace_info_text(const json& j) {
    const json& layers = j["layers"];
    const int64_t num_experts = j["num_experts"].get<int64_t>(), num_sequences = j["num_sequences"].get<int64_t>();
    // Rows are labelled by model layer when the trace says which, else by MoE layer slot.
    const bool by_model_layer = !layers.empty() && layers[0].contains("model_layer");
    const auto label = [&](const json& l) {
        return std::to_string((by_model_layer ? l["model_layer"] : l["layer"]).get<int64_t>());
    };
    std::string o;
    o += fmt::format("trace {}\n  model '{}', source '{}'\n", j["file"].get<std::string>(),
                     j["model"].get<std::string>(), j["source"].get<std::string>());
    o += fmt::format("  {} layers x {} tokens, top-{} of {} experts, {} sequence{}, {} missing selections{}\n",
                     j["num_layers"].get<int64_t>(), j["num_tokens"].get<int64_t>(), j["top_k"].get<int64_t>(),
                     num_experts, num_sequences, num_sequences == 1 ? "" : "s", j["missing_selections"].get<int64_t>(),
                     j["has_weights"].get<bool>() ? "" : ", no weights");
    o += fmt::format(
        "\nexpert load per layer (counted){}\n",
        by_model_layer ? "; layer = model layer index" : "; layer = MoE layer slot (the trace names no model layers)");
    // The routing-decision cache's column: its hit rate per layer, "-" when the document has none (a window of 0).
    const int64_t cache_window = j["summary"].value("routing_cache_window", int64_t{0});
    o += fmt::format("{:>5} {:>8} {:>6} {:>6} {:>6} {:>5} {:>8} {:>7} {:>7}  {}\n", "layer", "max/mean", "cv", "gini",
                     "top3", "idle", "entropy", "switch", "cache", "top co-activated pairs (count)");
    for (const json& l : layers) {
        std::string pairs;
        for (const json& p : l["coactivation_top_pairs"])
            pairs += fmt::format("{}+{} ({})  ", p["experts"][0].get<int64_t>(), p["experts"][1].get<int64_t>(),
                                 p["count"].get<int64_t>());
        const json& load = l["load"];
        o += fmt::format("{:>5} {:>8.3f} {:>6.3f} {:>6.3f} {:>6.3f} {:>5} {:>8.3f} {:>7.3f} {:>7}  {}\n", label(l),
                         load[keys::kMaxOverMean].get<double>(), load["cv"].get<double>(), load["gini"].get<double>(),
                         load["top3_share"].get<double>(), load["idle_experts"].get<int64_t>(),
                         load["entropy_norm"].get<double>(), l["switch"]["switch_rate"].get<double>(),
                         l.contains("routing_cache")
                             ? fmt::format("{:.3f}", l["routing_cache"]["hit_rate"].get<double>())
                             : std::string("-"),
                         pairs);
    }
    const json& s = j["summary"];
    o += fmt::format("max/mean over layers: min {:.3f}, median {:.3f}, max {:.3f}; mean switch rate {:.3f}\n",
                     s["max_over_mean_min"].get<double>(), s["max_over_mean_median"].get<double>(),
                     s["max_over_mean_max"].get<double>(), s["switch_rate_mean"].get<double>());
    o += "(entropy = entropy of the load / log2(E); switch = share of consecutive tokens whose expert sets differ";
    if (cache_window > 0)
        o += fmt::format(
            "; cache = share of tokens whose expert set repeats one of the previous {} tokens of its "
            "sequence: the hit rate of a routing-decision cache ({})",
            cache_window, flag_of("cache_window"));
    o += ")\n";
    if (num_experts <= 16) {
        o += "\ntokens per expert (layer x expert)\n" + fmt::format("{:>5}", "layer");
        for (int64_t e = 0; e < num_experts; ++e) o += fmt::format(" {:>6}", e);
        o += "\n";
        for (const json& l : layers) {
            o += fmt::format("{:>5}", label(l));
            for (const json& v : l["load"]["tokens_per_expert"]) o += fmt::format(" {:>6}", v.get<int64_t>());
            o += "\n";
        }
    } else {
        o += "(tokens per expert: " + std::to_string(num_experts) + " experts, see " + flag_of("format") + " json)\n";
    }
    if (!layers.empty() && layers[0].contains("windows")) {
        const json& w0 = layers[0]["windows"];
        o += fmt::format("\nwindows of {} tokens: max/mean per window, averaged over layers (json: per layer)\n",
                         w0["window_tokens"].get<int64_t>());
        for (size_t w = 0; w < w0["start_token"].size(); ++w) {
            double sum = 0;
            for (const json& l : layers) sum += l["windows"][keys::kMaxOverMean][w].get<double>();
            const int64_t start = w0["start_token"][w].get<int64_t>();
            o += fmt::format("  tokens {:>7}..{:<7} {:.3f}\n", start, start + w0["num_tokens"][w].get<int64_t>() - 1,
                             sum / static_cast<double>(layers.size()));
        }
    }
    return o;
}

}  // namespace moebench::formats_detail
