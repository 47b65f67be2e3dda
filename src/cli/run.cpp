// SPDX-License-Identifier: Apache-2.0
// 'moebench run': one benchmark point. Starts from --config (default configs/runs/default.json), applies the flags
// that were given, runs it, prints the terminal summary and writes the moebench.report/1 document.
#include "backends/registry.hpp"
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "cli/set_flags.hpp"
#include "comm/process_group.hpp"
#include "common/atomic_file.hpp"
#include "common/blas_kernels.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/paths.hpp"
#include "config/file_kind.hpp"
#include "config/model_config.hpp"
#include "config/run_fields.hpp"
#include "core/report_keys.hpp"
#include "harness/run_inputs.hpp"
#include "harness/runner.hpp"
#include "harness/validate.hpp"
#include "report/formats.hpp"
#include "report/report_json.hpp"

#include <filesystem>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

// The flags that are not run config fields (those come from config/run_fields.hpp).
struct RunFlags {
    std::string config, json_out, format;
    std::vector<std::string> sets;  // --set FIELD=VALUE
    bool config_given = false, json_given = false, format_given = false;
};

// `moebench run --config REPORT.json`: a run report is a valid run config. Its resolved run config is re-run
// as it was (flags still override), a model that no longer resolves, or resolves to other shapes than the
// report's, is named. Only what was measured is taken: where the report's run wrote (`out`, `dump_tensors`) is
// dropped, so a report from someone else cannot steer this run's writes (create folders, replace files).
json run_config_of_report(const json& doc, const std::string& path) {
    const json* runs = doc.contains(keys::kRuns) && doc[keys::kRuns].is_array() ? &doc[keys::kRuns] : nullptr;
    if (!runs || runs->size() != 1)
        config_error(
            path,
            fmt::format("is a report of {} points; --config takes a run report (one point)", runs ? runs->size() : 0),
            "", "re-run a sweep with moebench sweep (its config and --resume), or pass one run's report");
    if (!doc.contains("config") || !doc["config"].is_object() || !doc["config"].contains("run") ||
        !doc["config"]["run"].is_object())
        config_error(path + ": config.run", "is missing: this report does not say what it ran", "",
                     "pass a report written by moebench run");
    json cfg = doc["config"]["run"];
    // Outputs are the caller's to name (--out, --dump-tensors), never the report's.
    for (const char* output : {"out", "dump_tensors"}) cfg[output] = "";
    const std::string model = cfg.value("model", std::string());
    ModelConfig resolved;
    try {
        resolved = load_model(model);
    } catch (const ConfigError& e) {
        config_error(
            path + ": config.run.model", "no longer resolves here", model,
            std::string("pass --model with the same model (the report's config.model holds its shapes): ") + e.what());
    }
    if (doc["config"].contains("model") && model_to_json(resolved) != doc["config"]["model"])
        std::cerr << "moebench: warning: model " << model << " resolves to other shapes than " << path
                  << " recorded (config.model); the re-run uses today's\n";
    const std::string rev = doc.contains("tool") && doc["tool"].is_object() ? doc["tool"].value("git_rev", "") : "";
    std::cerr << "moebench: re-running the run config of " << path
              << (rev.empty() ? "" : " (written by moebench " + rev + ")")
              << "; its output paths (out, dump_tensors) are not taken: give --out / --dump-tensors\n";
    return cfg;
}

