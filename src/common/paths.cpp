// SPDX-License-Identifier: Apache-2.0
#include "common/paths.hpp"

#include "common/did_you_mean.hpp"
#include "common/error.hpp"
#include "common/read_file.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;

namespace moebench {

std::string configs_dir() {
    if (const char* env = std::getenv("MOEBENCH_CONFIG_DIR"); env && *env) return env;
    fs::path src = fs::path(MOEBENCH_SOURCE_DIR) / "configs";
    if (fs::is_directory(src)) return src.string();
    return "configs";
}

std::vector<std::string> list_configs(const std::string& kind) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(configs_dir()) / kind, ec)) {
        if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string resolve_config(const std::string& kind, const std::string& name_or_path, const std::string& field) {
    if (name_or_path.empty()) config_error(field, "is empty", "", "give a short name or a path to a JSON file");
    std::error_code ec;
    if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
    if (fs::is_directory(name_or_path, ec))
        config_error(field, "is a folder, not a file", name_or_path, "give the path of a JSON file");
    // Something else is there (a device, a FIFO, a link loop or a dangling link, a path we may not enter): say what,
    // instead of "file not found" or "unknown name".
    if (path_is_occupied(name_or_path)) require_readable_file(name_or_path, field);
    fs::path shipped = fs::path(configs_dir()) / kind / (name_or_path + ".json");
    if (fs::is_regular_file(shipped, ec)) return shipped.string();
    // A relative path from a shipped config (e.g. tests/data/models/tiny-gqa.json) names a file of the project, so
    // that the shipped configs work from any folder: try it against the project root (the folder above configs/).
    if (fs::path(name_or_path).is_relative()) {
        const fs::path in_project = fs::absolute(configs_dir(), ec).parent_path() / name_or_path;
        if (fs::is_regular_file(in_project, ec)) return in_project.string();
    }
    const std::vector<std::string> names = list_configs(kind);
    std::string avail;
    for (const auto& n : names) avail += (avail.empty() ? "" : ", ") + n;
    bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                           (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json");
    if (looks_like_path) config_error(field, "file not found", name_or_path, "check the path");
    const std::string noun = kind == "models"   ? "model"
                             : kind == "runs"   ? "run config"
                             : kind == "sweeps" ? "sweep config"
                                                : kind;
    config_error(field, "unknown " + noun + " name", name_or_path,
                 did_you_mean(name_or_path, names, "use a path to a JSON file or one of: " + avail));
}

}  // namespace moebench
