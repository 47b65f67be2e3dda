// SPDX-License-Identifier: Apache-2.0
// `moebench place --trace T --ep N [--replicas R] -o placement.json`: an expert placement from a routing trace
// (workload/placement_search.hpp), with its predicted effect beside contiguous placement, replayed by the run's
// rules. `moebench run --placement FILE` (under mpirun) uses it.
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/read_file.hpp"
#include "common/tensor_file.hpp"
#include "config/model_config.hpp"
#include "report/formats.hpp"
#include "workload/placement_search.hpp"
#include "workload/trace.hpp"
#include "workload/trace_import.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

struct PlaceArgs {
    std::string trace, out, model, format = "text";
    int64_t ep = 0, replicas = 0, batch = 64;
};

void run_place(const PlaceArgs& a) {
    const std::string format = parse_format(a.format, DocKind::placement, "--format");
    if (a.out.empty()) config_error("--out", "is required", "", "e.g. -o placement.json");
    check_output_path(a.out);
    ModelConfig m;
    if (!a.model.empty()) m = load_model(a.model);
    refuse_output_over_input({{"-o", a.out}}, {{"--trace", a.trace}, {"--model", m.source}});
    const RoutingTrace trace = load_any_trace(a.trace, a.model.empty() ? 0 : m.moe.num_experts, "--trace");
    if (!a.model.empty()) {
        if (m.moe.top_k != trace.top_k)
            config_error("--model", fmt::format("selects top-{} experts, the trace top-{}", m.moe.top_k, trace.top_k),
                         a.model, "give the model the trace was recorded on");
        if (m.moe.num_experts != trace.num_experts)
            config_error("--model", fmt::format("has {} experts, the trace {}", m.moe.num_experts, trace.num_experts),
                         a.model, "give the model the trace was recorded on");
    }
    // A long search says how far it got on stderr every few seconds; a short one says nothing.
    const auto started = std::chrono::steady_clock::now();
    auto last_line = started;
    const PlacementProgress progress = [&](double done, const std::string& stage) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_line < std::chrono::seconds(3)) return;
        last_line = now;
        std::cerr << fmt::format("place: {:3.0f}% done, {:.0f} s ({})\n", 100.0 * done,
                                 std::chrono::duration<double>(now - started).count(), stage);
    };
    const PlacementSearch r = search_placement(trace, a.ep, a.replicas, a.batch, progress);
    const json doc = placement_document(r, trace, a.trace, a.replicas, a.batch, a.model.empty() ? 0 : m.hidden_size);
    write_file_atomic(a.out, doc.dump(2) + "\n");
    std::cout << render_view(doc, DocKind::placement, format);
    if (format == "json") return;  // stdout is the document
    std::cout << "placement: " << a.out << "\n";
}

}  // namespace

void add_place_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("place", "Place experts on expert-parallel ranks from a routing trace");
    cmd->footer(
        "Co-selected experts share a rank (fewer dispatch rows with --a2a dedup); --replicas R adds R copies of\n"
        "the hottest experts on the least-loaded ranks; the trace replayed as the run replays it chooses among the\n"
        "candidates (docs/expert-parallel.md). Use the file with mpirun -np N moebench run --ep N --placement FILE.\n"
        "The trace: a moebench trace, or a JSONL / text recording (docs/trace-format.md).");
    auto a = std::make_shared<PlaceArgs>();
    cmd->add_option("--trace", a->trace, "Routing trace")->required();
    add_whole_option(cmd, "--ep", a->ep, "Expert-parallel ranks")->required();
    add_whole_option(cmd, "--replicas", a->replicas, "Extra expert copies in all (a multiple of --ep)");
    add_whole_option(cmd, "--batch", a->batch, "Decode batch the prediction replays (tokens per step)");
    cmd->add_option("--model", a->model, "Model the trace was recorded on (its expert count; predicted bytes)");
    cmd->add_option("-o,--out", a->out, "Placement file to write")->type_name("FILE");
    cmd->add_option(
           "--format", a->format,
           format_names_help(DocKind::placement) + " (to stdout: the view, or the file's document; default text)")
        ->type_name("FORMAT");
    cmd->callback([a] { run_place(*a); });
}

}  // namespace moebench::cli