// The run config of this command: the config file (or a run report's config), the flags over it, checked.
RunConfig command_run_config(const RunFlags& f, const RunFieldFlags& fields) {
    std::string config_path =
        f.config_given ? resolve_config("runs", f.config, "--config") : resolve_config("runs", "default", "--config");
    json config_json = load_json_file(config_path, kMaxConfigBytes);
    refuse_other_file_kind(config_json, "--config " + config_path, {FileKind::run_config, FileKind::report});
    if (config_json.is_object() && config_json.value("schema", json()) == json(kReportSchema))
        config_json = run_config_of_report(config_json, config_path);
    else if (config_json.is_object() && config_json.contains("schema"))  // a run config has no schema key
        config_error(config_path, "is not a run config or a " + std::string(kReportSchema) + " report",
                     "schema " + json_brief(config_json["schema"]),
                     "give a run config (docs/run-schema.md) or a report this moebench wrote");
    if (!config_json.is_object())  // named here: run_config_from_json would say "<root>"
        config_error(config_path, "must be a JSON object (a run config)", json_brief(config_json),
                     "see docs/run-schema.md");
    // --set FIELD=VALUE: the field read as the config file's would be, one value each; a field given twice on the
    // command line (a flag and a --set) is refused naming both, as sweep does.
    FieldClaims claims;
    for (const auto& [field, as_written] : fields.given_as_written())
        claims.claim(field, as_written.substr(0, as_written.find(' ')), as_written, "give " + field + " once");
    for (const SetFlag& s : parse_set_flags(f.sets)) {
        claims.claim(s.field, "--set " + s.field, s.as_written, "give " + s.field + " once");
        if (s.values.size() > 1)
            config_error("--set " + s.field, "takes one value in a run", s.text,
                         "a list (1,2,4) or a range (1..64) is a sweep's axis: moebench sweep " + s.as_written);
        config_json[s.field] = run_field_value(*find_run_field(s.field), s.text, "--set " + s.field);
    }
    // A field the command line gave (by its flag or by --set).
    const auto given = [&](const std::string& key) { return claims.claimed(key); };
    RunConfig cfg = run_config_from_json(config_json, "");
    fields.apply(cfg);
    if (f.json_given) {
        if (f.json_out.empty()) config_error("--json", "needs a value", "", "use --json - for stdout, or --out FILE");
        if (given("out") && cfg.out != f.json_out)
            config_error("--json", "and --out both name where the report goes", f.json_out + " and " + cfg.out,
                         "give one of them (--json - writes the report to stdout, --out FILE to a file)");
        cfg.out = f.json_out;  // '-' = stdout; any other value is a file, like --out
    }
    validate_run(cfg);
    // A bad --out fails now, not after the run; its folders are made only when the report is written, so a run
    // refused on a later check (the model, the routing, the hardware) leaves no folder behind.
    check_output_path(cfg.out);
    // An output that is one of the inputs (`--config R.json --out R.json`, `--model m.json --out m.json`) would
    // destroy it: refused before anything runs, naming both flags.
    std::vector<FileArg> outputs = run_output_args(cfg);
    if (f.json_given)
        for (FileArg& o : outputs)
            if (o.flag == "--out") o.flag = "--json";
    std::vector<FileArg> inputs = {{"--config", config_path}};
    for (const FileArg& in : run_input_args(cfg)) inputs.push_back(in);
    refuse_output_over_input(outputs, inputs);
    if (!cfg.dump_tensors.empty() && std::filesystem::exists(cfg.dump_tensors) &&
        !std::filesystem::is_directory(cfg.dump_tensors))
        config_error("dump_tensors (--dump-tensors)", "is a file; it names the folder for moe_layer.safetensors",
                     cfg.dump_tensors, "give a folder (created when missing)");
    // A flag given on the command line that would change nothing is a mistake, not a no-op.
    if (given("context") && cfg.shape.mode == Mode::prefill && cfg.shape.context != 0)
        config_error("context (--context)", "only applies to --mode decode; prefill starts from an empty KV cache",
                     std::to_string(cfg.shape.context) + " with mode prefill",
                     "drop --context (prefill attends causally within each --seq-len sequence), or use --mode decode");
    if (given("seq_len") && cfg.shape.mode == Mode::decode && cfg.shape.seq_len != 1)
        config_error("seq_len (--seq-len)", "only applies to --mode prefill; a decode step has one token per sequence",
                     std::to_string(cfg.shape.seq_len) + " with mode decode",
                     "add --mode prefill, or drop --seq-len (decode attends to --context cached tokens)");
    return cfg;
}

