// SPDX-License-Identifier: Apache-2.0
// The documents of `moebench deploy` (docs/deploy.md): the formulas live in steady_state.cpp (aggregated) and here
// (fit, cost, energy, search, disaggregated pools); the steps come from the sim through step_pricer.cpp.
#include "serving/deploy.hpp"

#include "backends/registry.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/host_cpus.hpp"
#include "config/hardware.hpp"
#include "config/layout_request.hpp"
#include "config/model_config.hpp"
#include "config/run_fields.hpp"
#include "core/phase.hpp"
#include "harness/validate.hpp"
#include "model/memory_plan.hpp"
#include "serving/steady_state.hpp"
#include "serving/step_pricer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <thread>

namespace moebench {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The flag that spells one of deploy's fields (isl, concurrency, ...: cli/flag_names.cpp) or a run field.
std::string flag(const char* key) { return flag_of(key); }

// What the figures leave out; every point document says so.
const std::vector<std::string>& assumptions() {
    static const std::vector<std::string> a = {
        "steps priced by the sim backend (docs/sim-backend.md): no overlap of communication with compute, no CUDA "
        "graphs or launch savings beyond its per-phase overhead, no scheduler or sampling overhead between steps",
        "a request's time outside the steps (HTTP, tokenizing, scheduling, streaming the first token) is " +
            flag_of("request_overhead_ms") + ", added to TTFT as given (default 0: not modeled)",
        "steady state: every request is replaced by a new one when it finishes (closed loop, C in flight); no "
        "speculative decoding, no MTP, no prefix caching, no preemption",
        "decode contexts spread uniformly over isl .. isl + osl, priced at their mean (isl + osl / 2)",
        "a prompt chunk's attention is its share of the whole prompt's causal attention (chunks of one prompt see, "
        "together, its pairs); its other phases as decode tokens of the same step",
        "energy: every GPU at its board power (tdp_w) the whole time; cost: price_per_gpu_hour x GPUs",
    };
    return a;
}

json sources_json(bool disagg) {
    json s = {{"ttft_ms", "modeled"},
              {"tpot_ms", "modeled"},
              {"tpot_p90_ms", "modeled"},
              {"output_tokens_per_s_per_gpu", "modeled"},
              {"output_tokens_per_s_per_user", "modeled"},
              {"input_tokens_per_s_per_gpu", "modeled"},
              {"memory_per_gpu_bytes", "counted"},
              {"fits", "counted"},
              {"phase_groups_us", "modeled"},
              {"usd_per_million_output_tokens", "modeled"},
              {"joules_per_output_token", "modeled"}};
    if (disagg) s["kv_transfer_ms"] = "modeled";
    return s;
}

struct Deployment {
    RunConfig cfg;  // validated, the sim's
    ModelConfig model;
    HardwareProfile hw;
    Layout layout;
    Precision precision;
};

Deployment resolve_deployment(RunConfig base) {
    base.backend = "sim";
    if (base.hardware.empty()) base.hardware = kDefaultHardware;
    validate_run(base);
    Deployment d;
    d.model = load_model(base.model);
    d.hw = load_hardware(base.hardware);
    d.layout = resolve_layout(base.layout);
    check_layout_for_model(d.model, d.layout);
    const BackendTraits* sim = find_backend_traits("sim");
    check_backend_accepts(*sim, base);
    d.precision = resolved_options(base, *sim).precision;
    d.cfg = std::move(base);
    return d;
}

MemoryPlan deployment_memory(const Deployment& d, int64_t sequences, int64_t context) {
    PlanInput in;
    in.precision = d.precision;
    in.layout = d.layout;
    in.batch = sequences;
    in.context = context;
    return plan_memory(d.model, d.hw, in);
}

double memory_per_gpu(const MemoryPlan& p) { return p.weights_bytes + p.kv_cache_bytes + p.activation_bytes; }

// A refusal in deploy's words: the run's batch / context (as fit_advice spells them, from the run field table) are
// deploy's concurrency / isl + osl.
std::string deploy_words(std::string s) {
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{find_run_field("batch")->flag, flag("concurrency")},
          {find_run_field("context")->flag, flag("isl") + "/" + flag("osl")},
          {"; batch ", "; concurrency "}}) {
        for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
            s.replace(at, from.size(), to);
    }
    return s;
}

