// SPDX-License-Identifier: Apache-2.0
// Every reader of outside input, called as the CLI calls it: one entry per libFuzzer target (fuzz/fuzz_target.cpp)
// and per folder of tests/data/fuzz-regressions/ (tests/cpu/test_fuzz_regressions.cpp), so that a reproducer replays
// through the same code in both. A reader takes the input's bytes, puts them where the CLI would read them (a file in
// a scratch folder, or an argument), and calls the library. A bad input must end in ConfigError / UnsupportedError
// (exit 2), or Regression for compare's gate (exit 1); any other exception, a crash, a hang or a huge allocation is a
// finding. Header-only: the test build and the fuzz build compile it against their own copy of the library.
#pragma once
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/npy.hpp"
#include "common/tensor_file.hpp"
#include "config/hardware.hpp"
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "metrics/expert_load.hpp"
#include "metrics/routing_stats.hpp"
#include "report/formats.hpp"
#include "report/report_json.hpp"
#include "sweep/axes.hpp"
#include "sweep/golden.hpp"
#include "sweep/journal.hpp"
#include "sweep/sweep_runner.hpp"
#include "workload/engine_dumps.hpp"
#include "workload/routing_spec.hpp"
#include "workload/trace.hpp"
#include "workload/trace_import.hpp"
#include "workload/workload.hpp"

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace moebench::fuzz {

/// One reader: `name` is the fuzz target (fuzz_<name>) and the regression folder; `run` reads `bytes` using `dir`
/// (an empty scratch folder of this process) for its files.
struct Reader {
    const char* name;
    const char* what;
    void (*run)(const std::string& bytes, const std::string& dir);
};

/// True for the errors a bad input may end in (the CLI's exit 2, and compare's exit-1 gate).
inline bool is_expected_error(const std::exception& e) {
    return dynamic_cast<const ConfigError*>(&e) || dynamic_cast<const UnsupportedError*>(&e) ||
           dynamic_cast<const Regression*>(&e);
}

/// The journal fingerprint a fuzzed journal must carry to be read past the fingerprint check; the seed journals
/// (fuzz/make_seeds.cpp) are written with it.
inline std::string journal_fingerprint() { return sweep_fingerprint(json::object()); }

namespace detail {

/// This process's scratch folder: $MOEBENCH_FUZZ_TMPDIR, else /dev/shm (no disk writes per input), else the
/// system temp folder; removed at normal exit.
struct Scratch {
    std::string dir;
    Scratch() {
        namespace fs = std::filesystem;
        const char* env = std::getenv("MOEBENCH_FUZZ_TMPDIR");
        std::error_code ec;
        fs::path base = env && *env                        ? fs::path(env)
                        : fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm")
                                                           : fs::temp_directory_path();
        dir = (base / ("moebench-fuzz-" + std::to_string(::getpid()))).string();
    }
    ~Scratch() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

/// An empty scratch folder: the previous input's files (a repaired journal, outputs) must not leak into this one.
inline std::string fresh_scratch_dir() {
    static Scratch scratch;
    std::error_code ec;
    std::filesystem::remove_all(scratch.dir, ec);
    std::filesystem::create_directories(scratch.dir);
    return scratch.dir;
}

inline std::string put(const std::string& path, const std::string& bytes) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("fuzz harness: cannot write " + path);
    return path;
}

/// Silences std::cout and std::cerr while a reader runs (the CLI's "wrote FILE" lines); restored on the way out.
class QuietStreams {
public:
    QuietStreams() : out_(std::cout.rdbuf(&sink_)), err_(std::cerr.rdbuf(&sink_)) {}
    ~QuietStreams() {
        std::cout.rdbuf(out_);
        std::cerr.rdbuf(err_);
    }
    QuietStreams(const QuietStreams&) = delete;
    QuietStreams& operator=(const QuietStreams&) = delete;

private:
    struct Sink : std::streambuf {
        int overflow(int c) override { return c == EOF ? 0 : c; }
    } sink_;
    std::streambuf* out_;
    std::streambuf* err_;
};

/// `moebench <args>` in this process, with only the subcommand that `add` registers (as main() builds the app).
inline void run_cli(void (*add)(CLI::App&), std::vector<std::string> args) {
    CLI::App app{"moebench (fuzz)", "moebench"};
    app.require_subcommand(1);
    add(app);
    args.insert(args.begin(), "moebench");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
}

/// Calls `call` on each item; an expected error of one does not stop the others (each stands for its own command
/// line), and the first one is rethrown at the end. Only the expected types are caught, so that any other exception
/// finds no handler and std::terminate reports it at its throw (the fuzz targets rely on that for the stack).
template <class F>
void each_expecting(const std::vector<std::string>& items, F&& call) {
    std::exception_ptr first;
    const auto keep = [&] {
        if (!first) first = std::current_exception();
    };
    for (const auto& item : items) {
        try {
            call(item);
        } catch (const ConfigError&) {
            keep();
        } catch (const UnsupportedError&) {
            keep();
        } catch (const Regression&) {
            keep();
        }
    }
    if (first) std::rethrow_exception(first);
}

// ---- the readers ----

// `moebench plan --model FILE`: load_model (own schema or HF, auto-detected), then the accounting it feeds.
inline void plan_model(const std::string& model_path, const std::string& dir) {
    run_cli(cli::add_plan_command, {"plan", "--model", model_path, "--format", "json", "--out", dir + "/plan.json"});
}

inline void read_model_json(const std::string& bytes, const std::string& dir) {
    plan_model(put(dir + "/model.json", bytes), dir);
}

inline void read_hf_config(const std::string& bytes, const std::string& dir) {
    plan_model(put(dir + "/some-org-model/config.json", bytes), dir);  // named after its folder, as HF checkouts are
}

// `moebench plan --hardware FILE`: load_hardware, then memory plan and floors on the profile's figures.
inline void read_hardware(const std::string& bytes, const std::string& dir) {
    const std::string path = put(dir + "/hardware.json", bytes);
    run_cli(cli::add_plan_command, {"plan", "--model", "mixtral-8x7b", "--hardware", path, "--batch", "64", "--format",
                                    "json", "--out", dir + "/plan.json"});
}

// `moebench run --config FILE` up to the run itself (src/cli/run.cpp), plus the routing spec it names.
inline void read_run_config(const std::string& bytes, const std::string& dir) {
    const std::string path = put(dir + "/run.json", bytes);
    const json j = load_json_file(path);
    if (!j.is_object()) config_error(path, "must be a JSON object (a run config)", json_brief(j), "");
    RunConfig cfg = run_config_from_json(j, "");
    validate(cfg);
    parse_routing_spec(cfg.routing, "routing");
    // A sweep re-reads the resolved form (src/cli/sweep.cpp): it must parse again.
    validate(run_config_from_json(run_config_to_json(cfg), ""));
}

// `moebench sweep --config FILE` up to the first point: src/cli/sweep.cpp's reading of the config (mirrored: its
// callback goes on to run every point), then plan_sweep, which builds and checks every point and touches no file.
inline void read_sweep_config(const std::string& bytes, const std::string& dir) {
    const std::string path = put(dir + "/sweep.json", bytes);
    json raw = load_json_file(path);
    if (!raw.is_object()) config_error("--config", "must be a JSON object", json_brief(raw), "");
    const json sweep_opts = sweep_block_of(raw);
    std::vector<SweepAxis> axes;
    if (raw.contains("axes")) {
        if (!raw["axes"].is_object())
            config_error("axes", "must be an object of field: values", json_brief(raw["axes"]), "");
        for (const auto& [k, v] : raw["axes"].items()) axes.push_back({k, axis_values_from_json(v, "axes." + k)});
    }
    raw.erase("axes");
    raw.erase("sweep");
    json base_json = run_config_to_json(run_config_from_json(raw, ""));
    axes = canonical_axes(axes);
    for (const auto& a : axes)
        if (a.values.size() == 1 && base_json.contains(a.name)) base_json[a.name] = a.values[0];
    (void)run_config_from_json(base_json, "");
    base_json["out"] = "";
    SweepSpec spec;
    spec.base_run = base_json;
    spec.axes = axes;
    spec.journal_path = dir + "/sweep.jsonl";
    spec.time_budget_s = sweep_opts.value("time_budget_s", 0.0);
    if (sweep_opts.contains("slo_p95_ms")) spec.slo_p95_ms = sweep_opts["slo_p95_ms"].get<double>();
    spec.knee_fraction = sweep_opts.value("knee_fraction", 0.9);
    const SweepPlan plan = plan_sweep(spec);
    for (const json& point : plan.points) {
        (void)point_key(point);
        (void)point_label(point);
    }
}

// `--routing SPEC` (an argument: cut at a NUL as argv would), and the workload it makes on a 64-expert model.
inline void read_routing_spec(const std::string& bytes, const std::string&) {
    const std::string spec(bytes.c_str());
    const RoutingSpec parsed = parse_routing_spec(spec, "--routing");
    if (parsed.kind == WorkloadKind::trace) return;  // names a file: the trace readers cover what it reads
    static const ModelConfig model = load_model("olmoe-1b-7b");
    auto workload = make_workload(spec, model, 1234, "--routing");
    (void)workload->describe();
    (void)workload->next_step(48, {0, 1});
    workload->seek(7);
    (void)workload->next_step(17, {3});
}

// The generic safetensors reader (traces, --dump-tensors files) and the typed views its users take.
inline void read_safetensors_file(const std::string& bytes, const std::string& dir) {
    const TensorFile f = read_safetensors(put(dir + "/tensors.safetensors", bytes));
    for (const auto& t : f.tensors) {
        (void)t.numel();
        if (t.dtype == "F32") (void)t.as_f32();
        if (t.dtype == "I32" || t.dtype == "I64") {
            (void)t.as_i64();
            (void)t.as_i32();
        }
    }
    (void)f.find("topk_ids");
}

// `moebench trace info FILE` (its statistics, src/cli/trace.cpp) and `--routing trace:FILE` replay.
inline void read_trace_safetensors(const std::string& bytes, const std::string& dir) {
    const std::string path = put(dir + "/trace.safetensors", bytes);
    const RoutingTrace t = read_trace(path);
    (void)model_layers_of(t);
    (void)t.num_missing();
    for (int64_t l = 0; l < t.num_layers; ++l) {
        const int32_t* ids = t.layer_ids(l);
        (void)expert_load(ids, t.num_tokens, t.top_k, t.num_experts);
        (void)switch_stats(ids, t.num_tokens, t.top_k, t.seq_starts);
        (void)top_coactivation_pairs(ids, t.num_tokens, t.top_k, 3);
        (void)load_windows(ids, t.num_tokens, t.top_k, t.num_experts, 5);
    }
    static const ModelConfig model = load_model("olmoe-1b-7b");
    auto workload = make_workload("trace:" + path, model, 0, "--routing");
    (void)workload->next_step(40, {0, 1});
}

// `moebench trace convert IN -o OUT`: import, then write; what moebench writes must read back.
inline void convert_trace(RoutingTrace t, const ImportSummary& summary, const std::string& dir) {
    (void)summary.describe();
    const std::string out = dir + "/converted.safetensors";
    write_trace(out, t);
    try {
        (void)read_trace(out);
    } catch (const ConfigError& e) {
        throw std::logic_error(std::string("a converted trace does not read back: ") + e.what());
    }
}

inline void read_trace_jsonl(const std::string& bytes, const std::string& dir) {
    ImportSummary summary;
    convert_trace(trace_from_jsonl(put(dir + "/trace.jsonl", bytes), 0, &summary), summary, dir);
}

inline void read_trace_text(const std::string& bytes, const std::string& dir) {
    ImportSummary summary;
    convert_trace(trace_from_text(put(dir + "/trace.txt", bytes), 0, &summary), summary, dir);
}

// `moebench trace convert DUMP.npy -o OUT` (vLLM's routed experts as a .npy file): the container alone, then the
// import (workload/engine_dumps, without --model), write and read back.
inline void read_npy(const std::string& bytes, const std::string& dir) {
    (void)parse_npy(bytes, "dump.npy");
    const std::string path = put(dir + "/dump.npy", bytes);
    if (engine_dump_kind(path) != "npy") throw std::logic_error("a .npy that parses is not recognised as one");
    ImportSummary summary;
    convert_trace(trace_from_engine_dump(path, "npy", nullptr, 0, &summary), summary, dir);
}

// `moebench report FILE --format F` for every format.
inline void read_report(const std::string& bytes, const std::string& dir) {
    const std::string path = put(dir + "/report.json", bytes);
    each_expecting(format_names(DocKind::report), [&](const std::string& f) {
        run_cli(cli::add_report_command, {"report", path, "--format", f, "-o", dir + "/out." + format_extension(f)});
    });
}

/// Separates the two reports of a compare input (never inside JSON: a string cannot hold a raw newline).
inline constexpr const char* kCompareSeparator = "\n---\n";

// `moebench compare A B --format F`: the input is A, the separator and B (no separator: a report against itself).
inline void read_compare(const std::string& bytes, const std::string& dir) {
    const size_t cut = bytes.find(kCompareSeparator);
    const std::string a = put(dir + "/a.json", bytes.substr(0, cut));
    const std::string b = cut == std::string::npos ? a : put(dir + "/b.json", bytes.substr(cut + 5));
    each_expecting(format_names(DocKind::comparison), [&](const std::string& f) {
        run_cli(cli::add_compare_command, {"compare", a, b, "--format", f, "-o", dir + "/cmp." + f});
    });
}

// A sweep journal: `moebench report J.jsonl`, then `sweep --resume` (load_journal; its records go through the
// sweep analysis and the report renderers as a resumed sweep's do).
inline void read_journal(const std::string& bytes, const std::string& dir) {
    const std::string path = put(dir + "/sweep.jsonl", bytes);
    each_expecting({"md", "csv"}, [&](const std::string& f) {
        run_cli(cli::add_report_command, {"report", path, "--format", f, "-o", dir + "/out." + f});
    });
    bool repaired = false;
    const std::vector<JournalEntry> entries = load_journal(path, journal_fingerprint(), &repaired);
    json runs = json::array();
    for (const auto& e : entries) {
        json rec = e.record;
        rec["sweep_label"] = point_label(e.point);
        runs.push_back(rec);
    }
    // An empty environment: the real one probes /proc and OpenBLAS, which costs more than the reading itself.
    json report =
        make_report({{"environment", json::object()}}, json::object(), std::vector<json>(runs.begin(), runs.end()));
    report["sweep"] = analyze_sweep(runs, 5.0);
    (void)analyze_sweep(runs, std::nullopt);
    for (const auto& f : format_names(DocKind::report)) (void)render_report(report, f);
}

}  // namespace detail

/// Every reader, in the order of docs/fuzzing.md.
inline const std::vector<Reader>& readers() {
    static const std::vector<Reader> all = {
        {"model_json", "own model schema via `plan --model FILE`", detail::read_model_json},
        {"hf_config", "Hugging Face config.json via `plan --model DIR/config.json`", detail::read_hf_config},
        {"hardware", "hardware profile via `plan --hardware FILE`", detail::read_hardware},
        {"run_config", "run config (`run --config FILE`, up to the run)", detail::read_run_config},
        {"sweep_config", "sweep config (`sweep --config FILE`, up to the first point)", detail::read_sweep_config},
        {"routing_spec", "`--routing SPEC` and the workload it makes", detail::read_routing_spec},
        {"safetensors", "generic safetensors reader", detail::read_safetensors_file},
        {"trace_safetensors", "safetensors trace: `trace info`, `--routing trace:FILE`",
         detail::read_trace_safetensors},
        {"trace_jsonl", "JSONL trace import (`trace convert`)", detail::read_trace_jsonl},
        {"trace_text", "text trace import (`trace convert`)", detail::read_trace_text},
        {"npy", "engine dump .npy import (`trace convert DUMP.npy`)", detail::read_npy},
        {"report", "`report FILE --format *`", detail::read_report},
        {"compare", "`compare A B` (input: A \\n---\\n B)", detail::read_compare},
        {"journal", "sweep journal: `report J.jsonl`, `sweep --resume`", detail::read_journal},
    };
    return all;
}

inline const Reader* find_reader(const std::string& name) {
    for (const auto& r : readers())
        if (name == r.name) return &r;
    return nullptr;
}

/// Runs one input through `reader` in a fresh scratch folder with std::cout/cerr silenced. Throws what the reader
/// throws.
inline void replay(const Reader& reader, const std::string& bytes) {
    const std::string dir = detail::fresh_scratch_dir();
    detail::QuietStreams quiet;
    reader.run(bytes, dir);
}

}  // namespace moebench::fuzz