// Runs the point and writes the report; the summary goes where stdout is free.
void run_command(const RunFlags& f, const RunFieldFlags& fields) {
    ensure_blas_kernels("moebench run");  // before any timing: the CPU backend's large GEMMs use OpenBLAS
    const RunConfig cfg = command_run_config(f, fields);
    // Output rule: the JSON report goes to --out (a file, or stdout with '-'); --format FMT prints FMT on stdout
    // as well. Whatever owns stdout, the terminal summary goes to stderr.
    std::string format;
    if (f.format_given) {
        format = parse_format(f.format, DocKind::report, "--format");
        if (cfg.out == "-")
            config_error("--format", "stdout already carries the JSON report (--json - / --out -)", f.format,
                         "drop --json - (the report is then written to --out), or drop --format");
    }
    bool to_stdout = cfg.out == "-" || !format.empty();
    std::ostream& term = to_stdout ? std::cerr : std::cout;
    std::string out_path = cfg.out.empty() ? default_report_path() : cfg.out;

    json context = report_context(0, current_command_line("moebench run"));  // before: its load is the start's
    json record = run_point(cfg);
    if (!writes_outputs()) return;  // expert parallelism over processes: rank 0 writes the job's report
    json report = make_report(context, resolved_config(cfg), {record});
    write_report(out_path, report);
    if (!format.empty()) {
        std::cout << render_report(report, format);
        std::cout.flush();
    }

    term << render_report(report, "text");  // the terminal view of the report (its one run)
    if (out_path != "-") term << "report: " << out_path << "\n";
    if (!cfg.dump_tensors.empty())
        term << "tensors: " << (std::filesystem::path(cfg.dump_tensors) / "moe_layer.safetensors").string() << "\n";
    term.flush();
    // A crossed load gate (--max-cv, --min-balancedness) is exit 1, after the report (which records it) was written.
    if (const std::vector<std::string> crossed = crossed_load_gates(record); !crossed.empty()) {
        std::string why;
        for (const std::string& c : crossed) why += (why.empty() ? "" : "; ") + c;
        throw LoadGateCrossed(why + (out_path != "-" ? " (report: " + out_path + ")" : ""));
    }
    // A failed --check is exit 3, after the report (which records the comparison) was written.
    if (record.contains("check") && !record["check"].value("passed", false))
        throw CheckFailed("--check failed: " + record["check"].value("failure", std::string("mismatch")) +
                          (out_path != "-" ? " (report: " + out_path + ")" : ""));
}

}  // namespace

void add_run_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("run", "Run the MoE forward step phase by phase and write a report");
    cmd->footer(
        "With no arguments, runs configs/runs/default.json. Flags override the run config's fields.\n"
        "--routing: router | uniform | balanced | zipf:S | powerlaw:ALPHA | hot:N:F | imbalance:R | domains:D:SWITCH | "
        "trace:FILE (docs/workloads.md).\nReport schema: docs/report-schema.md.\n"
        "--format FMT prints the report as FMT on stdout (the summary then goes to stderr); the JSON report is\n"
        "still written to --out. --json - writes only the JSON report, to stdout.");
    auto f = std::make_shared<RunFlags>();
    auto* o_config = cmd->add_option("--config", f->config,
                                     "Run config: short name in configs/runs, a JSON file, or a "
                                     "run report (re-runs what it ran)");
    auto fields = std::make_shared<RunFieldFlags>(cmd, [](const RunField&) { return true; });
    fields->option("backend")->description(backends_help());
    fields->option("expert_gemm")->description("Expert GEMMs: " + choice_help(&BackendTraits::expert_gemm));
    fields->option("attention_kernel")
        ->description("Attention kernel: " + choice_help(&BackendTraits::attention_kernel));
    cmd->add_option("--set", f->sets,
                    "FIELD=VALUE: set any run config field (docs/run-schema.md), as sweep's --set; "
                    "one value each")
        ->type_name("FIELD=VALUE");
    auto* o_json =
        cmd->add_option("--json", f->json_out, "'-' writes the report to stdout (the summary goes to stderr)");
    auto* o_format = cmd->add_option("--format", f->format,
                                     "Also print the report to stdout as " + format_names_help(DocKind::report))
                         ->type_name("FORMAT");

    cmd->callback([=] {
        f->config_given = o_config->count() > 0;
        f->json_given = o_json->count() > 0;
        f->format_given = o_format->count() > 0;
        run_command(*f, *fields);
    });
}

}  // namespace moebench::cli