void refuse_no_fit(const Deployment& d, int64_t sequences, int64_t context, const MemoryPlan& plan,
                   const std::string& pool) {
    PlanInput in;
    in.precision = d.precision;
    in.layout = d.layout;
    in.batch = sequences;
    in.context = context;
    const FitAdvice a = fit_advice(d.model, d.hw, in, plan);
    config_error(
        deploy_words(a.field), pool + deploy_words(a.what), deploy_words(a.value),
        deploy_words(a.fix) + "; or " + flag("allow_no_fit") + " to model it anyway (the document says fits: false)");
}

json layout_json(const Layout& l) {
    return {{"num_gpus", l.num_gpus()},
            {"tp", l.attn_tp},
            {"attention_dp", l.attn_dp},
            {"moe_tp", l.moe_tp},
            {"moe_ep", l.moe_ep},
            {"a2a", to_string(l.a2a)},
            {"redundant_experts", l.redundant_experts},
            {"describe", l.describe()}};
}

json groups_json(const PhaseTimes& t) {
    std::array<double, kNumServingGroups> g{};
    for (const PhaseInfo& row : kPhaseTable)
        g[static_cast<size_t>(row.serving)] += t.us[static_cast<size_t>(row.phase)];
    json j = json::object();
    for (int i = 0; i < kNumServingGroups; ++i) j[std::string(kServingGroupNames[static_cast<size_t>(i)])] = g[i];
    return j;
}

json nullable(double v, bool available) { return available ? json(v) : json(nullptr); }

// Cost and energy of `gpus` GPUs delivering `output_tokens_per_s`, into `doc`.
void add_cost_energy(json& doc, const HardwareProfile& hw, const std::optional<double>& price_override, int64_t gpus,
                     double output_tokens_per_s) {
    const bool overridden = price_override.has_value();
    const double price = overridden ? *price_override : hw.price_per_gpu_hour;
    doc["price_per_gpu_hour"] = price > 0 ? json(price) : json(nullptr);
    doc["price_source"] = overridden ? flag("price") : hw.price_source.empty() ? std::string("none") : hw.price_source;
    const bool rate = output_tokens_per_s > 0 && std::isfinite(output_tokens_per_s);
    doc["usd_per_million_output_tokens"] =
        nullable(price * static_cast<double>(gpus) / 3600.0 / output_tokens_per_s * 1e6, price > 0 && rate);
    doc["tdp_w"] = hw.tdp_w > 0 ? json(hw.tdp_w) : json(nullptr);
    doc["joules_per_output_token"] =
        nullable(hw.tdp_w * static_cast<double>(gpus) / output_tokens_per_s, hw.tdp_w > 0 && rate);
    doc["energy_basis"] = "board power: every GPU at tdp_w the whole time (an upper bound of the draw; modeled)";
}

json precision_json(const Precision& pr) {
    return {{"dense_weights", to_string(pr.dense_weights)},
            {"expert_weights", to_string(pr.expert_weights)},
            {"kv_cache", to_string(pr.kv_cache)},
            {"activations", to_string(pr.activations)},
            {"dispatch", to_string(pr.dispatch)}};
}

// The figures of one aggregated point (fit already decided), without the document's framing.
json aggregated_figures(const Deployment& d, const DeployRequest& r, const MemoryPlan& plan, SimStepPricer& pricer) {
    const ServingLoad load{r.isl, r.osl, r.concurrency, r.max_prefill_tokens};
    const SteadyState s = steady_state(load, [&](int64_t dec, int64_t pre) { return pricer.mixed(dec, pre); });
    const int64_t gpus = d.layout.num_gpus();
    json j;
    j["hardware"] = d.hw.name;
    j["num_gpus"] = gpus;
    j["layout"] = layout_json(d.layout);
    j["concurrency"] = r.concurrency;
    j["ttft_ms"] = s.ttft_us / 1e3 + r.request_overhead_ms;
    j["tpot_ms"] = s.tpot_us / 1e3;
    j["tpot_p90_ms"] = s.tpot_p90_us / 1e3;
    j["output_tokens_per_s_per_gpu"] = s.output_tokens_per_s / static_cast<double>(gpus);
    j["output_tokens_per_s_per_user"] = 1000.0 / (s.tpot_us / 1e3);
    j["input_tokens_per_s_per_gpu"] = s.input_tokens_per_s / static_cast<double>(gpus);
    j["memory_per_gpu_bytes"] = memory_per_gpu(plan);
    j["memory_capacity_bytes"] = d.hw.memory_bytes;
    j["fits"] = plan.fits;
    j["phase_groups_us"] = groups_json(s.mean_step);
    add_cost_energy(j, d.hw, r.price_per_gpu_hour, gpus, s.output_tokens_per_s);
    j["cycle"] = {{"steps", s.steps},
                  {"prefill_steps", s.prefill_steps},
                  {"last_chunk_tokens", s.last_chunk_tokens},
                  {"decode_batch", s.decode_batch},
                  {"decode_context", pricer.decode_context()},
                  {"prefill_tokens_per_cycle", r.concurrency * r.isl},
                  {"prefill_bound", s.prefill_bound},
                  {"queue_ms", s.queue_us / 1e3},
                  {"decode_step_ms", s.decode_step_us / 1e3},
                  {"full_chunk_step_ms", s.full_chunk_step_us / 1e3},
                  {"last_chunk_step_ms", s.last_chunk_step_us / 1e3},
                  {"cycle_ms", s.cycle_us / 1e3}};
    return j;
}

