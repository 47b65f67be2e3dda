// SPDX-License-Identifier: Apache-2.0
// `moebench offload --trace T --resident N[,N...] [--policy P]`: a routing trace replayed through per-layer expert
// caches of N resident experts (workload/offload_replay.hpp); its document built in workload/offload_document.hpp,
// printed through the format table (report/formats.cpp, DocKind::offload).
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "config/model_config.hpp"
#include "core/precision.hpp"
#include "model/accounting.hpp"
#include "report/formats.hpp"
#include "workload/offload_document.hpp"
#include "workload/offload_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

struct OffloadArgs {
    std::string trace, policy = "lru", model, expert_dtype = "auto", format = "text", out;
    std::vector<int64_t> resident;  // one replay each, in the order given
};

// The cache sizes --resident gave (read as a sweep reads an axis: 2, 1,2,4 or 1..64): each at least 1.
void check_resident(const std::vector<int64_t>& resident) {
    for (int64_t n : resident)
        if (n < 1)
            config_error("--resident", "must be at least 1 resident expert per layer", std::to_string(n),
                         "give N >= 1 (N at or above the expert count keeps every expert resident)");
    if (resident.size() > 256)
        config_error("--resident", "lists more than 256 values", std::to_string(resident.size()) + " values",
                     "give fewer cache sizes");
}

DType expert_dtype_of(const std::string& name) {
    if (name == "auto") return DType::bf16;
    const auto d = dtype_named(name);
    if (!d || !dtype_info(*d).weights)
        config_error("--expert-dtype", "unknown format for expert weights", name,
                     "use auto (bf16) or one of: " + dtype_names_for(TensorClass::expert_weights, ", "));
    return *d;
}

void run_offload(const OffloadArgs& a) {
    check_resident(a.resident);
    const OffloadPolicy& policy = offload_policy(a.policy, "--policy");
    const DType dtype = expert_dtype_of(a.expert_dtype);
    const std::string format = parse_format(a.format, DocKind::offload, "--format");
    if (!a.out.empty() && a.out != "-") check_output_path(a.out);

    ModelConfig m;
    if (!a.model.empty()) m = load_model(a.model);
    refuse_output_over_input({{"-o", a.out}}, {{"--trace", a.trace}, {"--model", m.source}});
    RoutingTrace trace = load_any_trace(a.trace, a.model.empty() ? 0 : m.moe.num_experts, "--trace");
    std::string model_name;
    if (!a.model.empty()) {
        if (m.moe.num_experts != trace.num_experts)
            config_error(
                "--model",
                fmt::format("has {} routed experts per layer, the trace {}", m.moe.num_experts, trace.num_experts),
                a.model, "give the model the trace was recorded on");
        if (m.moe.top_k != trace.top_k)
            config_error("--model", fmt::format("selects top-{} experts, the trace top-{}", m.moe.top_k, trace.top_k),
                         a.model, "give the model the trace was recorded on");
        if (trace.num_layers > m.num_moe_layers())
            config_error("--model",
                         fmt::format("has {} MoE layers, the trace {}", m.num_moe_layers(), trace.num_layers), a.model,
                         "give the model the trace was recorded on");
        model_name = m.name;
    } else if (!trace.model.empty()) {
        // The trace's own model when moebench knows it (trace gen writes it); otherwise the bytes stay unknown.
        try {
            m = load_model(trace.model);
            if (m.moe.num_experts == trace.num_experts && m.moe.top_k == trace.top_k) model_name = m.name;
        } catch (const ConfigError&) {
        }
    }
    if (trace.num_tokens == 0 || trace.num_layers == 0)
        config_error("--trace", "holds no token to replay", a.trace, "record or generate a trace with tokens");

    OffloadContext ctx;
    ctx.trace = a.trace;
    ctx.model = model_name;
    ctx.expert_dtype = std::string(to_string(dtype));
    ctx.expert_bytes =
        model_name.empty() ? 0.0 : static_cast<double>(routed_expert_params(m)) * dtype_info(dtype).bytes_per_elem();
    ctx.num_layers = trace.num_layers;
    ctx.num_tokens = trace.num_tokens;
    ctx.num_sequences = static_cast<int64_t>(trace.seq_starts.size());
    std::vector<OffloadReplay> replays;
    for (int64_t n : a.resident) replays.push_back(replay_offload(trace, n, policy));
    emit_view(render_view(offload_document(ctx, replays), DocKind::offload, format), a.out);
}

}  // namespace

void add_offload_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("offload", "Replay a routing trace through per-layer caches of N resident experts");
    cmd->footer(
        "Each MoE layer keeps N experts on the device; the trace's tokens are replayed in order (a token's\n"
        "experts in selection order) and every access is a hit or a fetch from host memory. Policies: " +
        offload_policy_names(", ") +
        ".\nBytes need the model (--model, or the trace's own) and --expert-dtype. "
        "docs/offload.md.");
    auto a = std::make_shared<OffloadArgs>();
    cmd->add_option("--trace", a->trace, "Routing trace: a moebench trace, or a JSONL / text recording")->required();
    add_whole_list_option(cmd, "--resident", a->resident,
                          "Resident experts per layer: N, a list N1,N2,... or a range 1..64 (one replay each)",
                          /*min=*/0)  // check_resident says what a size below 1 means
        ->required();
    cmd->add_option("--policy", a->policy, "Cache policy: " + offload_policy_names() + " (default lru)")
        ->type_name("POLICY");
    cmd->add_option("--model", a->model, "Model the trace was recorded on (expert bytes)");
    cmd->add_option(
        "--expert-dtype", a->expert_dtype,
        "Experts' weight format for the bytes: auto (bf16) | " + dtype_names_for(TensorClass::expert_weights));
    cmd->add_option("--format", a->format,
                    format_names_help(DocKind::offload) + " (default text; json: the moebench.offload/1 document)")
        ->type_name("FORMAT");
    cmd->add_option("-o,--out", a->out, "Write the output to FILE (atomically) instead of stdout")->type_name("FILE");
    cmd->callback([a] { run_offload(*a); });
}

}  // namespace moebench::cli
