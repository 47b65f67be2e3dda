// SPDX-License-Identifier: Apache-2.0
// 'moebench run': one benchmark point. Starts from --config (default configs/runs/default.json), applies the flags
// that were given, runs it, prints the terminal summary and writes the moebench.report/1 document.
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "common/atomic_file.hpp"
#include "common/blas_kernels.hpp"
#include "common/error.hpp"
#include "common/paths.hpp"
#include "config/model_config.hpp"
#include "backends/registry.hpp"
#include "harness/runner.hpp"
#include "harness/validate.hpp"
#include "report/console_table.hpp"
#include "report/formats.hpp"
#include "report/report_json.hpp"

#include <filesystem>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

struct RunFlags {
    std::string config, model, hardware, backend, mode, routing, out, json_out, dump_tensors, format, expert_gemm;
    int64_t batch = 0, seq_len = 0, context = 0, layers = 0, soft_topn = 0, seed = 0, warmup = 0, iters = 0, threads = 0;
    int64_t ep = 1;
    double capacity_factor = 0, min_time_s = 0, max_noise = 0;
    bool check = false, cuda_graph = false, cold_l2 = false, measure_ceilings = false;
};

// `moebench run --config REPORT.json`: a run report is a valid run config. Its resolved run config is re-run
// as it was (flags still override); the report is not overwritten (its `out` is dropped), and a model that
// no longer resolves, or resolves to other shapes than the report's, is named.
json run_config_of_report(const json& doc, const std::string& path) {
    const json* runs = doc.contains("runs") && doc["runs"].is_array() ? &doc["runs"] : nullptr;
    if (!runs || runs->size() != 1)
        config_error(path, fmt::format("is a report of {} points; --config takes a run report (one point)",
                                       runs ? runs->size() : 0),
                     "", "re-run a sweep with moebench sweep (its config and --resume), or pass one run's report");
    if (!doc.contains("config") || !doc["config"].is_object() || !doc["config"].contains("run") ||
        !doc["config"]["run"].is_object())
        config_error(path + ": config.run", "is missing: this report does not say what it ran", "",
                     "pass a report written by moebench run");
    json cfg = doc["config"]["run"];
    cfg["out"] = "";  // never overwrite the report being reproduced
    const std::string model = cfg.value("model", std::string());
    ModelConfig resolved;
    try {
        resolved = load_model(model);
    } catch (const ConfigError& e) {
        config_error(path + ": config.run.model", "no longer resolves here", model,
                     std::string("pass --model with the same model (the report's config.model holds its shapes): ") +
                         e.what());
    }
    if (doc["config"].contains("model") && model_to_json(resolved) != doc["config"]["model"])
        std::cerr << "moebench: warning: model " << model << " resolves to other shapes than " << path
                  << " recorded (config.model); the re-run uses today's\n";
    const std::string rev = doc.contains("tool") && doc["tool"].is_object() ? doc["tool"].value("git_rev", "") : "";
    std::cerr << "moebench: re-running the run config of " << path
              << (rev.empty() ? "" : " (written by moebench " + rev + ")") << "\n";
    return cfg;
}

}  // namespace