json document_head(const std::string& kind, const DeployRequest& r, const std::string& model) {
    return {{"schema", kDeploySchema},
            {"kind", kind},
            {"model", model},
            {"isl", r.isl},
            {"osl", r.osl},
            {"max_prefill_tokens", r.max_prefill_tokens},
            {"request_overhead_ms", r.request_overhead_ms},
            {"routing", r.base.routing}};
}

void check_load(const DeployRequest& r) {
    const auto positive = [](const char* key, int64_t v, const char* what, const char* example) {
        if (v < 1)
            config_error(flag(key), "must be at least 1", std::to_string(v),
                         fmt::format("give {}, e.g. {} {}", what, flag(key), example));
    };
    positive("isl", r.isl, "the prompt tokens per request", "1024");
    positive("osl", r.osl, "the output tokens per request", "1024");
    positive("concurrency", r.concurrency, "the requests in flight", "64");
    positive("max_prefill_tokens", r.max_prefill_tokens, "the prompt tokens a step may carry", "8192");
    constexpr int64_t kMaxTokens = int64_t{1} << 24;
    for (const auto& [key, v] : {std::pair<const char*, int64_t>{"isl", r.isl},
                                 {"osl", r.osl},
                                 {"concurrency", r.concurrency},
                                 {"max_prefill_tokens", r.max_prefill_tokens}})
        if (v > kMaxTokens)
            config_error(flag(key), fmt::format("is beyond {} (2^24)", kMaxTokens), std::to_string(v),
                         "use a smaller value");
    if (!(r.request_overhead_ms >= 0 && r.request_overhead_ms <= 1e6))
        config_error(flag("request_overhead_ms"), "must be a number of ms from 0 to 1e6",
                     fmt::format("{}", r.request_overhead_ms),
                     "give the server's own time per request, e.g. the TTFT of a short prompt at concurrency 1 "
                     "minus its prefill: " +
                         flag("request_overhead_ms") + " 100");
    if (r.price_per_gpu_hour && !(*r.price_per_gpu_hour >= 0 && std::isfinite(*r.price_per_gpu_hour)))
        config_error(flag("price"), "must be a finite number of USD per GPU-hour, >= 0",
                     fmt::format("{}", *r.price_per_gpu_hour), "e.g. " + flag("price") + " 2.5");
}

}  // namespace

json deploy_point(const DeployRequest& r) {
    check_load(r);
    const Deployment d = resolve_deployment(r.base);
    const MemoryPlan plan = deployment_memory(d, r.concurrency, r.isl + r.osl);
    if (!plan.fits && !r.base.allow_no_fit) refuse_no_fit(d, r.concurrency, r.isl + r.osl, plan, "");
    SimStepPricer pricer(d.cfg, r.isl, r.osl);
    json doc = document_head("point", r, d.model.name);
    doc.update(aggregated_figures(d, r, plan, pricer));
    doc["precision"] = precision_json(d.precision);
    doc["sources"] = sources_json(false);
    doc["assumptions"] = assumptions();
    return doc;
}

