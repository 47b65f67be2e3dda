// SPDX-License-Identifier: Apache-2.0
// run_point as stages: validate -> prepare -> measure -> derive (metrics/) -> record. Field meanings are documented
// in docs/report-schema.md; keep the two in step. Nothing here knows which backend runs: it reads its traits.
#include "harness/runner.hpp"
#include "core/report_keys.hpp"

#include "backends/registry.hpp"
#include "comm/communicator.hpp"
#include "comm/process_group.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "config/hardware.hpp"
#include "config/layout_request.hpp"
#include "config/run_fields.hpp"
#include "engine/backend.hpp"
#include "engine/engine.hpp"
#include "harness/check.hpp"
#include "harness/moe_dump.hpp"
#include "harness/rank_merge.hpp"
#include "harness/rank_settings.hpp"
#include "harness/routing_path.hpp"
#include "harness/validate.hpp"
#include "metrics/expert_load.hpp"
#include "metrics/host_conditions.hpp"
#include "metrics/latency.hpp"
#include "metrics/moe_samples.hpp"
#include "metrics/roofline.hpp"
#include "metrics/routing_stats.hpp"
#include "metrics/stop_rule.hpp"
#include "model/accounting.hpp"
#include "workload/pruning.hpp"
#include "workload/redundant_experts.hpp"
#include "workload/workload.hpp"

#include <chrono>
#include <iostream>
#include <mutex>
#include <numeric>
#include <optional>

