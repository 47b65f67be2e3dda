// SPDX-License-Identifier: Apache-2.0
// `moebench plan`: the accounting of one model on one hardware profile (harness/plan_point.hpp), as a pasteable text
// table or the stable JSON document "moebench.plan/1" (docs/plan-schema.md). This file parses the flags and prints.
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/paths.hpp"
#include "config/hardware.hpp"
#include "core/precision.hpp"
#include "harness/plan_point.hpp"
#include "report/formats.hpp"

#include <algorithm>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

// The flags that are not run config fields (those come from config/run_fields.hpp, as in `run`).
struct PlanArgs {
    bool include_mtp = false;
    std::string format = "text";
    std::string out;
};

// The run config fields plan reads: the model, the hardware, the load, the layout and the number formats.
bool plan_field(const RunField& f) {
    static const char* const kKeys[] = {"model", "hardware",     "batch",    "context",          "ep",
                                        "tp",    "attention_dp", "moe_tp",   "moe_ep",           "redundant_experts",
                                        "dtype", "expert_dtype", "kv_dtype", "resident_experts", "offload_ratio"};
    return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return f.key == k; });
}

void run_plan(const PlanArgs& a, const RunFieldFlags& fields) {
    const std::string format = parse_format(a.format, DocKind::plan, "--format");
    // Plan's own defaults, then the flags given (parsed and checked as `run` parses them).
    RunConfig cfg;
    PlanRequest r;
    cfg.model = r.model;
    cfg.hardware = r.hardware;
    cfg.shape.batch = r.batch;
    cfg.shape.context = r.context;
    fields.apply(cfg);
    r.layout = cfg.layout;
    r.precision = cfg.precision;
    r.batch = cfg.shape.batch;
    r.context = cfg.shape.context;
    r.include_mtp = a.include_mtp;
    r.layout_given = fields.given("ep") || fields.given("tp") || fields.given("attention_dp") ||
                     fields.given("moe_tp") || fields.given("moe_ep");
    r.fit_asked = fields.given("batch") || fields.given("context");
    check_plan_request(r);
    // Resolved here so that a missing file or an unknown short name names the flag the user typed.
    r.model = resolve_config("models", cfg.model, "--model");
    r.hardware = resolve_config("hardware", cfg.hardware, "--hardware");
    refuse_output_over_input({{"--out", a.out}}, {{"--model", r.model}, {"--hardware", r.hardware}});

    emit_view(render_view(plan_document(r), DocKind::plan, format), a.out);
}

}  // namespace

void add_plan_command(CLI::App& app) {
    auto args = std::make_shared<PlanArgs>();
    auto* cmd = app.add_subcommand(
        "plan",
        "Parameters, FLOPs, memory per GPU and the decode-step floor of a model on a hardware profile (no GPU needed)");
    auto fields = std::make_shared<RunFieldFlags>(cmd, plan_field);
    fields->option("model")->description(
        "Model: short name in configs/models, a moebench model JSON or a Hugging Face config.json (default "
        "mixtral-8x7b)");
    fields->option("hardware")
        ->description(std::string("Hardware profile: short name in configs/hardware or a JSON path (default ") +
                      kDefaultHardware + ", as the sim backend's)");
    fields->option("batch")->description(
        "Concurrent sequences (default 1). Given with or without --context, it asks whether they fit: exit 2 when "
        "they do not");
    fields->option("context")->description("Tokens per sequence in the KV cache (default 4096)");
    fields->option("ep")->description(
        "Expert-parallel GPUs; must divide the routed experts. GPUs = max(ep, tp). Default 1, or the fewest GPUs that "
        "fit when no layout flag is given and one GPU is too small");
    fields->option("dtype")->description(
        "Weights: " + dtype_names_for(TensorClass::dense_weights) +
        " (default bf16 = auto; bytes with scales and peak rates: docs/plan-schema.md)");
    fields->option("kv_dtype")->description("KV cache: " + dtype_names_for(TensorClass::kv_cache) + " (default bf16)");
    cmd->add_flag("--include-mtp", args->include_mtp,
                  "Count multi-token-prediction modules (DeepSeek-V3) in params and memory");
    cmd->add_option("--format", args->format,
                    "Output: " + format_names_help(DocKind::plan) + " (default text; json schema moebench.plan/1)")
        ->type_name("FORMAT");
    cmd->add_option("-o,--out", args->out, "Write the output to FILE (atomically) instead of stdout")
        ->type_name("FILE");
    cmd->callback([args, fields] { run_plan(*args, *fields); });
}

}  // namespace moebench::cli