std::vector<LayoutRequest> candidate_layouts(const ModelConfig& model, int64_t gpus) {
    std::vector<LayoutRequest> out;
    for (int64_t tp = 1; tp <= gpus; ++tp) {
        if (gpus % tp != 0) continue;
        for (int64_t moe_tp = 1; moe_tp <= gpus; ++moe_tp) {
            if (gpus % moe_tp != 0) continue;
            LayoutRequest req;
            req.tp = tp;
            req.attention_dp = gpus / tp;
            req.moe_tp = moe_tp;
            req.moe_ep = gpus / moe_tp;
            try {
                check_layout_for_model(model, resolve_layout(req));
            } catch (const ConfigError&) {
                continue;  // the sizes do not divide this model's heads, experts or widths
            }
            out.push_back(req);
        }
    }
    return out;
}

std::vector<size_t> pareto_frontier(const std::vector<std::pair<double, double>>& points) {
    std::vector<size_t> order(points.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    // x descending, then y descending: a point is on the frontier when its y beats every y seen before it.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (points[a].first != points[b].first) return points[a].first > points[b].first;
        return points[a].second > points[b].second;
    });
    std::vector<size_t> front;
    double best_y = -std::numeric_limits<double>::infinity();
    for (size_t i : order)
        if (points[i].second > best_y) {
            front.push_back(i);
            best_y = points[i].second;
        }
    std::reverse(front.begin(), front.end());
    return front;
}

