// SPDX-License-Identifier: Apache-2.0
// Assembles the moebench.report/1 document and the environment block; writes it whole or not at all.
#include "report/report_json.hpp"
#include "core/report_keys.hpp"

#include "common/atomic_file.hpp"
#include "config/model_config.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

namespace moebench {

std::string default_report_path() {
    // Two runs in the same second must not overwrite each other: the first free name of run-<time>[-N].json.
    const std::string stem = "results/run-" + utc_now(true);
    std::string path = stem + ".json";
    for (int n = 2; std::filesystem::exists(path) && n < 1000; ++n) path = fmt::format("{}-{}.json", stem, n);
    return path;
}

json make_report(const json& context, const json& config, const std::vector<json>& runs) {
    json r = json::object();
    r["schema"] = kReportSchema;
    for (const char* key : {"tool", "command", "created_utc", "environment"})
        if (context.contains(key)) r[key] = context.at(key);
    if (!r.contains("environment")) r["environment"] = environment_block();
    r["environment"]["loadavg_1m_end"] = loadavg_now();
    if (!runs.empty()) {
        const json& first = runs.front();
        if (first.contains("backend")) r["environment"]["backend"] = first.at("backend");
        if (first.contains("backend_note")) r["environment"]["backend_note"] = first.at("backend_note");
        if (first.contains(keys::kBackendInfo) && first.at(keys::kBackendInfo).contains("gpus"))
            r["environment"]["gpus"] = first.at(keys::kBackendInfo).at("gpus");
    }
    r["config"] = config;
    r[keys::kRuns] = runs;
    return r;
}

void write_report(const std::string& path, const json& report) { write_file_atomic(path, report.dump(2) + "\n"); }

json report_context(int /*argc_or_0*/, const std::string& command_line) { return document_context(command_line); }

json resolved_config(const RunConfig& cfg) {
    return json{{"run", run_config_to_json(cfg)}, {"model", model_to_json(load_model(cfg.model))}};
}

}  // namespace moebench
