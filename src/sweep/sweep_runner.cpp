// SPDX-License-Identifier: Apache-2.0
// The sweep loop. Each finished point goes to the journal before the next starts, so a kill loses nothing finished.
#include "sweep/sweep_runner.hpp"
#include "core/report_keys.hpp"

#include "config/hardware.hpp"
#include "config/model_config.hpp"
#include "config/run_fields.hpp"
#include "harness/validate.hpp"
#include "workload/routing_spec.hpp"

#include "comm/communicator.hpp"
#include "comm/process_group.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/read_file.hpp"
#include "report/formats.hpp"
#include "sweep/golden.hpp"
#include "sweep/journal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <thread>

namespace moebench {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

// First SIGINT / SIGTERM / SIGHUP: finish the current point, then stop cleanly; a second one kills as usual.
extern "C" void on_stop_signal(int sig) {
    g_stop_signal = sig;
    std::signal(sig, SIG_DFL);
}

struct SignalGuard {
    using Handler = void (*)(int);
    static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
    Handler old[3];
    SignalGuard() {
        g_stop_signal = 0;
        for (int i = 0; i < 3; ++i) old[i] = std::signal(kSignals[i], on_stop_signal);
    }
    ~SignalGuard() {
        for (int i = 0; i < 3; ++i) std::signal(kSignals[i], old[i]);
    }
};

double get_num(const json& j, std::initializer_list<const char*> path, double dflt) {
    const json* cur = &j;
    for (const char* k : path) {
        if (!cur->is_object() || !cur->contains(k)) return dflt;
        cur = &cur->at(k);
    }
    return cur->is_number() ? cur->get<double>() : dflt;
}

json not_run_record(const RunConfig& cfg, const std::string& status, const std::string& why_key,
                    const std::string& why) {
    json r = {{keys::kStatus, status},        {why_key, why},
              {keys::kAxes, run_axes(cfg)},   {"mode", to_string(cfg.shape.mode)},
              {"batch", cfg.shape.batch},     {"seq_len", cfg.shape.seq_len},
              {"context", cfg.shape.context}, {"num_tokens", cfg.shape.num_tokens()},
              {"backend", cfg.backend},       {"seed", cfg.options.seed}};
    return r;
}

std::string outcome_text(const json& rec) {
    std::string st = rec.value(keys::kStatus, "ok");
    if (st == "skipped") return "skipped: " + rec.value("skip_reason", "");
    if (st == "failed") return "FAILED: " + rec.value("error", "");
    return fmt::format("ok{}, {:.0f} tok/s, step p95 {:.3f} ms",
                       rec.value("fits", true) ? "" : " (does not fit its GPUs)",
                       get_num(rec, {keys::kThroughput, keys::kTokensPerS}, 0),
                       get_num(rec, {keys::kLatency, keys::kStep, keys::kP95Us}, 0) / 1000.0);
}

}  // namespace

json record_summary(const json& rec) {
    using formats_detail::find_path;
    json s = json::object();
    for (const char* key : {keys::kStatus, "skip_reason", "skip_kind", "error", keys::kAxes, "batch", "sweep_point",
                            "sweep_label", "sweep_point_s", "backend", "backend_note", "model", "fits", "load_gates"})
        if (rec.contains(key)) s[key] = rec.at(key);
    if (const json* v = find_path(rec, {keys::kThroughput, keys::kTokensPerS}))
        s[keys::kThroughput][keys::kTokensPerS] = *v;
    if (const json* src = find_path(rec, {keys::kLatency, "source"})) s[keys::kLatency]["source"] = *src;
    if (const json* st = find_path(rec, {keys::kLatency, keys::kStep}))
        for (const char* key : {keys::kMeanUs, keys::kP50Us, keys::kP95Us})
            if (st->contains(key)) s[keys::kLatency][keys::kStep][key] = st->at(key);
    if (const json* g = find_path(rec, {keys::kBackendInfo, "gpus"})) s[keys::kBackendInfo]["gpus"] = *g;
    return s;
}

json sweep_block_of(const json& raw) {
    if (!raw.contains("sweep")) return json::object();
    const json& s = raw["sweep"];
    const char* example = "write e.g. \"sweep\": {\"slo_p95_ms\": 50, \"knee_fraction\": 0.9, \"time_budget_s\": 600}";
    if (!s.is_object()) config_error("sweep", "must be an object", json_brief(s), example);
    for (const auto& [key, v] : s.items()) {
        if (key != "slo_p95_ms" && key != "knee_fraction" && key != "time_budget_s")
            config_error("sweep." + key, "unknown sweep option", json_brief(v),
                         "use slo_p95_ms, knee_fraction or time_budget_s");
        if (!v.is_number()) config_error("sweep." + key, "must be a number", json_brief(v), example);
    }
    return s;
}

