// SPDX-License-Identifier: Apache-2.0
// The `--routing SPEC` grammar (docs/workloads.md): router | uniform | balanced | zipf:S | powerlaw:ALPHA (zipf's
// other name) | hot:N:F | imbalance:R | domains:D:SWITCH | trace:FILE. Parsing only; feasibility against a model is
// checked by make_workload.
#pragma once
#include <cstdint>
#include <string>

namespace moebench {

enum class WorkloadKind { router, uniform, balanced, zipf, hot, imbalance, domains, trace };
const char* to_string(WorkloadKind k);

struct RoutingSpec {
    WorkloadKind kind = WorkloadKind::router;
    double zipf_exponent = 0;    // zipf:S or powerlaw:ALPHA (one workload, two spellings), in [0, 20]
    int64_t hot_experts = 0;     // hot:N:F
    double hot_fraction = 0;     //   F in (0, 1)
    double imbalance_ratio = 1;  // imbalance:R, R >= 1 (target max/mean expert load)
    int64_t num_domains = 0;     // domains:D:SWITCH, D >= 1
    double switch_prob = 0;      //   SWITCH in [0, 1]
    std::string trace_path;      // trace:FILE
    std::string text;            // the spec as given
};

/// Parses a spec; `field` names it in errors ("routing (--routing)", "run.routing"). Bad syntax -> ConfigError
/// naming the spec and the accepted forms.
RoutingSpec parse_routing_spec(const std::string& spec, const std::string& field = "routing");

/// One line per form, for --help and error messages.
std::string routing_spec_help();

}  // namespace moebench
