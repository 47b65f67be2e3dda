// SPDX-License-Identifier: Apache-2.0
// RunConfig <-> JSON (docs/run-schema.md) and validation. Field names double as the command-line flag names,
// so every error names both ("batch (--batch)").
#include "config/run_config.hpp"

#include "common/did_you_mean.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/overloaded.hpp"
#include "config/run_fields.hpp"

#include <cmath>
#include <cstdlib>
#include <set>
#include <variant>

namespace moebench {

namespace {

std::string label(const std::string& path, const std::string& key) { return run_field_label(path, key); }

}  // namespace

Mode parse_mode(const std::string& s, const std::string& field) {
    if (s == "decode") return Mode::decode;
    if (s == "prefill") return Mode::prefill;
    config_error(field, "unknown mode", s, "use decode or prefill");
}

uint64_t parse_seed(int64_t seed, const std::string& field) {
    if (seed < 0) config_error(field, "must not be negative", std::to_string(seed), "use a value >= 0");
    return static_cast<uint64_t>(seed);
}

double parse_rank_timeout(const std::string& text, const std::string& field) {
    if (text == "auto") return 0;
    const std::string fix = "use auto (max(30 s, 5 x the slowest step so far)) or seconds, e.g. 60";
    const char* begin = text.c_str();
    char* end = nullptr;
    const double s = std::strtod(begin, &end);
    if (text.empty() || end != begin + text.size()) config_error(field, "is not a number of seconds", text, fix);
    if (!std::isfinite(s) || s <= 0) config_error(field, "must be a finite number of seconds > 0", text, fix);
    if (s > 86400) config_error(field, "is beyond a day (86400 s): a collective that long is a hung job", text, fix);
    return s;
}

RunConfig run_config_from_json(const json& j, const std::string& path) {
    JsonReader r(j, path);
    for (const auto& [k, v] : j.items()) {
        if (k.empty() || k[0] == '$' || k == "comment" || k == "description") continue;  // annotations
        if (!find_run_field(k)) {
            std::string all;
            std::vector<std::string> keys;
            for (const RunField& f : run_fields()) {
                all += (all.empty() ? "" : ", ") + f.key;
                keys.push_back(f.key);
            }
            config_error(r.field(k), "unknown run config field", k, did_you_mean(k, keys, "use one of: " + all));
        }
    }
    RunConfig c;
    for (const RunField& f : run_fields()) {
        if (!j.contains(f.key)) continue;  // the RunConfig default stays
        const std::string& k = f.key;
        if (k == "rank_timeout" && j[k].is_number()) {  // seconds as a number too, not only "auto" or "60"
            c.rank_timeout = j[k].dump();
            continue;
        }
        std::visit(
            Overloaded{[&](std::string* v) { *v = r.opt_string(k, *v); }, [&](int64_t* v) { *v = r.opt_int(k, *v); },
                       [&](double* v) { *v = r.opt_double(k, *v); }, [&](bool* v) { *v = r.opt_bool(k, *v); },
                       [&](Mode* v) { *v = parse_mode(r.opt_string(k, to_string(*v)), label(path, k)); },
                       [&](uint64_t* v) { *v = parse_seed(r.opt_int(k, 0), label(path, k)); }},
            f.ref(c));
    }
    return c;
}

json run_config_to_json(const RunConfig& c) { return run_fields_json(c, false); }

void validate(const RunConfig& c) {
    auto at_least = [](const std::string& key, int64_t v, int64_t lo, const std::string& fix) {
        if (v < lo) config_error(label("", key), "must be >= " + std::to_string(lo), std::to_string(v), fix);
    };
    if (c.model.empty()) config_error(label("", "model"), "is empty", "", "give a model short name or a path");
    at_least("batch", c.shape.batch, 1, "use a batch of at least 1");
    at_least("seq_len", c.shape.seq_len, 1, "use a sequence length of at least 1");
    at_least("context", c.shape.context, 0, "use a context length >= 0 (tokens already in the KV cache)");
    at_least("layers", c.layers, 0, "use 0 for all layers or N >= 1 for the first N");
    at_least("first_layer", c.first_layer, 0, "use 0 (the model's first layer) or a later layer's index");
    at_least("warmup", c.warmup, 0, "use 0 or more warm-up iterations");
    at_least("iters", c.iters, 1, "measure at least one iteration");
    at_least("max_iters", c.max_iters, 1, "use a cap of at least 1 iteration");
    at_least("soft_topn", c.options.soft_topn, 0, "use 0 for the family's top-k, or N >= 1");
    at_least("threads", c.options.num_threads, 0, "use 0 for all cores, or N >= 1");
    // Upper bounds far beyond any real step, so that sizes and products stay in range (INT64_MAX context crashed
    // the cpu backend, a huge batch threw from std::vector) and a typo is refused before anything is allocated.
    auto at_most = [](const std::string& key, int64_t v, int64_t hi, const std::string& what, const std::string& fix) {
        if (v > hi) config_error(label("", key), "is beyond " + what, std::to_string(v), fix);
    };
    at_most("batch", c.shape.batch, kMaxStepTokens, "2^26 (67108864)", "use a smaller batch");
    at_most("seq_len", c.shape.seq_len, kMaxStepTokens, "2^26 (67108864) tokens", "use a shorter sequence");
    if (c.shape.mode == Mode::prefill && c.shape.batch * c.shape.seq_len > kMaxStepTokens)
        config_error(label("", "batch"), "times seq_len is beyond 2^26 (67108864) tokens per step",
                     fmt::format("{} x {}", c.shape.batch, c.shape.seq_len),
                     "use a smaller batch or " + flag_of("seq_len"));
    at_most("context", c.shape.context, kMaxContext, "2^32 tokens", "use a realistic context, e.g. 131072");
    for (const auto& [key, v] :
         {std::pair<const char*, int64_t>{"warmup", c.warmup}, {"iters", c.iters}, {"max_iters", c.max_iters}})
        at_most(key, v, 1'000'000, "10^6 iterations", "use fewer iterations (or min_time_s / max_noise)");
    at_most("threads", c.options.num_threads, kMaxThreads, "4096 threads", "use 0 for all cores");
    resolve_layout(c.layout);              // the layout's sizes and their rules (config/layout_request.hpp)
    check_precision_request(c.precision);  // each format's name and class (config/precision_request.hpp)
    // Finite too: an infinite value would be written to the report as null, which no run can reproduce.
    if (!(c.min_time_s >= 0 && std::isfinite(c.min_time_s)))
        config_error(label("", "min_time_s"), "must be a finite number >= 0", fmt::format("{}", c.min_time_s),
                     "use seconds >= 0");
    if (!(c.max_noise >= 0 && std::isfinite(c.max_noise)))
        config_error(label("", "max_noise"), "must be a finite number >= 0", fmt::format("{}", c.max_noise),
                     "use a coefficient of variation such as 0.05 (0 = off)");
    if (!(c.options.capacity_factor >= 0 && std::isfinite(c.options.capacity_factor)))
        config_error(label("", "capacity_factor"), "must be a finite number >= 0",
                     fmt::format("{}", c.options.capacity_factor), "use 0 for dropless, or a factor such as 1.25");
    parse_rank_timeout(c.rank_timeout, label("", "rank_timeout"));
    if (!(c.prune_below >= 0 && c.prune_below < 1))
        config_error(label("", "prune_below"), "must be a fraction from 0 (off) up to, not including, 1",
                     fmt::format("{}", c.prune_below), "use e.g. 0.005 to drop experts used below 0.5% of the routing");
    if (!(c.max_cv >= 0 && std::isfinite(c.max_cv)))
        config_error(label("", "max_cv"), "must be a finite number >= 0", fmt::format("{}", c.max_cv),
                     "use a coefficient of variation such as 0.5 (0 = off)");
    if (!(c.min_balancedness >= 0 && c.min_balancedness <= 1))
        config_error(label("", "min_balancedness"), "must be a number from 0 to 1",
                     fmt::format("{}", c.min_balancedness),
                     "use a balancedness such as 0.8 (1 = perfectly even, 0 = off)");
    if (c.routing.empty())
        config_error(label("", "routing"), "is empty", "", "use router, uniform, zipf:1.2, ... (docs/workloads.md)");
    if (c.record != "full" && c.record != "brief")
        config_error(label("", "record"), "is not full or brief", c.record,
                     "use full (per-layer and per-expert tables) or brief (without them)");
    if (c.routing_path != "auto" && c.routing_path != "per-token" && c.routing_path != "statistical")
        config_error(label("", "routing_path"), "is not auto, per-token or statistical", c.routing_path,
                     "use auto (statistical where the run allows it), per-token or statistical");
}

}  // namespace moebench
