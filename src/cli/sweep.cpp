// SPDX-License-Identifier: Apache-2.0
// 'moebench sweep': the cartesian product of run axes, point by point with run_point, journaled for --resume,
// with the golden point and knees in the report's "sweep" block (docs/sweep.md).
#include "backends/registry.hpp"
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "cli/set_flags.hpp"
#include "comm/process_group.hpp"
#include "common/atomic_file.hpp"
#include "common/blas_kernels.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/host_cpus.hpp"
#include "common/json_util.hpp"
#include "common/paths.hpp"
#include "common/read_file.hpp"
#include "config/file_kind.hpp"
#include "config/hardware.hpp"
#include "config/run_fields.hpp"
#include "core/report_keys.hpp"
#include "harness/run_inputs.hpp"
#include "harness/runner.hpp"
#include "report/formats.hpp"
#include "report/journal_reader.hpp"
#include "report/report_json.hpp"
#include "report/report_reader.hpp"
#include "sweep/axes.hpp"
#include "sweep/journal.hpp"
#include "sweep/journal_lock.hpp"
#include "sweep/sweep_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

namespace moebench::cli {

namespace {

struct SweepFlags {
    std::string config, out, journal, format;
    std::vector<std::string> sets;
    bool resume = false, quiet = false;
    double time_budget_s = 0, slo_p95_ms = 0, knee_fraction = 0.9;
    int64_t jobs = 0;  // 0: auto
    int64_t warmup = 0, iters = 0;
    // Which flags were given (set once parsed), and the axis flags' values by run config field.
    const CLI::Option *o_warmup = nullptr, *o_iters = nullptr, *o_journal = nullptr, *o_budget = nullptr,
                      *o_slo = nullptr, *o_knee = nullptr, *o_jobs = nullptr;
    std::map<std::string, std::string> axis_values;
    std::vector<std::pair<const CLI::Option*, std::string>> axis_opts;
};

const char* signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

// A sweep stopped by SIGINT / SIGTERM / SIGHUP, after its report was written: exit 128 + signal, as a shell
// reports a process that the signal killed, so that a job script sees that the sweep did not finish.
class SweepStopped : public Error {
public:
    SweepStopped(int sig, size_t num_not_run, const std::string& journal)
        : Error(num_not_run == 0
                    ? fmt::format("sweep stopped by {} after its last point; the report is complete", signal_name(sig))
                    : fmt::format("sweep stopped by {}; {} point(s) not run; the journal {} holds every finished "
                                  "point: rerun the same command with --resume to finish",
                                  signal_name(sig), num_not_run, journal)),
          code_(128 + sig) {}
    int exit_code() const override { return code_; }
    const char* label() const override { return "stopped"; }

private:
    int code_;
};

std::string resolve_sweep_config(const std::string& name) {
    namespace fs = std::filesystem;
    if (fs::exists(name)) return name;
    fs::path in_sweeps = fs::path(configs_dir()) / "sweeps" / (name + ".json");
    if (fs::exists(in_sweeps)) return in_sweeps.string();
    return resolve_config("runs", name, "--config");
}

std::string strip_json_ext(const std::string& path) {
    if (path.size() > 5 && path.substr(path.size() - 5) == ".json") return path.substr(0, path.size() - 5);
    return path;
}

// The base run config (the config file's fields, --warmup/--iters, one-valued --set) and the axes (the config's
// "axes", many-valued --set, the axis flags), in canonical order; `sweep_opts` gets the config's "sweep" block.
std::pair<json, std::vector<SweepAxis>> sweep_base_and_axes(const SweepFlags& f, json& sweep_opts, RunConfig& base) {
    const std::string config_path =
        f.config.empty() ? resolve_config("runs", "default", "--config") : resolve_sweep_config(f.config);
    json raw = load_json_file(config_path, kMaxConfigBytes);
    refuse_other_file_kind(raw, "--config " + config_path, {FileKind::sweep_config, FileKind::run_config});
    if (!raw.is_object()) config_error("--config", "must be a JSON object", json_brief(raw), "");
    std::vector<SweepAxis> axes;
    sweep_opts = sweep_block_of(raw);
    if (raw.contains(keys::kAxes)) {
        if (!raw[keys::kAxes].is_object())
            config_error(keys::kAxes, "must be an object of field: values", json_brief(raw[keys::kAxes]),
                         "write e.g. \"axes\": {\"batch\": \"1..256\", \"context\": [512, 4096]}");
        for (const auto& [k, v] : raw[keys::kAxes].items()) {
            axes.push_back({k, axis_values_from_json(v, "axes." + k)});
            check_axis_types(axes.back(), "axes." + k);
        }
    }
    raw.erase(keys::kAxes);
    raw.erase("sweep");
    base = run_config_from_json(raw, "");
    override_if(f.o_warmup, base.warmup, f.warmup);
    override_if(f.o_iters, base.iters, f.iters);
    json base_json = run_config_to_json(base);
    // Each field once on the command line (cli/set_flags.hpp): of `--model A --set model=B` one would be dropped.
    FieldClaims claims;
    const auto once = [](const std::string& field, const std::string& list_example) {
        return "give " + field + " once (a list in one flag makes it an axis, e.g. " + list_example + ")";
    };
    for (const SetFlag& s : parse_set_flags(f.sets)) {
        claims.claim(s.field, "--set " + s.field, s.as_written, once(s.field, "--set " + s.field + "=A,B"));
        check_axis_types({s.field, s.values}, "--set " + s.field);
        if (s.values.size() > 1) {
            axes.push_back({s.field, s.values});
        } else {
            base_json[s.field] = set_value(s.text);
            // A flag replaces the config's axis of the same name (a one-valued --set too, not only a list).
            std::erase_if(axes, [&](const SweepAxis& a) { return a.name == s.field; });
        }
    }
    for (const auto& [opt, field] : f.axis_opts)
        if (opt->count()) {
            claims.claim(field, opt->get_name(), opt->get_name() + " " + f.axis_values.at(field),
                         once(field, opt->get_name() + " A,B"));
            axes.push_back({field, parse_axis_values(f.axis_values.at(field), opt->get_name())});
            check_axis_types(axes.back(), opt->get_name());
        }
    axes = canonical_axes(axes);  // later (flags) replace earlier (config) of the same name
    // A one-valued axis is a setting: show it in the report's config.run (the fingerprint leaves axes out).
    for (const auto& a : axes)
        if (a.values.size() == 1 && base_json.contains(a.name)) base_json[a.name] = a.values[0];
    (void)run_config_from_json(base_json, "");  // the fixed part now, so that a bad base config is reported as such
    return {base_json, axes};
}

// The sweep's stop and analysis settings: flags over the config's "sweep" block, checked.
void sweep_settings(const SweepFlags& f, const json& sweep_opts, SweepSpec& spec) {
    spec.resume = f.resume;
    spec.time_budget_s = f.o_budget->count() ? f.time_budget_s : sweep_opts.value("time_budget_s", 0.0);
    if (!(spec.time_budget_s >= 0) || !std::isfinite(spec.time_budget_s))  // NaN would silently mean "no budget"
        config_error("--time-budget", "must be a finite number of seconds, not negative",
                     fmt::format("{}", spec.time_budget_s), "use seconds > 0 (or leave it out for no budget)");
    if (f.o_slo->count())
        spec.slo_p95_ms = f.slo_p95_ms;
    else if (sweep_opts.contains("slo_p95_ms"))
        spec.slo_p95_ms = sweep_opts["slo_p95_ms"].get<double>();
    if (spec.slo_p95_ms && !(*spec.slo_p95_ms > 0))
        config_error("--slo-p95-ms", "must be positive", fmt::format("{}", *spec.slo_p95_ms), "give milliseconds > 0");
    spec.knee_fraction = f.o_knee->count() ? f.knee_fraction : sweep_opts.value("knee_fraction", 0.9);
    if (!(spec.knee_fraction > 0 && spec.knee_fraction <= 1))
        config_error("--knee", "must be a fraction in (0, 1]", fmt::format("{}", spec.knee_fraction), "use e.g. 0.9");
    spec.progress = progress_mode_for_stderr(f.quiet);
}

// The report (same document as a run, every point in runs[], and the sweep block), its other formats, the summary.
// The report is written piece by piece: each point run now is read back from the journal (SweepOutcome::spans), so
// that a sweep of any length never holds its records; only the views (--format) load them all.
void write_sweep_outputs(const SweepFlags& f, const json& context, const json& base_json, const SweepOutcome& o,
                         const std::string& out, const std::string& journal, const std::vector<std::string>& formats) {
    json config = {{"run", base_json},
                   {"sweep", {{keys::kAxes, o.sweep[keys::kAxes]}, {"slo_p95_ms", o.sweep["slo_p95_ms"]}}}};
    const auto record_text = [&](size_t i) {
        return o.spans[i].length > 0 ? read_journal_span(journal, o.spans[i]) : o.runs[i].dump();
    };
    json head = make_report(context, config, o.runs.empty() ? std::vector<json>{} : std::vector<json>{o.runs.front()});
    head[keys::kRuns] = json::array();
    head["sweep"] = o.sweep;
    const std::string text = head.dump(2) + "\n";
    const std::string marker = "\n  \"" + std::string(keys::kRuns) + "\": []";
    const size_t at = text.find(marker);
    MOEBENCH_CHECK(at != std::string::npos, "sweep report: no runs array to fill");
    write_file_atomic_pieces(out, [&](const EmitText& emit) {
        emit(std::string_view(text).substr(0, at + marker.size() - 1));  // up to the empty array's "]"
        for (size_t i = 0; i < o.runs.size(); ++i) {
            emit(i == 0 ? "\n    " : ",\n    ");
            emit(record_text(i));
        }
        emit(o.runs.empty() ? "]" : "\n  ]");
        emit(std::string_view(text).substr(at + marker.size()));
    });
    std::vector<std::string> written;
    if (std::any_of(formats.begin(), formats.end(), [](const std::string& f) { return f != "json"; })) {
        json report = head;  // the views read every record
        for (size_t i = 0; i < o.runs.size(); ++i)
            report[keys::kRuns].push_back(o.spans[i].length > 0 ? json::parse(record_text(i)) : o.runs[i]);
        for (const auto& fmt_name : formats) {
            if (fmt_name == "json") continue;  // the report itself
            std::string path = strip_json_ext(out) + "." + format_extension(fmt_name);
            write_file_atomic(path, render_report(report, fmt_name));
            written.push_back(path);
        }
    }
    if (!f.quiet) {
        // The terminal view reads each point's summary (what the sweep kept), not its whole record.
        json summary = head;
        summary[keys::kRuns] = o.runs;
        std::cout << render_report(summary, "text");  // the terminal view of a sweep report: its points, knees, golden
        std::cout << "report: " << out << "\njournal: " << journal << "\n";
        for (const auto& w : written) std::cout << "wrote: " << w << "\n";
    }
}

// How many points run side by side: several only when every point is modeled (its backend measures nothing, so
// neighbours cannot disturb its times); --jobs N asks for N, 0 (default) for this process's CPUs.
int64_t sweep_jobs(const SweepFlags& f, const SweepPlan& plan) {
    if (f.jobs < 0 || f.jobs > 1024)
        config_error("--jobs", "must be 0 (this process's CPUs) or from 1 to 1024", std::to_string(f.jobs),
                     "use e.g. --jobs 2, or leave it out");
    for (const RunConfig& cfg : plan.configs) {
        const BackendTraits* t = find_backend_traits(cfg.backend);  // nullptr for "auto": cpu or cuda, measured
        if (t == nullptr || t->measures) {
            if (f.jobs > 1)
                config_error("--jobs",
                             "runs measured points one at a time (side by side they would disturb each "
                             "other's timings)",
                             std::to_string(f.jobs), "leave --jobs out, or sweep only modeled points (--backend sim)");
            return 1;
        }
    }
    return f.jobs > 0 ? f.jobs : usable_cpus();
}

// Every file the sweep writes (report, journal, views) against every file it reads (the config, each point's model,
// profile, trace and placement): one that is the same file would destroy that input. And the report and the journal
// must be two files: the report written over the journal would lose the finished points.
void refuse_sweep_outputs_over_inputs(const SweepFlags& f, const SweepPlan& plan, const std::string& out,
                                      const std::string& journal, const std::vector<std::string>& formats) {
    std::vector<FileArg> outputs = {{"--out", out}, {"--journal", journal}};
    for (const auto& fmt_name : formats)
        if (fmt_name != "json")
            outputs.push_back({"--format " + fmt_name, strip_json_ext(out) + "." + format_extension(fmt_name)});
    std::vector<FileArg> inputs = {{"--config", f.config.empty() ? resolve_config("runs", "default", "--config")
                                                                 : resolve_sweep_config(f.config)}};
    for (const RunConfig& cfg : plan.configs)
        for (const FileArg& in : run_input_args(cfg))
            if (std::none_of(inputs.begin(), inputs.end(), [&](const FileArg& a) { return a.path == in.path; }))
                inputs.push_back(in);
    refuse_output_over_input(outputs, inputs);
    namespace fs = std::filesystem;
    std::error_code out_ec, journal_ec;
    const fs::path out_path = fs::weakly_canonical(out, out_ec),
                   journal_path = fs::weakly_canonical(journal, journal_ec);
    if (same_file(out, journal) || (!out_ec && !journal_ec && out_path == journal_path))
        config_error("--journal", "is the same file as the report (--out)", journal,
                     "give the journal its own file (the default is the report path with .jsonl)");
}

void run_sweep_command(SweepFlags& f) {
    ensure_blas_kernels("moebench sweep");  // before any timing: the CPU backend's large GEMMs use OpenBLAS
    json sweep_opts;
    RunConfig base;
    auto [base_json, axes] = sweep_base_and_axes(f, sweep_opts, base);

    // Outputs: named now, checked (and their folders created) only once every point is valid.
    std::string out =
        !f.out.empty() ? f.out : (base.out.empty() ? "results/sweep-" + utc_now(true) + ".json" : base.out);
    if (out == "-") config_error("--out", "a sweep report must go to a file", out, "give --out FILE.json");
    base_json["out"] = "";
    std::string journal = f.o_journal->count() ? f.journal : strip_json_ext(out) + ".jsonl";
    std::vector<std::string> formats;
    if (!f.format.empty()) formats = parse_format_list(f.format, DocKind::report, "--format", true);

    SweepSpec spec;
    spec.base_run = base_json;
    spec.axes = axes;
    spec.journal_path = journal;
    spec.keep_records = false;  // the report is written from the journal (write_sweep_outputs)
    sweep_settings(f, sweep_opts, spec);
    const SweepPlan plan = plan_sweep(spec);  // a bad axis value stops here, before any file or folder exists
    spec.jobs = sweep_jobs(f, plan);
    refuse_sweep_outputs_over_inputs(f, plan, out, journal, formats);

    // Files: one process, or rank 0 of a multi-process job (every rank runs every point).
    const bool root = writes_outputs();
    std::optional<JournalLock> lock;
    if (root) {
        check_output_path(out);  // a bad --out fails before the first point, not after the last
        check_output_path(journal);
        lock.emplace(journal);  // one sweep per journal, until its report is written
        // Records reused by --resume go into the report and its golden-point analysis as they are: a corrupt or
        // hand-edited one must stop here (exit 2 naming the line's field), not as a type error after the sweep.
        // (An empty journal, of a sweep that finished no point, has nothing to reuse: the sweep starts afresh.)
        if (f.resume)
            if (const JournalText j = read_journal(journal); !j.lines.empty())
                read_report(report_of_journal(j, journal), journal);
    }
    const json context = report_context(0, current_command_line("moebench sweep"));  // the load at the start
    SweepOutcome o = run_sweep(spec, plan, [](const RunConfig& cfg) { return run_point(cfg); });
    if (root) write_sweep_outputs(f, context, base_json, o, out, journal, formats);
    if (o.stop_signal) throw SweepStopped(o.stop_signal, o.num_not_run, journal);
    if (o.num_failed > 0) throw Error(fmt::format("{} sweep point(s) failed; see the report", o.num_failed));
    // Load gates (--max-cv, --min-balancedness): every point ran and is in the report; exit 1 naming those that
    // crossed.
    std::string crossed;
    size_t num_crossed = 0;
    for (const json& r : o.runs)
        for (const std::string& why : crossed_load_gates(r)) {
            if (num_crossed++ < 20)
                crossed +=
                    "\n  " + r.value("sweep_label", point_label(r.value("sweep_point", json::object()))) + ": " + why;
        }
    if (num_crossed > 0)
        throw LoadGateCrossed(fmt::format("{} load gate crossing(s) in the sweep (report: {}):{}{}", num_crossed, out,
                                          crossed, num_crossed > 20 ? "\n  ..." : ""));
    if (o.num_ok == 0 && o.num_config_errors > 0 && o.num_config_errors == o.num_skipped)
        throw ConfigError("every sweep point was rejected; first: " + o.first_config_error);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("sweep", "Run the cartesian product of run axes; find the golden point and knee");
    cmd->footer(
        "Axis values: lists (1,2,4), ranges 1..1024 (powers of two), a..b:xF, a..b:+S. Axes may also be declared in "
        "the\n"
        "config's \"axes\" object; flags replace axes of the same name. Each finished point is appended to the "
        "journal\n"
        "(JSON Lines); --resume skips points already there. docs/sweep.md.\n"
        "Any run config field: --set FIELD=VALUE (--set hardware=NAME: the profile; the sim models " +
        std::string(kDefaultHardware) + " when none is given, as plan; cpu and cuda take none unless given).");
    auto f = std::make_shared<SweepFlags>();
    cmd->add_option("--config", f->config, "Sweep or run config: short name (configs/sweeps, configs/runs) or file");
    for (const RunField& field : run_fields()) {
        if (!field.sweep_flag) continue;
        auto* o =
            cmd->add_option(field.flag, f->axis_values[field.key], "Axis: " + field.key + " values (list or range)")
                ->type_name("LIST");
        f->axis_opts.emplace_back(o, field.key);
    }
    cmd->add_option("--set", f->sets, "key=value: set a run config field (key=v1,v2 makes it an axis)");
    f->o_warmup = add_whole_option(cmd, "--warmup", f->warmup, "Warm-up iterations per point");
    f->o_iters = add_whole_option(cmd, "--iters", f->iters, "Minimum measured iterations per point");
    cmd->add_option("-o,--out", f->out, "Report file (default results/sweep-<UTC time>.json)")->type_name("FILE");
    f->o_journal =
        cmd->add_option("--journal", f->journal, "Journal (JSON Lines; default: the report path with .jsonl)");
    cmd->add_flag("--resume", f->resume, "Skip points already in the journal");
    f->o_budget =
        add_decimal_option(cmd, "--time-budget", f->time_budget_s, "Stop cleanly before this many seconds are spent");
    f->o_slo = add_decimal_option(cmd, "--slo-p95-ms", f->slo_p95_ms,
                                  "Golden point: highest throughput with step p95 <= this");
    f->o_knee =
        add_decimal_option(cmd, "--knee", f->knee_fraction, "Knee: smallest batch reaching this fraction of the best");
    cmd->add_flag("--quiet", f->quiet, "No progress and no summary");
    f->o_jobs = add_whole_option(cmd, "--jobs", f->jobs,
                                 "Points computed side by side when every point is modeled (sim): 0 = this process's "
                                 "CPUs (default), 1 = one at a time; measured points always run one at a time");
    cmd->add_option("--format", f->format,
                    "Also write " + format_names_help(DocKind::report, ",", false) + " next to the report")
        ->type_name("FORMAT");
    cmd->callback([f] { run_sweep_command(*f); });
}

}  // namespace moebench::cli