namespace {

// What a point names is read and checked while the sweep is planned, once per distinct name: its model (a file, or a
// short name) and hardware profile, its routing spec (and that its trace file is readable), and the fields that
// depend on the model (layers, ep, soft_topn).
// A missing or bad file then stops the sweep before its first point (exit 2), instead of skipping that point when
// its turn comes while the others run and the sweep exits 0.
class PointInputs {
public:
    void check(const RunConfig& cfg, const json& point) {
        try {
            auto model = models_.find(cfg.model);
            if (model == models_.end()) model = models_.emplace(cfg.model, load_model(cfg.model)).first;
            (void)layers_to_run(model->second, cfg);
            if (!cfg.hardware.empty() && hardware_.insert(cfg.hardware).second) (void)load_hardware(cfg.hardware);
            if (routing_.insert(cfg.routing).second) {
                const RoutingSpec spec = parse_routing_spec(cfg.routing, run_field_label("", "routing"));
                // A trace is only looked at (it may be large): there and readable.
                if (spec.kind == WorkloadKind::trace)
                    require_readable_file(spec.trace_path, run_field_label("", "routing"));
            }
        } catch (const ConfigError& e) {
            throw ConfigError(std::string("sweep point ") + point_label(point) + ": " + e.what());
        }
    }

private:
    std::map<std::string, ModelConfig> models_;
    std::set<std::string> hardware_, routing_;
};

}  // namespace

SweepPlan plan_sweep(const SweepSpec& spec) {
    SweepPlan plan;
    plan.points = expand_axes(spec.axes);
    plan.configs.reserve(plan.points.size());
    // Each point's inputs are checked before any point runs (a missing model of one point stops the sweep).
    PointInputs inputs;
    for (const auto& p : plan.points) {
        plan.configs.push_back(apply_point(spec.base_run, p));
        // A modeled point that does not fit its GPUs is still modeled, to show where memory runs out: its record
        // says fits: false, and the analysis never picks it (golden.cpp).
        plan.configs.back().allow_no_fit = true;
        inputs.check(plan.configs.back(), p);
    }
    // What each point reads, by content: a resumed point whose model file (trace, profile, placement) was edited
    // since it ran is refused, so one report never holds two versions of a file.
    InputDigests digests;
    plan.inputs.reserve(plan.configs.size());
    for (const RunConfig& cfg : plan.configs) plan.inputs.push_back(digests.of(cfg));
    // The fingerprint covers the fixed fields only: the base value of a swept field does not matter. A fixed field
    // that names a file counts by the file's content, not its path.
    json fixed = spec.base_run;
    for (const auto& a : spec.axes) fixed.erase(a.name);
    fixed.erase("out");
    const json base_inputs = digests.of(run_config_from_json(spec.base_run, ""));
    for (const auto& [field, digest] : base_inputs.items())
        if (fixed.contains(field)) fixed[field] = json{{"content_fnv1a64", digest}};
    plan.fingerprint = sweep_fingerprint(fixed);
    return plan;
}

SweepOutcome run_sweep(const SweepSpec& spec, const PointExecutor& exec) {
    return run_sweep(spec, plan_sweep(spec), exec);
}