json deploy_search(const SearchRequest& r) {
    const auto start = std::chrono::steady_clock::now();
    DeployRequest probe = r.base;
    probe.concurrency = r.concurrency.empty() ? 1 : r.concurrency.front();
    check_load(probe);
    for (int64_t c : r.concurrency) {
        probe.concurrency = c;
        check_load(probe);
    }
    for (int64_t g : r.gpus)
        if (g < 1 || g > kMaxLayoutGpus)
            config_error(flag("gpus"), fmt::format("must be between 1 and {}", kMaxLayoutGpus), std::to_string(g),
                         "e.g. " + flag("gpus") + " 8,16");
    if (!(r.ttft_ms_limit >= 0 && std::isfinite(r.ttft_ms_limit)))
        config_error(flag("ttft_ms"), "must be a finite number of ms >= 0 (0 = no limit)",
                     fmt::format("{}", r.ttft_ms_limit), "e.g. " + flag("ttft_ms") + " 2000");
    if (!(r.tpot_ms_limit >= 0 && std::isfinite(r.tpot_ms_limit)))
        config_error(flag("tpot_ms"), "must be a finite number of ms >= 0 (0 = no limit)",
                     fmt::format("{}", r.tpot_ms_limit), "e.g. " + flag("tpot_ms") + " 50");
    const ModelConfig model = load_model(r.base.base.model);
    // One task per (hardware, layout): its concurrencies share one pricer (the prompt's prefill, the decode steps).
    struct Task {
        RunConfig cfg;
        std::vector<json> points;
        int64_t no_fit = 0, steps_priced = 0;
        std::exception_ptr error;
    };
    std::vector<Task> tasks;
    for (const std::string& hw_name : r.hardware)
        for (int64_t gpus : r.gpus)
            for (const LayoutRequest& lr : candidate_layouts(model, gpus)) {
                Task t;
                t.cfg = r.base.base;
                t.cfg.hardware = hw_name;
                t.cfg.layout.ep = 1;
                t.cfg.layout.tp = lr.tp;
                t.cfg.layout.attention_dp = lr.attention_dp;
                t.cfg.layout.moe_tp = lr.moe_tp;
                t.cfg.layout.moe_ep = lr.moe_ep;
                tasks.push_back(std::move(t));
            }
    const auto run_task = [&](Task& t) {
        try {
            const Deployment d = resolve_deployment(t.cfg);
            std::unique_ptr<SimStepPricer> pricer;
            for (int64_t c : r.concurrency) {
                DeployRequest dr = r.base;
                dr.concurrency = c;
                const MemoryPlan plan = deployment_memory(d, c, dr.isl + dr.osl);
                if (!plan.fits) {  // left out (and counted)
                    ++t.no_fit;
                    continue;
                }
                if (!pricer) pricer = std::make_unique<SimStepPricer>(d.cfg, dr.isl, dr.osl);
                t.points.push_back(aggregated_figures(d, dr, plan, *pricer));
            }
            if (pricer) t.steps_priced = pricer->steps_priced();
        } catch (...) {
            t.error = std::current_exception();
        }
    };
    // Side by side: every point is modeled (nothing is timed on this host), and run_point runs points in parallel
    // as a sweep's --jobs does.
    const size_t workers =
        std::max<size_t>(1, std::min<size_t>(tasks.size(), static_cast<size_t>(std::max<int64_t>(1, usable_cpus()))));
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (size_t w = 1; w < workers; ++w)
        pool.emplace_back([&] {
            for (size_t i = next++; i < tasks.size(); i = next++) run_task(tasks[i]);
        });
    for (size_t i = next++; i < tasks.size(); i = next++) run_task(tasks[i]);
    for (std::thread& th : pool) th.join();
    json points = json::array();
    int64_t layouts_tried = 0, steps_priced = 0, no_fit = 0;
    for (Task& t : tasks) {
        if (t.error) std::rethrow_exception(t.error);  // the first in order: a bad flag fails the same every time
        ++layouts_tried;
        steps_priced += t.steps_priced;
        no_fit += t.no_fit;
        for (json& p : t.points) points.push_back(std::move(p));
    }
    // The frontier of each hardware: output tokens/s/GPU against tokens/s/user.
    json frontier = json::object();
    for (const std::string& hw_name : r.hardware) {
        std::vector<size_t> idx;
        std::vector<std::pair<double, double>> xy;
        for (size_t i = 0; i < points.size(); ++i)
            if (points[i]["hardware"] == load_hardware(hw_name).name) {
                idx.push_back(i);
                xy.emplace_back(points[i]["output_tokens_per_s_per_user"].get<double>(),
                                points[i]["output_tokens_per_s_per_gpu"].get<double>());
            }
        json f = json::array();
        for (size_t k : pareto_frontier(xy)) {
            f.push_back(idx[k]);
            points[idx[k]]["on_frontier"] = true;
        }
        frontier[load_hardware(hw_name).name] = f;
    }
    // The best point under the limits: the most output tokens/s/GPU.
    long best = -1;
    for (size_t i = 0; i < points.size(); ++i) {
        const json& p = points[i];
        if (r.ttft_ms_limit > 0 && p["ttft_ms"].get<double>() > r.ttft_ms_limit) continue;
        if (r.tpot_ms_limit > 0 && p["tpot_ms"].get<double>() > r.tpot_ms_limit) continue;
        if (best < 0 || p["output_tokens_per_s_per_gpu"].get<double>() >
                            points[static_cast<size_t>(best)]["output_tokens_per_s_per_gpu"].get<double>())
            best = static_cast<long>(i);
    }
    json doc = document_head("search", r.base, model.name);
    doc["gpus"] = r.gpus;
    doc["hardware"] = r.hardware;
    doc["concurrency"] = r.concurrency;
    doc["points"] = std::move(points);
    doc["frontier"] = frontier;
    doc["limits"] = {{"ttft_ms", r.ttft_ms_limit > 0 ? json(r.ttft_ms_limit) : json(nullptr)},
                     {"tpot_ms", r.tpot_ms_limit > 0 ? json(r.tpot_ms_limit) : json(nullptr)}};
    doc["best"] = best >= 0 ? json(best) : json(nullptr);
    if (best < 0)
        doc["none_fits"] = doc["points"].empty()
                               ? "no layout of these GPU counts fits the model at these concurrencies"
                               : fmt::format(
                                     "no point meets the limits (ttft_ms <= {}, tpot_ms <= {}); loosen them "
                                     "or add GPUs",
                                     r.ttft_ms_limit > 0 ? fmt::format("{}", r.ttft_ms_limit) : "any",
                                     r.tpot_ms_limit > 0 ? fmt::format("{}", r.tpot_ms_limit) : "any");
    doc["search"] = {{"layouts", layouts_tried},
                     {"points_not_fitting", no_fit},
                     {"steps_priced", steps_priced},
                     {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()}};
    doc["precision_request"] = {{"dtype", r.base.base.precision.dtype},
                                {"expert_dtype", r.base.base.precision.expert_dtype},
                                {"kv_dtype", r.base.base.precision.kv_dtype}};
    doc["sources"] = sources_json(false);
    doc["assumptions"] = assumptions();
    return doc;
}

