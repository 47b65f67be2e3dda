// SPDX-License-Identifier: Apache-2.0
// `moebench trace gen|info|convert`: write a routing trace from a workload spec, summarise a trace's expert load
// and routing statistics, and import JSONL / text traces (formats in docs/trace-format.md).
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/host_memory.hpp"
#include "common/json_util.hpp"
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "metrics/expert_load.hpp"
#include "metrics/routing_stats.hpp"
#include "workload/trace.hpp"
#include "workload/trace_import.hpp"
#include "workload/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <numeric>

namespace moebench::cli {

namespace {

struct GenArgs {
    std::string model;
    std::string routing;
    int64_t tokens = 0;
    int64_t layers = 0;
    int64_t seed = 0;  // checked by parse_seed: CLI11 would wrap -1 into a uint64_t
    std::string out;
};

struct InfoArgs {
    std::string file;
    std::string format = "text";
    int64_t window = 0;
    int64_t top_pairs = 3;
};

struct ConvertArgs {
    std::string in;
    std::string out;
    int64_t num_experts = 0;
    std::string model;
};

void run_gen(const GenArgs& a) {
    if (a.tokens < 1) config_error("--tokens", "must be >= 1", std::to_string(a.tokens), "e.g. --tokens 4096");
    ModelConfig model = load_model(a.model);
    refuse_output_over_input({{"-o", a.out}}, {{"--model", model.source}});
    if (a.layers < 0 || a.layers > model.num_layers)
        config_error("--layers", fmt::format("must be in 0..{} (0 = all layers of {})", model.num_layers, model.name),
                     std::to_string(a.layers), "run fewer layers or leave it out");
    std::vector<int64_t> layers(static_cast<size_t>(a.layers > 0 ? a.layers : model.num_layers));
    std::iota(layers.begin(), layers.end(), int64_t{0});
    const uint64_t seed = parse_seed(a.seed, "--seed");
    auto workload = make_workload(a.routing, model, seed, "--routing");
    // Refuse before allocating: ids and weights (8 bytes per selection) exist about three times at the peak
    // (the trace, the file image, the writer's buffer).
    const int64_t avail_bytes = mem_available_bytes();
    const double need_bytes = 24.0 * static_cast<double>(std::max<int64_t>(model.num_moe_layers(), 1)) *
                              static_cast<double>(a.tokens) * static_cast<double>(std::max<int64_t>(model.moe.top_k, 1));
    if (need_bytes > 1e15 || (avail_bytes > 0 && need_bytes > 0.85 * static_cast<double>(avail_bytes)))
        config_error("--tokens", fmt::format("a trace of this many tokens needs about {:.1f} GiB of memory, {:.1f} GiB "
                                             "is available", need_bytes / (1024.0 * 1024 * 1024),
                                             static_cast<double>(avail_bytes) / (1024.0 * 1024 * 1024)),
                     std::to_string(a.tokens), "generate fewer --tokens (a trace replays cyclically)");
    RoutingTrace t = generate_trace(*workload, model, layers, a.tokens);
    t.source = fmt::format("moebench trace gen --routing {} --seed {}", a.routing, a.seed);
    t.extra_metadata["routing"] = a.routing;
    t.extra_metadata["seed"] = std::to_string(a.seed);
    write_trace(a.out, t);
    std::cout << fmt::format("wrote {}: {} layers x {} tokens x top-{} of {} experts ({})\n", a.out, t.num_layers,
                             t.num_tokens, t.top_k, t.num_experts, workload->describe());
}

struct LayerInfo {
    ExpertLoad load;
    SwitchStats sw;
    std::vector<ExpertPair> pairs;
    LoadWindows windows;
};

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// --window keeps one count per expert for every window of every layer: refuse a window so small that they would not
// fit (--window 1 on a long trace of many experts is tens of GB).
void check_window_memory(const RoutingTrace& t, int64_t window) {
    const auto need_bytes = [&](int64_t w) {
        const double windows = std::ceil(static_cast<double>(t.num_tokens) / static_cast<double>(w));
        return static_cast<double>(t.num_layers) * windows * (8.0 * static_cast<double>(t.num_experts) + 64.0);
    };
    const int64_t avail_bytes = mem_available_bytes();
    const double budget_bytes = avail_bytes > 0 ? 0.5 * static_cast<double>(avail_bytes) : 16.0 * (1 << 30);
    if (need_bytes(window) <= budget_bytes) return;
    int64_t fits = window;
    while (fits < t.num_tokens && need_bytes(fits) > budget_bytes) fits *= 2;
    config_error("--window", fmt::format("windows of {} tokens over {} layers x {} tokens x {} experts need about {:.1f} "
                                         "GiB of counts, more than half of the memory available",
                                         window, t.num_layers, t.num_tokens, t.num_experts,
                                         need_bytes(window) / (1024.0 * 1024 * 1024)),
                 std::to_string(window), fmt::format("use a larger window, e.g. --window {}", fits));
}

// The statistics of one layer of a trace, and over all layers.
struct TraceInfo {
    std::vector<LayerInfo> layers;
    std::vector<int64_t> model_layer;  // model layer index per slot; empty when the trace names none
    std::vector<double> mom, sw_rates;  // max/mean load and switch rate per layer
    int64_t missing = 0;
    std::string layer_label(int64_t slot) const {
        return model_layer.empty() ? std::to_string(slot) : std::to_string(model_layer[static_cast<size_t>(slot)]);
    }
    double mean_switch_rate() const {
        return std::accumulate(sw_rates.begin(), sw_rates.end(), 0.0) / static_cast<double>(sw_rates.size());
    }
};

TraceInfo trace_info(const RoutingTrace& t, const InfoArgs& a) {
    TraceInfo ti;
    // Rows are labelled by model layer when the trace says which (as run reports are), else by MoE layer slot.
    ti.model_layer = model_layers_of(t);
    for (int64_t l = 0; l < t.num_layers; ++l) {
        LayerInfo li;
        const int32_t* ids = t.layer_ids(l);
        li.load = expert_load(ids, t.num_tokens, t.top_k, t.num_experts);
        li.sw = switch_stats(ids, t.num_tokens, t.top_k, t.seq_starts);
        li.pairs = top_coactivation_pairs(ids, t.num_tokens, t.top_k, a.top_pairs);
        if (a.window > 0) li.windows = load_windows(ids, t.num_tokens, t.top_k, t.num_experts, a.window);
        ti.mom.push_back(li.load.max_over_mean);
        ti.sw_rates.push_back(li.sw.switch_rate);
        ti.layers.push_back(std::move(li));
    }
    ti.missing = t.num_missing();
    return ti;
}

json trace_info_json(const RoutingTrace& t, const InfoArgs& a, const TraceInfo& ti) {
    const std::vector<int64_t>& model_layer = ti.model_layer;
    const std::vector<double>& mom = ti.mom;
    const std::vector<LayerInfo>& info = ti.layers;
    const int64_t missing = ti.missing;
    json layers = json::array();
    for (int64_t l = 0; l < t.num_layers; ++l) {
        const auto& li = info[static_cast<size_t>(l)];
        json pairs = json::array();
        for (const auto& p : li.pairs) pairs.push_back({{"experts", {p.a, p.b}}, {"count", p.count}});
        json lj = {{"layer", l}, {"load", to_json(li.load)}, {"switch", to_json(li.sw)},
                   {"coactivation_top_pairs", pairs}};
        if (!model_layer.empty()) lj["model_layer"] = model_layer[static_cast<size_t>(l)];
        if (a.window > 0) lj["windows"] = to_json(li.windows);
        layers.push_back(lj);
    }
    json out = {{"schema", "moebench.trace_info/1"},
                {"file", a.file},
                {"model", t.model},
                {"source", t.source},
                {"num_layers", t.num_layers},
                {"num_tokens", t.num_tokens},
                {"top_k", t.top_k},
                {"num_experts", t.num_experts},
                {"num_sequences", static_cast<int64_t>(t.seq_starts.size())},
                {"missing_selections", missing},
                {"has_weights", !t.topk_weights.empty()},
                {"metadata", t.extra_metadata},
                {"summary",
                 {{"source", "counted"},
                  {"max_over_mean_min", *std::min_element(mom.begin(), mom.end())},
                  {"max_over_mean_median", median(mom)},
                  {"max_over_mean_max", *std::max_element(mom.begin(), mom.end())},
                  {"switch_rate_mean", ti.mean_switch_rate()}}},
                {"layers", layers}};
    return out;
}

void print_trace_info(const RoutingTrace& t, const InfoArgs& a, const TraceInfo& ti) {
    const std::vector<LayerInfo>& info = ti.layers;
    const std::vector<double>& mom = ti.mom;
    std::cout << fmt::format("trace {}\n  model '{}', source '{}'\n", a.file, t.model, t.source);
    std::cout << fmt::format("  {} layers x {} tokens, top-{} of {} experts, {} sequence{}, {} missing selections{}\n",
                             t.num_layers, t.num_tokens, t.top_k, t.num_experts, t.seq_starts.size(),
                             t.seq_starts.size() == 1 ? "" : "s", ti.missing,
                             t.topk_weights.empty() ? ", no weights" : "");
    std::cout << fmt::format("\nexpert load per layer (counted){}\n",
                             ti.model_layer.empty() ? "; layer = MoE layer slot (the trace names no model layers)"
                                                 : "; layer = model layer index");
    std::cout << fmt::format("{:>5} {:>8} {:>6} {:>6} {:>6} {:>5} {:>8} {:>7}  {}\n", "layer", "max/mean", "cv", "gini",
                             "top3", "idle", "entropy", "switch", "top co-activated pairs (count)");
    for (int64_t l = 0; l < t.num_layers; ++l) {
        const auto& li = info[static_cast<size_t>(l)];
        std::string pairs;
        for (const auto& p : li.pairs) pairs += fmt::format("{}+{} ({})  ", p.a, p.b, p.count);
        std::cout << fmt::format("{:>5} {:>8.3f} {:>6.3f} {:>6.3f} {:>6.3f} {:>5} {:>8.3f} {:>7.3f}  {}\n", ti.layer_label(l),
                                 li.load.max_over_mean, li.load.cv, li.load.gini, li.load.top3_share,
                                 li.load.idle_experts, li.load.entropy_norm, li.sw.switch_rate, pairs);
    }
    std::cout << fmt::format("max/mean over layers: min {:.3f}, median {:.3f}, max {:.3f}; mean switch rate {:.3f}\n",
                             *std::min_element(mom.begin(), mom.end()), median(mom),
                             *std::max_element(mom.begin(), mom.end()),
                             ti.mean_switch_rate());
    std::cout << "(entropy = entropy of the load / log2(E); switch = share of consecutive tokens whose expert sets differ)\n";
    if (t.num_experts <= 16) {
        std::cout << "\ntokens per expert (layer x expert)\n" << fmt::format("{:>5}", "layer");
        for (int64_t e = 0; e < t.num_experts; ++e) std::cout << fmt::format(" {:>6}", e);
        std::cout << "\n";
        for (int64_t l = 0; l < t.num_layers; ++l) {
            std::cout << fmt::format("{:>5}", ti.layer_label(l));
            for (int64_t v : info[static_cast<size_t>(l)].load.tokens_per_expert) std::cout << fmt::format(" {:>6}", v);
            std::cout << "\n";
        }
    } else {
        std::cout << "(tokens per expert: " << t.num_experts << " experts, see --format json)\n";
    }
    if (a.window > 0) {
        std::cout << fmt::format("\nwindows of {} tokens: max/mean per window, averaged over layers (json: per layer)\n",
                                 a.window);
        const auto& w0 = info[0].windows;
        for (size_t w = 0; w < w0.start_token.size(); ++w) {
            double sum = 0;
            for (const auto& li : info) sum += li.windows.max_over_mean[w];
            std::cout << fmt::format("  tokens {:>7}..{:<7} {:.3f}\n", w0.start_token[w],
                                     w0.start_token[w] + w0.num_tokens[w] - 1, sum / static_cast<double>(info.size()));
        }
    }
}

void run_info(const InfoArgs& a) {
    if (a.format != "text" && a.format != "json")
        config_error("--format", "unknown format", a.format, "use text or json");
    if (a.window < 0) config_error("--window", "must be >= 0", std::to_string(a.window), "e.g. --window 256");
    // (a negative count reached std::vector as a huge size: internal error before)
    if (a.top_pairs < 0) config_error("--top-pairs", "must be >= 0", std::to_string(a.top_pairs), "e.g. --top-pairs 3");
    const RoutingTrace t = read_trace(a.file);
    if (a.window > 0) check_window_memory(t, a.window);
    const TraceInfo ti = trace_info(t, a);
    if (a.format == "json") std::cout << trace_info_json(t, a, ti).dump(2) << "\n";
    else print_trace_info(t, a, ti);
}

void run_convert(const ConvertArgs& a) {
    if (a.num_experts < 0)
        config_error("--num-experts", "must be >= 1 (or 0 to infer)", std::to_string(a.num_experts), "");
    if (a.num_experts > kMaxTraceExperts)
        config_error("--num-experts", fmt::format("is beyond {}, more experts per layer than any model has", kMaxTraceExperts),
                     std::to_string(a.num_experts), "give the model's routed experts per layer (or 0 to infer)");
    refuse_output_over_input({{"-o", a.out}}, {{"IN", a.in}});
    ImportSummary summary;
    RoutingTrace t = import_trace(a.in, a.num_experts, &summary);
    if (!a.model.empty()) t.model = a.model;
    write_trace(a.out, t);
    std::cout << summary.describe();
    std::cout << fmt::format("wrote {}: {} layers x {} tokens x top-{} of {} experts{}\n", a.out, t.num_layers,
                             t.num_tokens, t.top_k, t.num_experts,
                             a.num_experts > 0 ? "" : " (expert count inferred: largest id + 1; set --num-experts)");
}

}  // namespace

void add_trace_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("trace", "Routing traces: generate from a workload spec, summarise, import");
    cmd->require_subcommand(1);