namespace {

// Labels show only the axes that vary; one-valued axes are settings, not coordinates.
std::vector<std::string> varying_axes(const SweepSpec& spec) {
    std::vector<std::string> varying;
    for (const auto& a : spec.axes) {
        std::vector<json> uniq;
        for (const auto& v : a.values)
            if (std::find(uniq.begin(), uniq.end(), v) == uniq.end()) uniq.push_back(v);
        if (uniq.size() > 1) varying.push_back(a.name);
    }
    return varying;
}

// One point's outcome: its record, or a skipped/failed record saying why, and how long it took.
struct PointResult {
    json rec;
    std::string config_error;  // the message when a ConfigError skipped it
    double seconds = 0;
};

// One point through the executor (never throws for the point).
PointResult execute_point(const RunConfig& cfg, const PointExecutor& exec) {
    PointResult r;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        r.rec = exec(cfg);
        if (!r.rec.is_object()) throw Error("run_point returned no record");
        if (!r.rec.contains(keys::kStatus)) r.rec[keys::kStatus] = "ok";
    } catch (const UnsupportedError& e) {
        r.rec = not_run_record(cfg, "skipped", "skip_reason", e.what());
    } catch (const ConfigError& e) {
        r.rec = not_run_record(cfg, "skipped", "skip_reason", e.what());
        r.rec["skip_kind"] = "config";
        r.config_error = e.what();
    } catch (const std::bad_alloc&) {
        r.rec = not_run_record(cfg, "skipped", "skip_reason", "out of host memory");
    } catch (const std::exception& e) {
        r.rec = not_run_record(cfg, "failed", "error", e.what());
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

// One point made whole for the sweep: executed, its record given the sweep's fields (every sweep axis in `axes`,
// sweep_point, sweep_label, sweep_point_s), and, as its journal line and the report need them, its compact text and
// its summary (on a worker thread when points run side by side: the loop only writes them).
struct FinishedPoint {
    PointResult r;
    std::string text;              // r.rec.dump() (when `text` was asked for)
    std::vector<uint8_t> summary;  // record_summary(r.rec) as MessagePack (when asked for; see run_sweep)
    std::string status, outcome;   // the record's status and its progress text (outcome_text)
};

FinishedPoint finish_point(const RunConfig& cfg, const json& point, const std::string& label, const PointExecutor& exec,
                           bool text, bool summary) {
    FinishedPoint f;
    f.r = execute_point(cfg, exec);
    json& rec = f.r.rec;
    // The record's axes gain every sweep axis it lacks (a model axis, threads, ...), never overriding the resolved
    // values the engine wrote (backend "auto" -> "cpu").
    if (!rec.contains(keys::kAxes) || !rec[keys::kAxes].is_object()) rec[keys::kAxes] = run_axes(cfg);
    for (const auto& [k, v] : point.items())
        if (!rec[keys::kAxes].contains(k)) rec[keys::kAxes][k] = v;
    rec["sweep_point"] = point;
    rec["sweep_label"] = label;
    rec["sweep_point_s"] = f.r.seconds;
    if (text) f.text = rec.dump();
    f.status = rec.value(keys::kStatus, "ok");
    f.outcome = outcome_text(rec);
    // With a summary the loop keeps no record: it is freed here, on the thread that made it (freed on the loop's
    // thread, every node went back to another thread's heap under its lock).
    if (summary) {
        f.summary = json::to_msgpack(record_summary(rec));
        rec = json();
    }
    return f;
}

// Points computed ahead of the sweep's loop on `threads` threads (SweepSpec::jobs); the loop takes each result in
// expansion order.
class PointWorkers {
public:
    struct Job {
        size_t index;
        const RunConfig* cfg;
        const json* point;
        std::string label;
    };
    PointWorkers(size_t threads, const PointExecutor& exec, bool text, bool summary)
        : exec_(exec), text_(text), summary_(summary) {
        for (size_t t = 0; t < threads; ++t) threads_.emplace_back([this] { work(); });
    }
    ~PointWorkers() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        work_cv_.notify_all();
        for (std::thread& t : threads_) t.join();
    }
    void submit(Job job) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            queue_.push_back(std::move(job));
            ++in_flight_;
        }
        work_cv_.notify_one();
    }
    FinishedPoint take(size_t index) {
        std::unique_lock<std::mutex> lock(mu_);
        done_cv_.wait(lock, [&] { return done_.count(index) > 0; });
        FinishedPoint f = std::move(done_.at(index));
        done_.erase(index);
        --in_flight_;
        return f;
    }
    size_t in_flight() {
        std::lock_guard<std::mutex> lock(mu_);
        return in_flight_;
    }

private:
    void work() {
        while (true) {
            Job job;
            {
                std::unique_lock<std::mutex> lock(mu_);
                work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
                if (stop_) return;
                job = std::move(queue_.front());
                queue_.pop_front();
            }
            FinishedPoint f = finish_point(*job.cfg, *job.point, job.label, exec_, text_, summary_);
            {
                std::lock_guard<std::mutex> lock(mu_);
                done_[job.index] = std::move(f);
            }
            done_cv_.notify_all();
        }
    }

    const PointExecutor& exec_;
    const bool text_, summary_;
    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    std::deque<Job> queue_;
    std::map<size_t, FinishedPoint> done_;
    size_t in_flight_ = 0;  // submitted and not yet taken
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

// Where a sweep stands, point after point.
struct SweepState {
    std::chrono::steady_clock::time_point t_start = std::chrono::steady_clock::now();
    std::string stop_reason = "done";
    double last_point_s = 0;
    json not_run = json::array();
    size_t used_from_journal = 0;

