// SPDX-License-Identifier: Apache-2.0
#include "harness/run_inputs.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/paths.hpp"
#include "workload/routing_spec.hpp"

#include <filesystem>

namespace moebench {

namespace {

// The file `name` names: in configs/<kind>/ for a short name (as the run resolves it), else the path as given.
std::string resolved(const std::string& kind, const std::string& name) {
    if (name.empty()) return "";
    std::string path = name;
    if (!kind.empty()) {
        try {
            path = resolve_config(kind, name, kind);
        } catch (const ConfigError&) {
            return "";
        }
    }
    std::error_code ec;
    return std::filesystem::is_regular_file(path, ec) ? path : "";
}

}  // namespace

std::vector<RunInput> run_input_files(const RunConfig& cfg) {
    std::vector<RunInput> in;
    in.push_back({"model", flag_of("model"), cfg.model, resolved("models", cfg.model)});
    if (!cfg.hardware.empty())
        in.push_back({"hardware", flag_of("hardware"), cfg.hardware, resolved("hardware", cfg.hardware)});
    try {
        const RoutingSpec r = parse_routing_spec(cfg.routing, "routing");
        if (r.kind == WorkloadKind::trace)
            in.push_back({"routing", flag_of("routing"), r.trace_path, resolved("", r.trace_path)});
    } catch (const ConfigError&) {
        // a bad spec is refused when the run validates it; it names no file
    }
    if (!cfg.layout.placement.empty())
        in.push_back({"placement", flag_of("placement"), cfg.layout.placement, resolved("", cfg.layout.placement)});
    return in;
}

std::vector<FileArg> run_input_args(const RunConfig& cfg) {
    std::vector<FileArg> args;
    for (const RunInput& i : run_input_files(cfg))
        if (!i.path.empty()) args.push_back({i.flag, i.path});
    return args;
}

std::vector<FileArg> run_output_args(const RunConfig& cfg) {
    std::vector<FileArg> out;
    if (!cfg.out.empty() && cfg.out != "-") out.push_back({flag_of("out"), cfg.out});
    if (!cfg.dump_tensors.empty())
        out.push_back(
            {flag_of("dump_tensors"), (std::filesystem::path(cfg.dump_tensors) / "moe_layer.safetensors").string()});
    return out;
}

}  // namespace moebench