void add_run_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("run", "Run the MoE forward step phase by phase and write a report");
    cmd->footer(
        "With no arguments, runs configs/runs/default.json. Flags override the run config's fields.\n"
        "--routing: router | uniform | balanced | zipf:S | hot:N:F | imbalance:R | domains:D:SWITCH | trace:FILE "
        "(docs/workloads.md).\nReport schema: docs/report-schema.md.\n"
        "--format FMT prints the report as FMT on stdout (the summary then goes to stderr); the JSON report is\n"
        "still written to --out. --json - writes only the JSON report, to stdout.");
    auto f = std::make_shared<RunFlags>();
    auto* o_config = cmd->add_option("--config", f->config, "Run config: short name in configs/runs, a JSON file, or a "
                                                            "run report (re-runs what it ran)");
    auto* o_model = cmd->add_option("--model", f->model, "Model: short name, moebench model file or HF config.json");
    auto* o_backend = cmd->add_option("--backend", f->backend, backends_help());
    auto* o_hardware = cmd->add_option("--hardware", f->hardware,
                                       "Hardware profile (configs/hardware): the ceilings of the roofline block; what sim models");
    auto* o_mode = cmd->add_option("--mode", f->mode, "decode | prefill");
    auto* o_batch = cmd->add_option("--batch", f->batch, "Sequences (decode: tokens) per step");
    auto* o_seq = cmd->add_option("--seq-len", f->seq_len, "Prefill: tokens per sequence");
    auto* o_ctx = cmd->add_option("--context", f->context, "Decode: tokens already in the KV cache (prefill starts empty)");
    auto* o_layers = cmd->add_option("--layers", f->layers, "Run the first N layers (0 = all)");
    auto* o_routing = cmd->add_option("--routing", f->routing, "Workload: router, uniform, zipf:1.2, hot:4:0.6, trace:FILE ...");
    auto* o_cf = cmd->add_option("--capacity-factor", f->capacity_factor, "Expert capacity factor (0 = dropless)");
    auto* o_soft = cmd->add_option("--soft-topn", f->soft_topn, "Combine the N most probable experts (0 = family top-k)");
    auto* o_seed = cmd->add_option("--seed", f->seed, "Seed for weights, inputs and synthetic routing");
    auto* o_warmup = cmd->add_option("--warmup", f->warmup, "Warm-up iterations (not measured)");
    auto* o_iters = cmd->add_option("--iters", f->iters, "Minimum measured iterations");
    auto* o_min_time = cmd->add_option("--min-time", f->min_time_s, "Keep measuring until this many seconds");
    auto* o_noise = cmd->add_option("--max-noise", f->max_noise, "Keep measuring until the median step time is known to within this fraction (95% CI half-width / median; 0 = off)");
    auto* o_threads = cmd->add_option("--threads", f->threads, "CPU threads (0 = all cores)");
    auto* o_out = cmd->add_option("--out", f->out, "Report file (default results/run-<UTC time>.json)");
    auto* o_json = cmd->add_option("--json", f->json_out, "'-' writes the report to stdout (the summary goes to stderr)");
    auto* o_dump = cmd->add_option("--dump-tensors", f->dump_tensors, "Folder for moe_layer.safetensors (first MoE layer)");
    auto* o_check = cmd->add_flag("--check", f->check,
                                  "Compare the first MoE block with the fp32 host reference (cuda; cpu: self-check); "
                                  "exit 3 on mismatch");
    auto* o_ep = cmd->add_option("--ep", f->ep, "Expert-parallel ranks (adds dispatch_a2a / combine_a2a)");
    auto* o_gemm = cmd->add_option("--expert-gemm", f->expert_gemm, "Expert GEMMs: " + expert_gemm_help());
    auto* o_graph = cmd->add_flag("--cuda-graph", f->cuda_graph, "cuda: capture the step in a CUDA graph and time replays");
    auto* o_cold = cmd->add_flag("--cold-l2", f->cold_l2, "cuda: flush L2 before each step");
    auto* o_ceil = cmd->add_flag("--measure-ceilings", f->measure_ceilings,
                                 "Measure memory bandwidth and GEMM rate here for the roofline floors (seconds: cpu reads a buffer of max(4 x LLC, 1 GiB))");
    auto* o_format = cmd->add_option("--format", f->format, "Also print the report to stdout as json | csv | md | html | "
                                                            "trace | prom");

    cmd->callback([=] {
        ensure_blas_kernels("moebench run");  // before any timing: the CPU backend's large GEMMs use OpenBLAS
        std::string config_path = o_config->count() ? resolve_config("runs", f->config, "--config")
                                                     : resolve_config("runs", "default", "--config");
        json config_json = load_json_file(config_path, kMaxConfigBytes);
        if (config_json.is_object() && config_json.value("schema", json()) == json(kReportSchema))
            config_json = run_config_of_report(config_json, config_path);
        if (!config_json.is_object())  // named here: run_config_from_json would say "<root>"
            config_error(config_path, "must be a JSON object (a run config)", json_brief(config_json),
                         "see docs/run-schema.md");
        RunConfig cfg = run_config_from_json(config_json, "");
        override_if(o_model, cfg.model, f->model);
        override_if(o_backend, cfg.backend, f->backend);
        override_if(o_hardware, cfg.hardware, f->hardware);
        if (o_mode->count()) cfg.shape.mode = parse_mode(f->mode, "--mode");
        override_if(o_batch, cfg.shape.batch, f->batch);
        override_if(o_seq, cfg.shape.seq_len, f->seq_len);
        override_if(o_ctx, cfg.shape.context, f->context);
        override_if(o_layers, cfg.layers, f->layers);
        override_if(o_routing, cfg.routing, f->routing);
        override_if(o_cf, cfg.options.capacity_factor, f->capacity_factor);
        override_if(o_soft, cfg.options.soft_topn, f->soft_topn);
        if (o_seed->count()) cfg.options.seed = parse_seed(f->seed, "seed (--seed)");
        override_if(o_warmup, cfg.warmup, f->warmup);
        override_if(o_iters, cfg.iters, f->iters);
        override_if(o_min_time, cfg.min_time_s, f->min_time_s);
        override_if(o_noise, cfg.max_noise, f->max_noise);
        override_if(o_threads, cfg.options.num_threads, f->threads);
        override_if(o_out, cfg.out, f->out);
        if (o_json->count()) {
            if (f->json_out.empty()) config_error("--json", "needs a value", "", "use --json - for stdout, or --out FILE");
            if (o_out->count() && f->out != f->json_out)
                config_error("--json", "and --out both name where the report goes", f->json_out + " and " + f->out,
                             "give one of them (--json - writes the report to stdout, --out FILE to a file)");
            cfg.out = f->json_out;   // '-' = stdout; any other value is a file, like --out
        }
        override_if(o_dump, cfg.dump_tensors, f->dump_tensors);
        override_if(o_check, cfg.check, f->check);
        override_if(o_ep, cfg.options.ep_size, f->ep);
        override_if(o_gemm, cfg.options.expert_gemm, f->expert_gemm);
        override_if(o_graph, cfg.options.cuda_graph, f->cuda_graph);
        override_if(o_cold, cfg.options.cold_l2, f->cold_l2);
        override_if(o_ceil, cfg.measure_ceilings, f->measure_ceilings);
        validate_run(cfg);
        // A bad --out fails now, not after the run; its folders are made only when the report is written, so a run
        // refused on a later check (the model, the routing, the hardware) leaves no folder behind.
        check_output_path(cfg.out);
        if (!cfg.dump_tensors.empty() && std::filesystem::exists(cfg.dump_tensors) &&
            !std::filesystem::is_directory(cfg.dump_tensors))
            config_error("dump_tensors (--dump-tensors)", "is a file; it names the folder for moe_layer.safetensors",
                         cfg.dump_tensors, "give a folder (created when missing)");
        // A flag given on the command line that would change nothing is a mistake, not a no-op.
        if (o_ctx->count() && cfg.shape.mode == Mode::prefill && f->context != 0)
            config_error("context (--context)", "only applies to --mode decode; prefill starts from an empty KV cache",
                         std::to_string(f->context) + " with mode prefill",
                         "drop --context (prefill attends causally within each --seq-len sequence), or use --mode decode");
        if (o_seq->count() && cfg.shape.mode == Mode::decode && f->seq_len != 1)
            config_error("seq_len (--seq-len)", "only applies to --mode prefill; a decode step has one token per sequence",
                         std::to_string(f->seq_len) + " with mode decode",
                         "add --mode prefill, or drop --seq-len (decode attends to --context cached tokens)");

        // Output rule: the JSON report goes to --out (a file, or stdout with '-'); --format FMT prints FMT on stdout
        // as well. Whatever owns stdout, the terminal summary goes to stderr.
        std::string format;
        if (o_format->count()) {
            format = parse_format_list(f->format, "--format", false).front();
            if (cfg.out == "-")
                config_error("--format", "stdout already carries the JSON report (--json - / --out -)", f->format,
                             "drop --json - (the report is then written to --out), or drop --format");
        }
        bool to_stdout = cfg.out == "-" || !format.empty();
        std::ostream& term = to_stdout ? std::cerr : std::cout;
        std::string out_path = cfg.out.empty() ? default_report_path() : cfg.out;

        json context = report_context(0, current_command_line("moebench run"));  // before: its load is the start's
        json record = run_point(cfg);
        json report = make_report(context, resolved_config(cfg), {record});
        write_report(out_path, report);
        if (!format.empty()) {
            std::cout << render_report(report, format);
            std::cout.flush();
        }

        term << console_summary(record);
        if (out_path != "-") term << "report: " << out_path << "\n";
        if (!cfg.dump_tensors.empty())
            term << "tensors: " << (std::filesystem::path(cfg.dump_tensors) / "moe_layer.safetensors").string() << "\n";
        term.flush();
        // A failed --check is exit 3, after the report (which records the comparison) was written.
        if (record.contains("check") && !record["check"].value("passed", false))
            throw CheckFailed("--check failed: " + record["check"].value("failure", std::string("mismatch")) +
                              (out_path != "-" ? " (report: " + out_path + ")" : ""));
    });
}

}  // namespace moebench::cli
