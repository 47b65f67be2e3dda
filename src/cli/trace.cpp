// SPDX-License-Identifier: Apache-2.0
// `moebench trace gen|info|convert`: write a routing trace from a workload spec, summarise a trace's expert load
// and routing statistics, and import JSONL / text traces (formats in docs/trace-format.md).
#include "workload/trace.hpp"
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/host_memory.hpp"
#include "common/json_util.hpp"
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "metrics/trace_info.hpp"
#include "report/formats.hpp"
#include "workload/engine_dumps.hpp"
#include "workload/trace_import.hpp"
#include "workload/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>

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
    int64_t cache_window = 16;
    std::string out;
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
                              static_cast<double>(a.tokens) *
                              static_cast<double>(std::max<int64_t>(model.moe.top_k, 1));
    if (need_bytes > 1e15 || (avail_bytes > 0 && need_bytes > 0.85 * static_cast<double>(avail_bytes)))
        config_error(
            "--tokens",
            fmt::format("a trace of this many tokens needs about {:.1f} GiB of memory, {:.1f} GiB "
                        "is available",
                        need_bytes / (1024.0 * 1024 * 1024), static_cast<double>(avail_bytes) / (1024.0 * 1024 * 1024)),
            std::to_string(a.tokens), "generate fewer --tokens (a trace replays cyclically)");
    RoutingTrace t = generate_trace(*workload, model, layers, a.tokens);
    t.source = fmt::format("moebench trace gen --routing {} --seed {}", a.routing, a.seed);
    t.extra_metadata["routing"] = a.routing;
    t.extra_metadata["seed"] = std::to_string(a.seed);
    write_trace(a.out, t);
    std::cout << fmt::format("wrote {}: {} layers x {} tokens x top-{} of {} experts ({})\n", a.out, t.num_layers,
                             t.num_tokens, t.top_k, t.num_experts, workload->describe());
}

void run_info(const InfoArgs& a) {
    const std::string format = parse_format(a.format, DocKind::trace_info, "--format");
    const TraceInfoRequest request{a.file, a.window, a.top_pairs, a.cache_window};
    check_trace_info_request(request);
    refuse_output_over_input({{"-o", a.out}}, {{"FILE", a.file}});
    const RoutingTrace t = read_trace(a.file);
    emit_view(render_view(trace_info_document(t, request), DocKind::trace_info, format), a.out);
}

void run_convert(const ConvertArgs& a) {
    if (a.num_experts < 0)
        config_error("--num-experts", "must be >= 1 (or 0 to infer)", std::to_string(a.num_experts), "");
    if (a.num_experts > kMaxTraceExperts)
        config_error("--num-experts",
                     fmt::format("is beyond {}, more experts per layer than any model has", kMaxTraceExperts),
                     std::to_string(a.num_experts), "give the model's routed experts per layer (or 0 to infer)");
    refuse_output_over_input({{"-o", a.out}}, {{"IN", a.in}});
    ImportSummary summary;
    // --model: a model that resolves (short name, model file, HF config.json) shapes an engine dump (which rows are
    // MoE layers, top-k, experts); any other text is only the name stored in the trace.
    std::optional<ModelConfig> model;
    if (!a.model.empty()) {
        try {
            model = load_model(a.model);
        } catch (const ConfigError& e) {  // a name only; said, so that a near-miss does not pass unnoticed
            model.reset();
            std::cerr << "moebench: note: --model " << a.model
                      << " is stored as the trace's model name only: it does not resolve to a model, so the dump is "
                         "read without one ("
                      << e.what() << ")\n";
        }
    }
    const std::string kind = engine_dump_kind(a.in);
    RoutingTrace t = kind.empty()
                         ? import_trace(a.in, a.num_experts, &summary)
                         : trace_from_engine_dump(a.in, kind, model ? &*model : nullptr, a.num_experts, &summary);
    if (!a.model.empty()) t.model = model ? model->name : a.model;
    write_trace(a.out, t);
    std::cout << summary.describe();
    std::cout << fmt::format("wrote {}: {} layers x {} tokens x top-{} of {} experts{}\n", a.out, t.num_layers,
                             t.num_tokens, t.top_k, t.num_experts,
                             a.num_experts > 0 || (model && !kind.empty())
                                 ? ""
                                 : " (expert count inferred: largest id + 1; set --num-experts)");
}

}  // namespace

void add_trace_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("trace", "Routing traces: generate from a workload spec, summarise, import");
    cmd->require_subcommand(1);

    auto gen = std::make_shared<GenArgs>();
    auto* g = cmd->add_subcommand("gen", "Write a routing trace (safetensors) from a workload spec");
    g->add_option("--model", gen->model, "Model: short name, moebench model file or HF config.json")->required();
    g->add_option("--routing", gen->routing, "Workload spec: " + routing_spec_help())->required();
    add_whole_option(g, "--tokens", gen->tokens, "Tokens to generate")->required();
    add_whole_option(g, "--layers", gen->layers, "Only the first N layers of the model (0 = all)");
    add_whole_option(g, "--seed", gen->seed, "Seed (same seed, same trace)");
    g->add_option("-o,--out", gen->out, "Output .safetensors file")->required()->type_name("FILE");
    g->callback([gen] { run_gen(*gen); });

    auto info = std::make_shared<InfoArgs>();
    auto* i = cmd->add_subcommand("info", "Expert load, switch rate and co-activation of a trace, per layer");
    i->add_option("file", info->file, "Trace file (.safetensors)")->required();
    i->add_option("--format", info->format, format_names_help(DocKind::trace_info) + " (default text)")
        ->type_name("FORMAT");
    add_whole_option(i, "--window", info->window, "Also give the load over successive windows of W tokens");
    add_whole_option(i, "--top-pairs", info->top_pairs, "Co-activated expert pairs listed per layer");
    add_whole_option(i, "--cache-window", info->cache_window,
                     "Routing-decision cache: per layer, the share of tokens whose expert set repeats one of the "
                     "previous W tokens of its sequence (default 16; 0 = off)");
    i->add_option("-o,--out", info->out, "Write the output to FILE (atomically) instead of stdout")->type_name("FILE");
    i->callback([info] { run_info(*info); });

    auto conv = std::make_shared<ConvertArgs>();
    auto* c = cmd->add_subcommand("convert",
                                  "Import a routing trace (JSONL, text, or an engine's per-token dump: vLLM, "
                                  "SGLang, Megatron) into the safetensors format");
    c->add_option("in", conv->in,
                  "Input: JSONL records, the text form, or an engine dump: a vLLM response or .npy, an "
                  "SGLang /generate response, a Megatron router trace or chat completion "
                  "(docs/trace-format.md)")
        ->required();
    c->add_option("-o,--out", conv->out, "Output .safetensors file")->required()->type_name("FILE");
    add_whole_option(c, "--num-experts", conv->num_experts, "Expert count of the model (default: largest id + 1)");
    c->add_option("--model", conv->model,
                  "Model the routing came from: a model that resolves (short name, file) says "
                  "which rows of an engine dump are MoE layers, its top-k and experts (SGLang's "
                  "raw dumps need it); any other text is stored as the trace's model name");
    c->callback([conv] { run_convert(*conv); });
}

}  // namespace moebench::cli