    double elapsed_s() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    }
    // Before a point that is not in the journal: stop on a signal, or when the point would overrun the budget.
    bool may_run(const SweepSpec& spec, double mean_point_s) {
        const double elapsed = elapsed_s(), estimate_s = std::max(mean_point_s, last_point_s);
        if (stop_reason == "done" && g_stop_signal) stop_reason = "interrupted";
        if (stop_reason == "done" && spec.time_budget_s > 0 &&
            (elapsed >= spec.time_budget_s || elapsed + estimate_s > spec.time_budget_s))
            stop_reason = "time_budget";
        return stop_reason == "done";
    }
};

json sweep_block(const SweepSpec& spec, const SweepPlan& plan, const SweepOutcome& out, const SweepState& st,
                 const std::vector<std::string>& varying, size_t journal_entries) {
    json axes_json = json::object();
    json axis_order = json::array();
    for (const auto& a : spec.axes) {
        axes_json[a.name] = a.values;
        axis_order.push_back(a.name);
    }
    json sweep = {{keys::kAxes, axes_json},
                  {"varying_axes", varying},
                  {"axis_order", axis_order},
                  {"num_points", plan.points.size()},
                  {"ok", out.num_ok},
                  {"skipped", out.num_skipped},
                  {"failed", out.num_failed},
                  {"resumed", out.num_resumed},
                  {"not_run", st.not_run},
                  {"journal_entries_outside_axes", journal_entries - st.used_from_journal},
                  {"stop_reason", st.stop_reason},
                  {"time_budget_s", spec.time_budget_s > 0 ? json(spec.time_budget_s) : json(nullptr)},
                  {"elapsed_s", st.elapsed_s()},
                  {"journal", spec.journal_path},
                  {"fingerprint", plan.fingerprint}};
    json analysis = analyze_sweep(out.runs, spec.slo_p95_ms, spec.knee_fraction);
    for (auto& [k, v] : analysis.items()) sweep[k] = v;
    return sweep;
}

}  // namespace

// Expert parallelism over processes: every rank runs every point (the all-to-alls pair them); rank 0 alone reads and
// writes the journal, shows progress and decides (resumed points, budget, signals), and the others follow it.
std::vector<JournalEntry> journal_at_root(const SweepSpec& spec, const SweepPlan& plan, Communicator* comm,
                                          bool* repaired) {
    const bool root = !comm || comm->rank() == 0;
    std::vector<JournalEntry> done;
    if (root) {
        namespace fs = std::filesystem;
        std::error_code ec;
        const bool journal_has_data = fs::exists(spec.journal_path, ec) && fs::file_size(spec.journal_path, ec) > 0;
        if (journal_has_data && !spec.resume)
            config_error(flag_of("journal"), "the sweep journal already holds points", spec.journal_path,
                         fmt::format("pass {} to continue that sweep, or choose another {} / {}", flag_of("resume"),
                                     flag_of("journal"), flag_of("out")));
        if (spec.resume) {
            JournalExpectation want{plan.fingerprint, {}};
            for (size_t i = 0; i < plan.points.size(); ++i)
                want.inputs_by_key[point_key(plan.points[i])] = plan.inputs[i];
            done = load_journal(spec.journal_path, want, repaired);
        }
    }
    if (!comm) return done;
    json keys = json::array();
    for (const auto& e : done) keys.push_back(e.key);
    const json all = json::parse(broadcast_string(*comm, root ? keys.dump() : std::string(), 0));
    if (!root)
        for (const auto& k : all) done.push_back(JournalEntry{k.get<std::string>(), json(), json()});
    return done;
}