namespace moebench {

namespace {

// Router logits kept per layer for the routing statistics (floats); beyond it later steps are left out (and the
// record says how many tokens the statistics cover).
constexpr int64_t kMaxLogitFloatsPerLayer = int64_t{1} << 22;

// ---- prepare: model, layers, workload, backend, ceilings, weights ----

struct Prepared {
    ModelConfig model;
    std::vector<int64_t> layers;
    std::unique_ptr<Workload> workload;
    std::unique_ptr<Backend> backend;
    BackendTraits traits;      // fixed: read once, before prepare
    PreparedStep step;         // what prepare() settled (the MLA form counted, whether a modeled deployment fits)
    RunOptions options;        // cfg.options with the layout and the number formats resolved for this backend
    std::string backend_note;  // how "auto" or a default profile was resolved ("" when nothing to say)
    RooflineCeilings ceilings;
    std::vector<PhaseEntry> plan;
    Communicator* comm = nullptr;  // expert parallelism over processes (nullptr: one process)
    ExpertPlacement placement;
    RoutingPath routing_path;              // per token, or statistical (harness/routing_path.hpp)
    std::optional<ExpertPruning> pruning;  // run field prune_below
};

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

Prepared prepare_point(const RunConfig& cfg) {
    const auto start = std::chrono::steady_clock::now();
    Prepared p;
    p.model = load_model(cfg.model);
    p.layers = layers_to_run(p.model, cfg);
    check_layout_for_model(p.model, resolve_layout(cfg.layout));
    p.comm = process_group();
    if (p.comm && p.comm->world_size() > 1) {
        // Expert parallelism over processes: this rank's deadline for every collective, then, before any work, the
        // ranks agree on what they run (a difference is exit 2 on every rank, naming the rank and the field).
        p.comm->rank_deadline().set_fixed_s(parse_rank_timeout(cfg.rank_timeout, run_field_label("", "rank_timeout")));
        p.placement = load_placement(cfg.layout.placement, p.model.moe.num_experts, p.comm->world_size());
        const ScopedCommContext agreeing("the start-of-run check that every rank has the same settings");
        agree_on_settings(*p.comm, rank_settings(cfg, p.model, p.placement));
    } else {
        p.comm = nullptr;
    }
    // The workload before the backend, so that a bad --routing fails before any allocation.
    p.workload = make_workload(cfg.routing, p.model, cfg.options.seed, run_field_label("", "routing"));
    p.workload->check_layers(p.layers);
    if (cfg.shape.mode == Mode::decode) p.workload->interleave_sequences(cfg.shape.batch);
    if (cfg.prune_below > 0 && p.model.is_moe_model()) {
        p.pruning = prune_experts(*p.workload, p.model, p.layers, cfg.prune_below, run_field_label("", "prune_below"));
        p.workload = pruned_workload(std::move(p.workload), *p.pruning);
    }

    // Its own ConfigError (a bad hardware profile for sim, no device for cuda) names the real cause.
    p.backend = make_backend(cfg.backend, &p.backend_note, cfg.hardware);
    // Once per process: a sweep would repeat the same line for every point (each report keeps it as backend_note).
    // (A sweep of modeled points runs several at once: one line, written whole.)
    {
        static std::mutex mu;
        static std::string said;
        std::lock_guard<std::mutex> lock(mu);
        if (!p.backend_note.empty() && p.backend_note != said) std::cerr << (p.backend_note + "\n");
        said = p.backend_note;
    }
    p.traits = p.backend->traits();
    check_backend_accepts(p.traits, cfg);  // "auto" is checked here, once it has picked
    check_backend_runs_model(p.traits, p.model, p.layers);
    p.options = resolved_options(cfg, p.traits);  // the layout and the number formats this backend runs

    // Ceilings for the roofline block: measured here before the weights take the memory, else a hardware profile
    // (the one given, or the one the backend models).
    if (cfg.measure_ceilings) {
        if (const CeilingProbe* probe = p.backend->capability<CeilingProbe>())  // validated: the backend offers it
            p.ceilings = probe->measure_ceilings(p.options);
    } else if (!cfg.hardware.empty() || !p.traits.default_hardware.empty()) {
        p.ceilings =
            profile_ceilings(cfg.hardware.empty() ? p.traits.default_hardware : cfg.hardware, p.options.precision);
    }
    Topology topo;
    if (p.comm) {
        topo = Topology{p.comm->rank(), p.comm->world_size(), p.comm, &p.placement};
    } else if (p.options.layout.moe_ep > 1 && p.model.is_moe_model()) {  // the ranks a backend models in one process
        p.placement = load_placement(cfg.layout.placement, p.model.moe.num_experts, p.options.layout.moe_ep);
        if (p.options.layout.redundant_experts > 0)  // each layer's replicas, by the workload's expected load
            p.placement = with_redundant_experts(p.placement, *p.workload, p.model, p.layers, cfg.shape,
                                                 p.options.layout.redundant_experts);
        topo.placement = &p.placement;
    }
    p.options.per_layer_detail = cfg.record == "full";
    p.routing_path = choose_routing_path(cfg, p.traits, *p.workload, p.model, p.placement, p.comm != nullptr);
    p.options.routing_statistics = p.routing_path.statistical;
    p.step = p.backend->prepare(p.model, p.layers, cfg.shape, p.options, topo);
    if (p.routing_path.statistical)  // once: every step models the same statistics
        p.backend->set_routing_statistics(routing_statistics_of(*p.workload, p.model, p.layers));
    // A modeled deployment that does not fit its GPUs is no answer: refused with a layout or format that fits,
    // unless asked for anyway (then every record says fits: false, and a sweep never picks it).
    if (p.step.fit && !p.step.fit->fits && !cfg.allow_no_fit)
        config_error(p.step.fit->field, p.step.fit->what, p.step.fit->value,
                     p.step.fit->fix + "; or " + find_run_field("allow_no_fit")->flag +
                         " to model it anyway (the report says fits: false)");
    p.plan = step_plan(p.model, p.layers, p.options.layout, cfg.include_lm_head);
    if (p.comm) {
        // Every rank ready before the first step: a rank slower to prepare (weights, ceilings) is waited for here,
        // under a deadline that allows for this rank's own preparation time (auto), not inside the first all-to-all.
        p.comm->rank_deadline().allow_stage_s(seconds_since(start));
        const ScopedCommContext ready("the end of preparation (weights, workload), before the first step");
        p.comm->barrier();
        p.comm->rank_deadline().allow_stage_s(0);
    }
    return p;
}

// ---- measure: warm-up, then steps until the stop rule is met ----

struct Measured {
    std::vector<StepTimes> steps;
    std::vector<MoeLayerSamples> moe;
    std::optional<StepRouting> last_routing;  // the workload's routing of the last measured step (--check)
    json conditions;
    std::string stop_reason;
    double noise = 0;
};

void gather_moe(const Backend& backend, int64_t num_experts, int64_t num_tokens, MoeLayerSamples& a) {
    MoeLayerResult r = backend.moe_result(a.slot);
    a.k = r.routing.k;
    if (r.routing.ids.empty() && r.a2a_rows >= 0)  // routed by statistics: counts, no ids
        add_counted_step(a, r.tokens_per_expert, r.a2a_rows);
    a.ids.insert(a.ids.end(), r.routing.ids.begin(), r.routing.ids.end());
    a.backend_dropped += r.dropped;
    if (!r.router_logits.empty() && (a.logit_tokens + num_tokens) * num_experts <= kMaxLogitFloatsPerLayer) {
        a.logits.insert(a.logits.end(), r.router_logits.begin(), r.router_logits.end());
        a.logit_tokens += num_tokens;
    }
    if (!r.expert_gemm_us.empty()) {
        a.expert_gemm_us.resize(r.expert_gemm_us.size(), 0.0);
        for (size_t e = 0; e < r.expert_gemm_us.size(); ++e) a.expert_gemm_us[e] += r.expert_gemm_us[e];
        ++a.gemm_steps;
    }
    if (!r.traffic.dispatch_rows.empty()) {
        add_traffic(a.traffic, r.traffic);
        ++a.traffic_steps;
    }
}

Measured measure_point(const RunConfig& cfg, Prepared& p) {
    Measured m;
    for (size_t s = 0; s < p.layers.size(); ++s)
        if (p.model.is_moe_layer(p.layers[s])) {
            MoeLayerSamples a;
            a.slot = static_cast<int64_t>(s);
            a.layer = p.layers[s];
            m.moe.push_back(std::move(a));
        }
    // Expert parallelism over processes: this rank's tokens (the routing samples are merged at rank 0).
    const int64_t T = p.comm ? tokens_on_rank(cfg.shape, p.comm->rank(), p.comm->world_size()) : cfg.shape.num_tokens();
    Backend& backend = *p.backend;
    // One step with the workload's routing for this step (nullopt when the router decides). The stream is cut into
    // steps of T tokens in order; warm-up steps consume it too, then it restarts at 0 so that the measured steps see
    // the stream from its beginning (the same ids as `moebench trace gen`).
    auto one_step = [&]() {
        if (!p.routing_path.statistical) {  // the statistical path set its routing once, in prepare_point
            m.last_routing = p.workload->next_step(cfg.shape.num_tokens(), p.layers);  // the whole step's
            backend.set_routing_override(m.last_routing ? &*m.last_routing : nullptr);
        }
        StepTimes t = run_step(backend, p.plan);
        if (p.comm) p.comm->rank_deadline().note_step_s(t.wall_us * 1e-6);  // auto deadlines follow the slowest step
        return t;
    };
    // On the statistical routing path a modeled step is a function of draws made once (prepare_point): every step
    // is the same, so the first is modeled and the others repeat it (and warm-up steps would change nothing).
    const bool repeat = !p.traits.measures && p.routing_path.statistical;
    for (int64_t w = 0; w < (repeat ? 0 : cfg.warmup); ++w) one_step();
    p.workload->seek(0);

    std::vector<double> wall_us;
    const DeviceCounters* device = backend.capability<DeviceCounters>();
    const json device_before = device ? device->read_device_counters() : json();
    // Whether the host was quiet while measuring: nothing to ask when nothing is measured (its reading of /proc and
    // /sys cost more than a modeled point's steps).
    const bool measures = p.traits.measures;
    const HostSample host_before = measures ? sample_host() : HostSample{};
    StopRule stop(StopTargets{cfg.iters, cfg.max_iters, cfg.min_time_s, cfg.max_noise});
    while (true) {
        const bool again = repeat && !m.steps.empty();
        m.steps.push_back(again ? m.steps.front() : one_step());
        wall_us.push_back(m.steps.back().wall_us);
        if (m.steps.size() == 1 && !cfg.dump_tensors.empty() && !m.moe.empty()) {
            const std::string what = flag_of("dump_tensors") + " (every rank's rows to rank 0)";  // outlives the scope
            const ScopedCommContext dumping(what);
            dump_moe_layer(cfg.dump_tensors, backend, p.model, cfg, m.moe.front().slot, m.moe.front().layer, p.comm);
        }
        for (MoeLayerSamples& a : m.moe) {
            if (again && !a.counted.empty())
                ++a.counted.back().steps;  // the same counts again
            else
                gather_moe(backend, p.model.moe.num_experts, T, a);
        }
        const bool done = stop.done(wall_us);
        // Every rank runs the same steps (the all-to-alls pair them): rank 0's stop rule decides for all.
        const ScopedCommContext deciding("the stop rule's broadcast after a step");
        if (p.comm ? p.comm->broadcast(done, 0) : done) break;
    }
    const HostSample host_after = measures ? sample_host() : HostSample{};
    const json device_after = device ? device->read_device_counters() : json();
    const int64_t tokens = T * static_cast<int64_t>(m.steps.size());
    m.conditions = {{"host", measures ? host_conditions(host_before, host_after, tokens)
                                      : json{{"source", "counter"},
                                             {"contended", false},
                                             {"not_sampled",
                                              "the times are modeled: nothing was timed on this host, "
                                              "so its load cannot change them"}}}};
    if (device && !device_before.is_null())
        m.conditions["device"] = device->device_conditions(device_before, device_after, tokens);
    if (const CeilingProbe* probe = backend.capability<CeilingProbe>(); probe && cfg.measure_ceilings)
        probe->remeasure_ceilings(p.ceilings, p.options);
    m.stop_reason = stop.reason();
    m.noise = stop.noise();
    return m;
}

// --check: the first MoE layer of the last measured step against the fp32 host reference (harness/check.hpp).
json check_point(const RunConfig& cfg, const Prepared& p, const Measured& m) {
    const int64_t slot = m.moe.front().slot;
    const LayerRouting* imposed = nullptr;
    if (m.last_routing && slot < static_cast<int64_t>(m.last_routing->per_layer.size()) &&
        m.last_routing->per_layer[static_cast<size_t>(slot)].k > 0)
        imposed = &m.last_routing->per_layer[static_cast<size_t>(slot)];
    CheckResult cr = check_moe_block(p.model, p.options, p.backend->capability<TensorAccess>()->moe_check_tensors(slot),
                                     imposed, p.traits.check);
    cr.layer = m.moe.front().layer;
    json block = to_json(cr);
    block[keys::kStep] = "last measured step";
    return block;
}

// ---- record: the derivations of metrics/ assembled into one record of runs[] ----

// Where the ids and logits came from: a backend without a router routes as its describe() says, and without an
// override every step of one that computes routes the same seeded tokens.
json routing_record(const RunConfig& cfg, const Prepared& p, const json& backend_info, json per_layer) {
    const bool overridden = p.workload->overrides_routing(), computes = p.traits.offers(Capability::tensors);
    const std::string ids_from =
        overridden  ? "workload: " + p.workload->describe()
        : !computes ? "the " + p.traits.name +
                          " backend (no router): " + backend_info.value("routing", std::string("its own routing"))
                    : "the model's router (" + std::string(to_string(p.model.moe.routing)) + ")";
    json r = {{"source", "counted"},
              {"workload", cfg.routing},
              {"path", p.routing_path.name()},
              {"path_reason", p.routing_path.reason},
              {"ids_from", ids_from},
              {"logits_from", computes ? "router GEMM on the step's hidden states (before any override)"
                                       : "none: the " + p.traits.name + " backend runs no router GEMM"},
              {"switch_order", p.workload->token_order(cfg.shape.mode == Mode::decode)},
              {keys::kPerLayer, std::move(per_layer)}};
    if (p.routing_path.statistical) {
        r["source"] = "modeled";
        r["ids_from"] = "none: the statistical routing path draws each layer's counts, not ids (" + ids_from + ")";
        r["switches"] = "not available: switch rates need every token's experts (routing_path per-token)";
    }
    return r;
}

// Tokens per expert of one MoE layer over the run: counted from its ids, or summed from the statistical path's
// counted steps.
std::vector<int64_t> layer_counts(const MoeLayerSamples& a, int64_t num_experts) {
    if (!a.ids.empty())
        return count_tokens_per_expert(a.ids.data(), static_cast<int64_t>(a.ids.size()) / std::max<int64_t>(a.k, 1),
                                       a.k, num_experts);
    std::vector<int64_t> counts(static_cast<size_t>(num_experts), 0);
    for (const MoeLayerSamples::CountedSteps& c : a.counted)
        for (size_t e = 0; e < counts.size() && e < c.tokens_per_expert.size(); ++e)
            counts[e] += c.tokens_per_expert[e] * c.steps;
    return counts;
}

// expert_load.balance: the balance figures engines log (metrics/expert_load.hpp, load_balance) over the experts and,
// under expert parallelism, over the ranks, beside the CV of tokens per expert that --max-cv gates on.
json load_balance_record(const Prepared& p, const Measured& m) {
    const int64_t E = p.model.moe.num_experts;
    const int64_t ranks = p.comm ? p.comm->world_size() : p.options.layout.moe_ep;
    std::vector<std::vector<double>> by_expert, by_rank;
    double cv_sum = 0, cv_max = 0;
    int64_t cv_layers = 0, cv_max_layer = -1;
    std::vector<int64_t> model_layer;
    for (const MoeLayerSamples& a : m.moe) {
        const std::vector<int64_t> counts = layer_counts(a, E);
        if (std::accumulate(counts.begin(), counts.end(), int64_t{0}) <= 0) continue;
        const double cv = coefficient_of_variation(counts);
        cv_sum += cv;
        if (cv_max_layer < 0 || cv > cv_max) cv_max = cv, cv_max_layer = a.layer;
        ++cv_layers;
        model_layer.push_back(a.layer);
        by_expert.emplace_back(counts.begin(), counts.end());
        if (ranks > 1) by_rank.push_back(rank_loads(counts, p.placement.of_layer(a.layer).ranks_of_expert, ranks));
    }
    const auto with_layer = [&](json j, const LoadBalance& b) {
        j["imbalance_max_layer"] =
            b.imbalance_max_layer >= 0 ? json(model_layer[static_cast<size_t>(b.imbalance_max_layer)]) : json(nullptr);
        return j;
    };
    const LoadBalance experts = load_balance(by_expert);
    json j = {{"source", p.routing_path.statistical ? "modeled" : "counted"},
              {"basis",
               "tokens per expert of each MoE layer over the run's steps (as expert_load), and under expert "
               "parallelism each rank's share of them (its experts' assignments; an expert with replicas "
               "split evenly over them)"},
              {"cv_mean", cv_layers > 0 ? cv_sum / static_cast<double>(cv_layers) : 0.0},
              {"cv_max", cv_max},
              {"cv_max_layer", cv_max_layer >= 0 ? json(cv_max_layer) : json(nullptr)},
              {"experts", with_layer(to_json(experts), experts)},
              {"ranks", nullptr},
              {"gated", ranks > 1 ? "ranks" : "experts"}};
    if (ranks > 1) {
        const LoadBalance r = load_balance(by_rank);
        j["ranks"] = with_layer(to_json(r), r);
        j["ranks"]["num_ranks"] = ranks;
    }
    return j;
}

// The load gates of the run config (--max-cv, --min-balancedness) against a record's expert_load.balance: each gate
// given, its value and whether it crossed (run and sweep exit 1 on a crossing, after the report is written).
json load_gates_record(const RunConfig& cfg, const json& balance) {
    json gates = json::array();
    if (cfg.max_cv > 0) {
        const double v = balance.value("cv_max", 0.0);
        const bool crossed = v > cfg.max_cv;
        gates.push_back({{"gate", "max_cv"},
                         {"metric", "cv_max"},
                         {"value", v},
                         {"limit", cfg.max_cv},
                         {"crossed", crossed},
                         {"message", fmt::format("cv_max {:.4g} (coefficient of variation of tokens per expert at MoE "
                                                 "layer {}) {} the limit {} {:g}",
                                                 v, balance.value("cv_max_layer", json(nullptr)).dump(),
                                                 crossed ? "exceeds" : "is within", flag_of("max_cv"), cfg.max_cv)}});
    }
    if (cfg.min_balancedness > 0) {
        const std::string unit = balance.value("gated", std::string("experts"));
        const double v =
            balance.contains(unit) && balance[unit].is_object() ? balance[unit].value("balancedness", 0.0) : 0.0;
        const bool crossed = v < cfg.min_balancedness;
        gates.push_back({{"gate", "min_balancedness"},
                         {"metric", unit + ".balancedness"},
                         {"value", v},
                         {"limit", cfg.min_balancedness},
                         {"crossed", crossed},
                         {"message", fmt::format("balancedness over the {} {:.4g} (mean over MoE layers of mean/max "
                                                 "load) is {} the limit {} {:g}",
                                                 unit, v, crossed ? "below" : "at or above",
                                                 flag_of("min_balancedness"), cfg.min_balancedness)}});
    }
    return gates;
}

// The record's pruning block (run field prune_below): which experts each MoE layer run keeps, and the memory the
// dropped experts' weights free (counted from the model's expert bytes at the run's expert format).
json pruning_record(const Prepared& p) {
    const ExpertPruning& pr = *p.pruning;
    const double expert_bytes =
        static_cast<double>(routed_expert_params(p.model)) * p.options.precision.expert_weight_bytes();
    json per_layer = json::array();
    int64_t dropped_run = 0, moe_run = 0;
    for (int64_t l : p.layers) {
        if (!p.model.is_moe_layer(l)) continue;
        ++moe_run;
        const auto& keep = pr.keep[static_cast<size_t>(l)];
        const auto& share = pr.shares[static_cast<size_t>(l)];
        json dropped = json::array();
        double dropped_share = 0;
        for (size_t e = 0; e < keep.size(); ++e)
            if (!keep[e]) dropped.push_back(e), dropped_share += share[e];
        dropped_run += static_cast<int64_t>(dropped.size());
        per_layer.push_back(
            {{"layer", l}, {"experts_kept", pr.kept(l)}, {"experts_pruned", dropped}, {"pruned_share", dropped_share}});
    }
    const double per_layer_mean = moe_run > 0 ? static_cast<double>(dropped_run) / static_cast<double>(moe_run) : 0.0;
    return {{"prune_below", pr.below},
            {"shares_from", pr.shares_from},
            {"rule",
             "each MoE layer drops its experts with a share of the routing below prune_below; a token never "
             "routes to a dropped expert: each dropped choice goes to the kept expert the layer uses most that "
             "the token has not chosen, with the dropped choice's weight (the workload imposes ids, so the "
             "token's own next-best expert is not known)"},
            {"quality",
             "not measured: pruning changes the model's outputs; this report gives load, time and memory "
             "only"},
            {"per_layer", per_layer},
            {"memory",
             {{"source", "counted"},
              {"expert_bytes", expert_bytes},
              {"basis", "routed-expert parameters x the expert format's bytes per element, per pruned expert"},
              {"freed_bytes_layers_run", expert_bytes * static_cast<double>(dropped_run)},
              {"freed_bytes_model", expert_bytes * per_layer_mean * static_cast<double>(p.model.num_moe_layers())},
              {"model_basis", "the layers run's mean pruned experts per MoE layer, times the model's MoE layers"}}},
            {"compare", fmt::format("load and time against the same point unpruned: moebench sweep {} 0,F ... then "
                                    "compare the two points (expert_load, latency)",
                                    flag_of("prune_below"))}};
}

json expert_load_record(const Prepared& p, const Measured& m, const std::string& source, int64_t T) {
    json layers = json::array();
    for (const MoeLayerSamples& a : m.moe)
        layers.push_back(
            expert_load_layer(a, p.model.moe.num_experts, T, static_cast<int64_t>(m.steps.size()), source));
    if (p.routing_path.statistical)
        return {{"source", "modeled"},
                {"basis",
                 "tokens per expert drawn by the statistical routing path (docs/sim-backend.md): each MoE "
                 "layer's counts drawn once from the workload's shares and repeated in every modeled step; "
                 "no windows or co-activation (they need every token's experts)"},
                {keys::kPerLayer, layers}};
    std::string basis = "final expert ids of the measured steps (after override, soft top-N, capacity)";
    if (!p.workload->overrides_routing() && p.traits.offers(Capability::tensors))
        basis +=
            "; with the router workload every step embeds the same seeded tokens (steps are identical, so "
            "that their times compare), so the counts repeat one step's; use a synthetic workload or a trace "
            "for load over a stream";
    return {{"source", "counted"}, {"basis", basis}, {keys::kPerLayer, layers}};
}

// A brief record's expert load (run field record brief): per MoE layer only its max over mean, summarised over the
// layers; the per-layer table (tokens per expert, Gini, ...) is left out.
json expert_load_brief(const Prepared& p, const Measured& m) {
    double sum = 0, most = 0;
    int64_t n = 0;
    for (const MoeLayerSamples& a : m.moe) {
        const std::vector<int64_t> counts = layer_counts(a, p.model.moe.num_experts);
        int64_t total = 0, top = 0;
        for (int64_t c : counts) total += c, top = std::max(top, c);
        if (total <= 0) continue;
        const double ratio = static_cast<double>(top) * static_cast<double>(counts.size()) / static_cast<double>(total);
        sum += ratio;
        most = std::max(most, ratio);
        ++n;
    }
    return {{"source", p.routing_path.statistical ? "modeled" : "counted"},
            {"basis",
             "record brief: per MoE layer the busiest expert's assignments over the mean, summarised over "
             "the layers (record full has the per-layer table)"},
            {"layers", n},
            {"max_over_mean_mean", n > 0 ? sum / static_cast<double>(n) : 0.0},
            {"max_over_mean_max", most}};
}

json identity_record(const RunConfig& cfg, const Prepared& p, int64_t num_run, bool warn_no_fit) {
    json record;
    record[keys::kStatus] = "ok";
    record[keys::kAxes] = run_axes(cfg);
    record[keys::kAxes]["backend"] = p.traits.name;  // the one that ran ("auto" resolved)
    record[keys::kAxes]["layers"] = num_run;         // 0 (= all) resolved
    record["model"] = p.model.name;
    record["mode"] = to_string(cfg.shape.mode);
    record["batch"] = cfg.shape.batch;
    record["seq_len"] = cfg.shape.mode == Mode::decode ? 1 : cfg.shape.seq_len;
    record["context"] = cfg.shape.mode == Mode::decode ? cfg.shape.context : 0;  // prefill starts from an empty cache
    record["num_tokens"] = cfg.shape.num_tokens();
    record["backend"] = p.traits.name;
    if (!p.backend_note.empty()) record["backend_note"] = p.backend_note;
    const Layout& l = p.options.layout;
    record["layout"] = {{"num_gpus", l.num_gpus()},
                        {"attn_tp", l.attn_tp},
                        {"attn_dp", l.attn_dp},
                        {"moe_tp", l.moe_tp},
                        {"moe_ep", l.moe_ep},
                        {"a2a", to_string(l.a2a)},
                        {"redundant_experts", l.redundant_experts},
                        {"describe", l.describe()}};
    const Precision& pr = p.options.precision;
    record["precision"] = {
        {"dense_weights", to_string(pr.dense_weights)}, {"expert_weights", to_string(pr.expert_weights)},
        {"kv_cache", to_string(pr.kv_cache)},           {"activations", to_string(pr.activations)},
        {"dispatch", to_string(pr.dispatch)},           {"combine", to_string(pr.combine)}};
    if (p.step.fit) {  // modeled: whether it fits the memory of the hardware it models
        record["fits"] = p.step.fit->fits;
        if (!p.step.fit->fits) {
            const std::string fit =
                p.step.fit->what + " (" + p.step.fit->value + "): the modeled times assume it fits; " + p.step.fit->fix;
            record["sim_fit_warning"] = fit;
            if (warn_no_fit)
                std::cerr << ("warning: " + p.traits.name + " (" + find_run_field("allow_no_fit")->flag + "): " + fit +
                              "\n");  // one write: points may run side by side
        }
    }
    return record;
}

// A modeled step's cost and energy per token (docs/report-schema.md, "cost_energy"): the whole model's tokens/s over
// the layout's GPUs, at the profile's price per GPU-hour and board power; the tokens are the step's (decode: output
// tokens, prefill: prompt tokens).
json cost_energy_block(const RunConfig& cfg, const Prepared& p, const json& latency) {
    const std::string profile = cfg.hardware.empty() ? p.traits.default_hardware : cfg.hardware;
    const json* whole = latency.contains(keys::kWholeModel) ? &latency[keys::kWholeModel] : nullptr;
    if (profile.empty() || !whole || !whole->contains(keys::kTokensPerS))
        return {{"source", "modeled"}, {"unavailable", "needs a hardware profile and the whole model's step"}};
    const HardwareProfile hw = load_hardware(profile);
    const double tps = (*whole)[keys::kTokensPerS].get<double>();
    const double gpus = static_cast<double>(p.options.layout.num_gpus());
    json b = {{"source", whole->value("source", std::string("modeled"))},
              {"basis",
               "latency.whole_model.tokens_per_s over num_gpus: usd = price_per_gpu_hour x num_gpus / 3600 / "
               "tokens_per_s x 1e6; joules = tdp_w x num_gpus / tokens_per_s (every board at its TDP); the "
               "tokens are the step's (decode: output tokens, prefill: prompt tokens)"},
              {"num_gpus", p.options.layout.num_gpus()},
              {"price_per_gpu_hour", hw.price_per_gpu_hour > 0 ? json(hw.price_per_gpu_hour) : json(nullptr)},
              {"price_source", hw.price_source},
              {"tdp_w", hw.tdp_w > 0 ? json(hw.tdp_w) : json(nullptr)}};
    b["usd_per_million_tokens"] =
        hw.price_per_gpu_hour > 0 && tps > 0 ? json(hw.price_per_gpu_hour * gpus / 3600.0 / tps * 1e6) : json(nullptr);
    b["joules_per_token"] = hw.tdp_w > 0 && tps > 0 ? json(hw.tdp_w * gpus / tps) : json(nullptr);
    return b;
}

json record_point(const RunConfig& cfg, const Prepared& p, const Measured& m, bool warn_no_fit = true,
                  bool cost_energy = true) {
    const std::string source = p.backend->timing_source();
    const int64_t T = cfg.shape.num_tokens(), num_steps = static_cast<int64_t>(m.steps.size());
    const int64_t num_run = static_cast<int64_t>(p.layers.size());
    const bool detail = cfg.record == "full";
    const Latency latency = derive_latency(p.model, p.layers, p.plan, m.steps, source, cfg.include_lm_head, T, detail);
    const json backend_info = p.backend->describe();

    json record = identity_record(cfg, p, num_run, warn_no_fit);
    record[keys::kBackendInfo] = backend_info;
    record["seed"] = cfg.options.seed;
    json kinds = json::array();
    for (int64_t l : p.layers) kinds.push_back(p.model.is_moe_layer(l) ? "moe" : "dense");
    double measured_s = 0;
    for (const StepTimes& s : m.steps) measured_s += s.wall_us * 1e-6;
    const bool extrapolated = num_run != p.model.num_layers;
    record["layers"] = {
        {"run", p.layers}, {"model_total", p.model.num_layers}, {"kinds", kinds}, {"extrapolated", extrapolated}};
    if (source == "measured")
        record[keys::kIterations] = {
            {"warmup", cfg.warmup},          {"measured", num_steps}, {"stop_reason", m.stop_reason},
            {"measured_time_s", measured_s}, {"noise", m.noise},      {"noise_rule", kNoiseRule}};
    else  // modeled steps (sim): nothing was measured, and a model has no measurement noise
        record[keys::kIterations] = {
            {"warmup", cfg.warmup}, {"measured", 0}, {"modeled", num_steps}, {"stop_reason", m.stop_reason}};
    record[keys::kLatency] = latency.block;
    record[keys::kConditions] = m.conditions;
    record[keys::kThroughput] = {
        {"source", source},
        {keys::kTokensPerS, latency.step.mean_us > 0 ? static_cast<double>(T) / (latency.step.mean_us * 1e-6) : 0.0},
        {"basis", "num_tokens / mean end-to-end step time of the layers run"}};
    if (!p.traits.measures && cost_energy) record["cost_energy"] = cost_energy_block(cfg, p, latency.block);
    record[keys::kExpertLoad] = detail ? expert_load_record(p, m, source, T) : expert_load_brief(p, m);
    if (p.pruning) record["pruning"] = pruning_record(p);
    if (p.model.is_moe_model()) {
        record[keys::kExpertLoad]["balance"] = load_balance_record(p, m);
        if (cfg.max_cv > 0 || cfg.min_balancedness > 0)
            record["load_gates"] = load_gates_record(cfg, record[keys::kExpertLoad]["balance"]);
    }
    json routing_layers = json::array();
    for (const MoeLayerSamples& a : m.moe)
        if (detail && !a.ids.empty()) routing_layers.push_back(routing_layer(a, p.model.moe.num_experts, cfg.shape));
    record["routing"] = routing_record(cfg, p, backend_info, std::move(routing_layers));
    if (cfg.check && !m.moe.empty()) record["check"] = check_point(cfg, p, m);
    try {
        WorkBasis basis{p.options.precision, p.step.mla_form, p.traits.name};
        basis.dispatch_row_bytes = dispatch_row_bytes(p.options.precision.dispatch, p.model.hidden_size);
        if (p.options.layout.moe_ep > 1) {  // the all-to-alls as the run moves them
            basis.placement = &p.placement;
            basis.a2a_dedup = p.options.layout.a2a == A2aMode::dedup;
        }
        record[keys::kRoofline] = roofline_block(p.model, cfg.shape, p.options.layout, basis, source, p.plan, m.steps,
                                                 m.moe, latency.phase_stats, p.ceilings);
    } catch (const Error& e) {
        record[keys::kRoofline] = {{"source", "counted"}, {"unavailable", e.what()}};
    }
    return record;
}

// busbw of each exchange against the link of a hardware profile (--hardware): its scale-up link when every rank
// shares one host, else its network.
json link_peak_block(const RunConfig& cfg, const json& traffic) {
    if (cfg.hardware.empty())
        return {{"available", false},
                {"why", "no " + flag_of("hardware") + " profile: give one to compare busbw with its link"}};
    const HardwareProfile hw = load_hardware(cfg.hardware);
    const bool one_host = traffic["inter_node_bytes"].get<double>() == 0;
    const double peak = one_host ? (hw.scaleup_bw_bytes_per_s > 0 ? hw.scaleup_bw_bytes_per_s : hw.pcie_bw_bytes_per_s)
                                 : hw.network_bw_bytes_per_s;
    if (!(peak > 0)) return {{"available", false}, {"why", "hardware " + hw.name + " has no bandwidth for this link"}};
    const auto pct = [&](const char* which) {
        return 100.0 * traffic["bandwidth"][which]["busbw_gbps"].get<double>() * 1e9 / peak;
    };
    return {{"available", true},
            {"hardware", hw.name},
            {"link", one_host ? (hw.scaleup_name.empty() ? "scale-up" : hw.scaleup_name) : "network"},
            {"peak_gbps", peak / 1e9},
            {"dispatch_busbw_pct", pct("dispatch")},
            {"combine_busbw_pct", pct("combine")}};
}

// Expert parallelism over processes: every rank's measurement to rank 0, which records the job (the other ranks
// return their own record, which nothing writes).
json record_ranks(const RunConfig& cfg, const Prepared& p, Measured m) {
    Communicator& comm = *p.comm;
    RankMeasurement mine;
    mine.rank = comm.rank();
    mine.host = comm.host_name();
    mine.tokens = tokens_on_rank(cfg.shape, comm.rank(), comm.world_size());
    mine.experts = p.placement.experts_on_rank[static_cast<size_t>(comm.rank())];
    mine.steps = m.steps;
    mine.moe = m.moe;
    const ScopedCommContext gathering("gathering every rank's measurements at rank 0");
    MergedRanks merged = gather_ranks(comm, mine);
    if (comm.rank() != 0) return record_point(cfg, p, m);
    m.steps = merged.steps;
    m.moe = merged.moe;
    json record = record_point(cfg, p, m);
    std::vector<std::string> hosts;
    for (const RankMeasurement& r : merged.ranks) hosts.push_back(r.host);
    record["ranks"] = ranks_block(merged, p.plan, comm, p.options, p.placement.source);
    const json info = p.backend->describe();  // "auto" dispatch dtype as the backend resolved it
    if (info.contains("expert_parallel")) record["ranks"]["dispatch_dtype"] = info["expert_parallel"]["dispatch_dtype"];
    record["traffic"] = traffic_block(merged, hosts);
    record["traffic"]["bandwidth"]["link_peak"] = link_peak_block(cfg, record["traffic"]);
    return record;
}

}  // namespace

std::vector<std::string> crossed_load_gates(const json& record) {
    std::vector<std::string> out;
    if (!record.is_object() || !record.contains("load_gates") || !record["load_gates"].is_array()) return out;
    for (const json& g : record["load_gates"])
        if (g.is_object() && g.value("crossed", false)) out.push_back(g.value("message", std::string("a load gate")));
    return out;
}

json run_point(const RunConfig& given) { return run_point(given, PointOptions{}); }

json run_point(const RunConfig& given, const PointOptions& options) {
    RunConfig cfg = given;
    validate_run(cfg);
    Prepared p = prepare_point(cfg);
    Measured m = measure_point(cfg, p);
    if (p.comm) return record_ranks(cfg, p, std::move(m));
    return record_point(cfg, p, m, options.warn_no_fit, options.cost_energy);
}

}  // namespace moebench