LayoutRequest parse_compact_layout(const std::string& text, const std::string& flag) {
    LayoutRequest req;
    if (text.empty()) config_error(flag, "is empty", "", "give key=value pairs, e.g. tp=8,ep=8");
    size_t start = 0;
    while (start <= text.size()) {
        const size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const size_t eq = item.find('=');
        const std::string key = eq == std::string::npos ? item : item.substr(0, eq);
        const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
        int64_t* field = key == "ep"                  ? &req.ep
                         : key == "tp"                ? &req.tp
                         : key == "attention_dp"      ? &req.attention_dp
                         : key == "moe_tp"            ? &req.moe_tp
                         : key == "moe_ep"            ? &req.moe_ep
                         : key == "redundant_experts" ? &req.redundant_experts
                                                      : nullptr;
        if (!field)
            config_error(
                flag, "has an unknown layout key", item,
                "use key=value pairs of ep, tp, attention_dp, moe_tp, moe_ep, redundant_experts (e.g. tp=8,ep=8)");
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(value, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != value.size() || v < (key == "redundant_experts" ? 0 : 1))
            config_error(flag, "needs a whole number for " + key, item, "e.g. " + key + "=8");
        *field = v;
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return req;
}

json deploy_disagg(const DisaggRequest& r) {
    check_load(r.base);
    const auto pool = [&](const LayoutRequest& lr, int64_t gpus, const std::string& flag_gpus,
                          const std::string& flag_layout) {
        if (gpus < 1)
            config_error(flag_gpus, "must be at least 1", std::to_string(gpus), "give the pool's GPUs, e.g. 8");
        RunConfig cfg = r.base.base;
        cfg.layout.ep = lr.ep;
        cfg.layout.tp = lr.tp;
        cfg.layout.attention_dp = lr.attention_dp;
        cfg.layout.moe_tp = lr.moe_tp;
        cfg.layout.moe_ep = lr.moe_ep;
        cfg.layout.redundant_experts = lr.redundant_experts;
        Deployment d = resolve_deployment(cfg);
        if (d.layout.num_gpus() != gpus)
            config_error(flag_layout, fmt::format("makes {} GPUs, the pool has {}", d.layout.num_gpus(), gpus),
                         d.layout.describe(), fmt::format("give a layout of {} GPUs (e.g. ep={})", gpus, gpus));
        return d;
    };
    const Deployment pre = pool(r.prefill_layout, r.prefill_gpus, flag("prefill_gpus"), flag("prefill_layout"));
    const Deployment dec = pool(r.decode_layout, r.decode_gpus, flag("decode_gpus"), flag("decode_layout"));
    const int64_t I = r.base.isl, O = r.base.osl, C = r.base.concurrency, B = r.base.max_prefill_tokens;
    // The prefill pool holds the prompts of one step (whole prompts when they fit the budget) at I tokens each.
    const int64_t prompts_per_step = std::max<int64_t>(1, B / I);
    const MemoryPlan pre_plan = deployment_memory(pre, prompts_per_step, I);
    const MemoryPlan dec_plan = deployment_memory(dec, C, I + O);
    if (!pre_plan.fits && !r.base.base.allow_no_fit)
        refuse_no_fit(pre, prompts_per_step, I, pre_plan, "prefill pool: ");
    if (!dec_plan.fits && !r.base.base.allow_no_fit) refuse_no_fit(dec, C, I + O, dec_plan, "decode pool: ");

    SimStepPricer pp(pre.cfg, I, O), dp(dec.cfg, I, O);
    // TTFT: the prompt's chunks on an unloaded prefill pool, then its KV cache over the network to the decode pool.
    const int64_t k = ceil_div(I, B);
    double prefill_us = pp.mixed(0, I - (k - 1) * B).total_us();
    if (k > 1) prefill_us += static_cast<double>(k - 1) * pp.mixed(0, B).total_us();
    // The pool's input rate at full load: steps of whole prompts (or chunks of B).
    const double step_tokens = I <= B ? static_cast<double>(prompts_per_step * I) : static_cast<double>(I);
    const double step_us = I <= B ? pp.mixed(0, prompts_per_step * I).total_us() : prefill_us;
    const double prefill_input_per_s = step_tokens / (step_us * 1e-6);
    // The request's KV cache: every GPU of the prefill side sends its share over its own network link.
    const bool network = pre.hw.network_bw_bytes_per_s > 0;
    const double link_bw = network ? pre.hw.network_bw_bytes_per_s : pre.hw.scaleup_bw_bytes_per_s;
    const double kv_bytes_per_gpu = static_cast<double>(I) * pre_plan.kv_bytes_per_token_per_gpu;
    const double kv_us = link_bw > 0 ? kv_bytes_per_gpu / link_bw * 1e6 : 0;

    // Decode pool: C sequences decoding, pure decode steps. Arrivals: the slower of the two pools' rates.
    double tpot_us = dp.decode(C).total_us();
    const double decode_requests_per_s = static_cast<double>(C) / (tpot_us * 1e-6) / static_cast<double>(O);
    const double prefill_requests_per_s = prefill_input_per_s / static_cast<double>(I);
    const bool prefill_caps = prefill_requests_per_s < decode_requests_per_s;
    const double requests_per_s = std::min(decode_requests_per_s, prefill_requests_per_s);
    int64_t decode_batch = C;
    if (prefill_caps) {
        // Fewer sequences decode: Little's law on the decode pool at the capped arrivals, D = arrivals x O x TPOT(D),
        // iterated to its fixed point (TPOT falls with D; a few rounds settle it, a cycle between two stops).
        for (int round = 0; round < 32; ++round) {
            const int64_t next = std::max<int64_t>(
                1, std::min<int64_t>(C, std::llround(requests_per_s * static_cast<double>(O) * tpot_us * 1e-6)));
            if (next == decode_batch) break;
            decode_batch = next;
            tpot_us = dp.decode(decode_batch).total_us();
        }
    }
    const PhaseTimes dec_step = dp.decode(decode_batch);
    const int64_t gpus = r.prefill_gpus + r.decode_gpus;
    const double out_per_s = requests_per_s * static_cast<double>(O);

    json doc = document_head("disagg", r.base, dec.model.name);
    doc["hardware"] = dec.hw.name;
    doc["num_gpus"] = gpus;
    doc["concurrency"] = C;
    doc["ttft_ms"] = (prefill_us + kv_us) / 1e3 + r.base.request_overhead_ms;
    doc["tpot_ms"] = tpot_us / 1e3;
    doc["tpot_p90_ms"] = tpot_us / 1e3;  // every decode step of the pool is the same
    doc["output_tokens_per_s_per_gpu"] = out_per_s / static_cast<double>(gpus);
    doc["output_tokens_per_s_per_user"] = 1000.0 / (tpot_us / 1e3);
    doc["input_tokens_per_s_per_gpu"] = requests_per_s * static_cast<double>(I) / static_cast<double>(gpus);
    doc["memory_per_gpu_bytes"] = std::max(memory_per_gpu(pre_plan), memory_per_gpu(dec_plan));
    doc["memory_capacity_bytes"] = dec.hw.memory_bytes;
    doc["fits"] = pre_plan.fits && dec_plan.fits;
    doc["phase_groups_us"] = groups_json(dec_step);
    doc["kv_transfer_ms"] = kv_us / 1e3;
    add_cost_energy(doc, dec.hw, r.base.price_per_gpu_hour, gpus, out_per_s);
    doc["prefill_pool"] = {{"gpus", r.prefill_gpus},
                           {"layout", layout_json(pre.layout)},
                           {"prompt_ms", prefill_us / 1e3},
                           {"input_tokens_per_s", prefill_input_per_s},
                           {"requests_per_s", prefill_requests_per_s},
                           {"memory_per_gpu_bytes", memory_per_gpu(pre_plan)},
                           {"fits", pre_plan.fits},
                           {"phase_groups_us", groups_json(pp.mixed(0, I - (k - 1) * B))}};
    doc["decode_pool"] = {{"gpus", r.decode_gpus},
                          {"layout", layout_json(dec.layout)},
                          {"decode_batch", decode_batch},
                          {"decode_context", dp.decode_context()},
                          {"requests_per_s", decode_requests_per_s},
                          {"memory_per_gpu_bytes", memory_per_gpu(dec_plan)},
                          {"fits", dec_plan.fits}};
    doc["balance"] = prefill_caps ? "the prefill pool's input rate caps arrivals: the decode pool runs fewer than " +
                                        flag("concurrency") + " sequences (decode_pool.decode_batch)"
                                  : "the decode pool's rate caps arrivals: the prefill pool idles part of the time";
    doc["kv_transfer"] = {{"bytes_per_gpu", kv_bytes_per_gpu},
                          {"link", network ? "network" : "scale-up (the profile has no network)"},
                          {"link_bytes_per_s", link_bw}};
    doc["precision"] = precision_json(dec.precision);
    doc["sources"] = sources_json(true);
    doc["assumptions"] = assumptions();
    return doc;
}

}  // namespace moebench