    auto gen = std::make_shared<GenArgs>();
    auto* g = cmd->add_subcommand("gen", "Write a routing trace (safetensors) from a workload spec");
    g->add_option("--model", gen->model, "Model: short name, moebench model file or HF config.json")->required();
    g->add_option("--routing", gen->routing, "Workload spec: " + routing_spec_help())->required();
    g->add_option("--tokens", gen->tokens, "Tokens to generate")->required();
    g->add_option("--layers", gen->layers, "Only the first N layers of the model (0 = all)");
    g->add_option("--seed", gen->seed, "Seed (same seed, same trace)");
    g->add_option("-o,--out", gen->out, "Output .safetensors file")->required();
    g->callback([gen] { run_gen(*gen); });

    auto info = std::make_shared<InfoArgs>();
    auto* i = cmd->add_subcommand("info", "Expert load, switch rate and co-activation of a trace, per layer");
    i->add_option("file", info->file, "Trace file (.safetensors)")->required();
    i->add_option("--format", info->format, "text or json");
    i->add_option("--window", info->window, "Also give the load over successive windows of W tokens");
    i->add_option("--top-pairs", info->top_pairs, "Co-activated expert pairs listed per layer");
    i->callback([info] { run_info(*info); });

    auto conv = std::make_shared<ConvertArgs>();
    auto* c = cmd->add_subcommand("convert", "Import a JSONL or text routing trace into the safetensors format");
    c->add_option("in", conv->in, "Input: JSONL records or the text form (docs/trace-format.md)")->required();
    c->add_option("-o,--out", conv->out, "Output .safetensors file")->required();
    c->add_option("--num-experts", conv->num_experts, "Expert count of the model (default: largest id + 1)");
    c->add_option("--model", conv->model, "Model name stored in the metadata");
    c->callback([conv] { run_convert(*conv); });
}

}  // namespace moebench::cli
