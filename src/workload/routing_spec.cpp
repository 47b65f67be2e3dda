// SPDX-License-Identifier: Apache-2.0
// Parser of the `--routing SPEC` grammar.
#include "workload/routing_spec.hpp"

#include "common/error.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace moebench {

const char* to_string(WorkloadKind k) {
    switch (k) {
        case WorkloadKind::router: return "router";
        case WorkloadKind::uniform: return "uniform";
        case WorkloadKind::balanced: return "balanced";
        case WorkloadKind::zipf: return "zipf";
        case WorkloadKind::hot: return "hot";
        case WorkloadKind::imbalance: return "imbalance";
        case WorkloadKind::domains: return "domains";
        case WorkloadKind::trace: return "trace";
    }
    return "?";
}

std::string routing_spec_help() {
    return "router | uniform | balanced | zipf:S | powerlaw:ALPHA (the same, ALPHA >= 0, e.g. powerlaw:0.5) | hot:N:F "
           "(N hot experts take fraction F, e.g. hot:4:0.6) | imbalance:R (max/mean load R >= 1, e.g. imbalance:2) | "
           "domains:D:SWITCH (D domains, switch probability per token, e.g. domains:4:0.1) | trace:FILE";
}

namespace {

[[noreturn]] void bad_spec(const std::string& field, const std::string& spec, const std::string& what,
                           const std::string& fix) {
    config_error(field, what, "'" + spec + "'", fix + " (forms: " + routing_spec_help() + "; see docs/workloads.md)");
}

double parse_number(const std::string& s, const std::string& field, const std::string& spec, const char* what) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
        bad_spec(field, spec, std::string(what) + " '" + s + "' is not a number", "write a plain decimal number");
    return v;
}

int64_t parse_count(const std::string& s, const std::string& field, const std::string& spec, const char* what) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || end != s.c_str() + s.size())
        bad_spec(field, spec, std::string(what) + " '" + s + "' is not an integer", "write a whole number");
    if (errno == ERANGE)  // not the largest int64, silently
        bad_spec(field, spec, std::string(what) + " '" + s + "' is out of range", "write a realistic count");
    return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
        size_t pos = s.find(sep, start);
        parts.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
        if (pos == std::string::npos) break;
        start = pos + 1;
    }
    return parts;
}

}  // namespace

RoutingSpec parse_routing_spec(const std::string& spec, const std::string& field) {
    RoutingSpec r;
    r.text = spec;
    // trace:FILE keeps everything after the first ':' (paths may contain ':').
    if (spec.rfind("trace:", 0) == 0) {
        r.kind = WorkloadKind::trace;
        r.trace_path = spec.substr(6);
        if (r.trace_path.empty()) bad_spec(field, spec, "trace needs a file", "write trace:PATH/TO/FILE.safetensors");
        return r;
    }
    auto parts = split(spec, ':');
    const std::string& name = parts[0];
    auto want_args = [&](size_t n, const char* form) {
        if (parts.size() != n + 1)
            bad_spec(field, spec, name + " takes " + std::to_string(n) + " parameter(s)", std::string("write ") + form);
    };
    if (name == "router" || name == "uniform" || name == "balanced") {
        want_args(0, name.c_str());
        r.kind = name == "router"    ? WorkloadKind::router
                 : name == "uniform" ? WorkloadKind::uniform
                                     : WorkloadKind::balanced;
    } else if (name == "zipf" || name == "powerlaw") {
        // powerlaw:ALPHA is zipf:ALPHA (popularity of the rank-r expert ∝ r^-ALPHA). A bare `powerlaw` would take the
        // model's fitted exponent, but no fit is published for any model (docs/workloads.md), so none is assumed.
        if (name == "powerlaw" && parts.size() == 1)
            bad_spec(field, spec,
                     "powerlaw needs its exponent: no fit of expert popularity to a power law is published for any "
                     "model, so moebench has no default",
                     "write powerlaw:ALPHA, e.g. powerlaw:0.5 (an assumption of mild skew: with 256 experts the "
                     "busiest 10% take 28% of the assignments; powerlaw:0 = uniform popularity)");
        want_args(1, name == "zipf" ? "zipf:S, e.g. zipf:1.2" : "powerlaw:ALPHA, e.g. powerlaw:0.5");
        r.kind = WorkloadKind::zipf;
        const std::string what = name == "zipf" ? "zipf exponent" : "power-law exponent";
        r.zipf_exponent = parse_number(parts[1], field, spec, what.c_str());
        if (r.zipf_exponent < 0 || r.zipf_exponent > 20)
            bad_spec(field, spec, what + " must be in [0, 20]", "use e.g. " + name + ":0.5 (0 = uniform popularity)");
    } else if (name == "hot") {
        want_args(2, "hot:N:F, e.g. hot:4:0.6");
        r.kind = WorkloadKind::hot;
        r.hot_experts = parse_count(parts[1], field, spec, "hot expert count");
        r.hot_fraction = parse_number(parts[2], field, spec, "hot fraction");
        if (r.hot_experts < 1) bad_spec(field, spec, "hot expert count must be >= 1", "use e.g. hot:4:0.6");
        if (!(r.hot_fraction > 0 && r.hot_fraction < 1))
            bad_spec(field, spec, "hot fraction must be in (0, 1)", "use e.g. hot:4:0.6");
    } else if (name == "imbalance") {
        want_args(1, "imbalance:R, e.g. imbalance:2");
        r.kind = WorkloadKind::imbalance;
        r.imbalance_ratio = parse_number(parts[1], field, spec, "imbalance ratio");
        if (r.imbalance_ratio < 1)
            bad_spec(field, spec, "imbalance ratio (max/mean load) must be >= 1", "use e.g. imbalance:2 (1 = even)");
    } else if (name == "domains") {
        want_args(2, "domains:D:SWITCH, e.g. domains:4:0.1");
        r.kind = WorkloadKind::domains;
        r.num_domains = parse_count(parts[1], field, spec, "domain count");
        r.switch_prob = parse_number(parts[2], field, spec, "switch probability");
        if (r.num_domains < 1 || r.num_domains > 1'000'000)
            bad_spec(field, spec, "domain count must be in [1, 1000000]", "use e.g. domains:4:0.1");
        if (r.switch_prob < 0 || r.switch_prob > 1)
            bad_spec(field, spec, "switch probability must be in [0, 1]", "use e.g. domains:4:0.1");
    } else {
        bad_spec(field, spec, "unknown routing kind '" + name + "'", "pick one of the forms");
    }
    return r;
}

}  // namespace moebench