SweepOutcome run_sweep(const SweepSpec& spec, const SweepPlan& plan, const PointExecutor& exec) {
    MOEBENCH_CHECK(!spec.journal_path.empty(), "sweep needs a journal path");
    SweepState st;
    const std::vector<json>& points = plan.points;
    Communicator* comm = process_group();
    const bool root = !comm || comm->rank() == 0;
    bool repaired = false;
    std::vector<JournalEntry> done = journal_at_root(spec, plan, comm, &repaired);
    std::map<std::string, const JournalEntry*> done_by_key;
    for (const auto& e : done) done_by_key[e.key] = &e;

    size_t to_run = 0;
    for (const auto& p : points) to_run += done_by_key.count(point_key(p)) ? 0 : 1;
    Progress progress(root ? spec.progress : ProgressMode::quiet, to_run, points.size() - to_run);
    if (repaired) progress.note("journal: dropped a torn last line (a point cut short by a kill)");
    if (spec.resume && !done.empty())
        progress.note(fmt::format("resuming: {} of {} points already in {}", points.size() - to_run, points.size(),
                                  spec.journal_path));
    const std::vector<std::string> varying = varying_axes(spec);
    auto label_of = [&](const json& point) {
        json shown = json::object();
        for (const auto& n : varying)
            if (point.contains(n)) shown[n] = point[n];
        return point_label(shown);
    };

    SweepOutcome out;
    SignalGuard guard;
    std::optional<JournalWriter> journal;
    if (root) journal.emplace(spec.journal_path, plan.fingerprint);
    std::vector<std::string> point_keys(points.size());
    for (size_t i = 0; i < points.size(); ++i) point_keys[i] = point_key(points[i]);
    // Side by side (SweepSpec::jobs): points are computed ahead of this loop (a few per thread, so that no thread
    // waits while the loop takes an earlier point), each started when the time budget and the signals allow it, as
    // the loop would have started it.
    const size_t jobs = comm ? 1 : static_cast<size_t>(std::max<int64_t>(spec.jobs, 1));
    const size_t ahead = 4 * jobs;
    const bool as_text = root, summarize = !spec.keep_records && root;
    std::optional<PointWorkers> workers;
    if (jobs > 1) workers.emplace(jobs, exec, as_text, summarize);
    std::vector<char> started(points.size(), 0);
    size_t next = 0;
    bool stopped = false;
    const auto fill = [&] {
        while (workers && !stopped && next < points.size() && workers->in_flight() < ahead) {
            const size_t j = next++;
            if (done_by_key.count(point_keys[j])) continue;
            if (!st.may_run(spec, progress.mean_point_s())) {
                stopped = true;
                break;
            }
            workers->submit({j, &plan.configs[j], &points[j], label_of(points[j])});
            started[j] = 1;
        }
    };
    // The summaries of the points run now (keep_records false) are kept as MessagePack (one allocation each, about
    // a tenth of the json's size) until the analysis: thousands of small json nodes kept alive between each point's
    // short-lived ones fragmented the heap, and every allocation became slower as the sweep went on (10,000 points
    // took 1.3x the time of ten sweeps of 1,000).
    std::vector<std::pair<size_t, std::vector<uint8_t>>> packed;  // (index in out.runs, summary)
    for (size_t i = 0; i < points.size(); ++i) {
        fill();
        const json& point = points[i];
        const std::string& key = point_keys[i];
        const std::string label = label_of(point);
        auto hit = done_by_key.find(key);
        json rec;
        JournalSpan span;
        std::string status;
        if (hit != done_by_key.end()) {
            rec = hit->second->record;   // (null on the ranks other than 0 under mpirun: they know only the keys)
            rec["sweep_label"] = label;  // the axes that vary now may differ from when it ran
            status = rec.value(keys::kStatus, "ok");
            ++out.num_resumed;
            ++st.used_from_journal;
        } else {
            const bool may = workers ? started[i] != 0 : st.may_run(spec, progress.mean_point_s());
            if (!(comm ? comm->broadcast(may, 0) : may)) {
                st.not_run.push_back(point);
                ++out.num_not_run;
                continue;
            }
            progress.start(i, label);
            FinishedPoint f =
                workers ? workers->take(i) : finish_point(plan.configs[i], point, label, exec, as_text, summarize);
            if (!f.r.config_error.empty()) {
                if (out.first_config_error.empty()) out.first_config_error = f.r.config_error;
                ++out.num_config_errors;
            }
            rec = std::move(f.r.rec);
            st.last_point_s = f.r.seconds;
            if (root) span = journal->append(key, point, plan.inputs[i], f.text);
            progress.finish(i, label, f.outcome, st.last_point_s);
            status = std::move(f.status);
            if (summarize) {  // its summary, packed until the sweep ends (the record is in the journal)
                MOEBENCH_CHECK(span.length > 0, "sweep: point {} has a summary but no journal line", i);
                packed.emplace_back(out.runs.size(), std::move(f.summary));
            }
        }
        if (status == "ok")
            ++out.num_ok;
        else if (status == "skipped")
            ++out.num_skipped;
        else
            ++out.num_failed;
        out.spans.push_back(span);
        out.runs.push_back(std::move(rec));
    }
    workers.reset();
    for (auto& [at, bytes] : packed) {
        out.runs[at] = json::from_msgpack(bytes);
        std::vector<uint8_t>().swap(bytes);
    }
    if (journal) journal->close();  // every point on the disk before the report is written
    progress.close();
    out.stop_signal = g_stop_signal;  // also when it came during the last point: the caller exits non-zero
    out.sweep = sweep_block(spec, plan, out, st, varying, done.size());
    return out;
}

}  // namespace moebench
