// SPDX-License-Identifier: Apache-2.0
// Where shipped configs live, and short-name resolution ("mixtral-8x7b" -> configs/models/mixtral-8x7b.json).
#pragma once
#include <string>
#include <vector>

namespace moebench {

/// The configs/ folder: $MOEBENCH_CONFIG_DIR, else next to the binary's source tree, else ./configs.
std::string configs_dir();

/// Resolves `name_or_path` in configs/<kind>/ ("models", "hardware", "runs", "workloads").
/// A path that exists is returned as is; a short name gets ".json" appended. Unknown -> ConfigError listing what
/// exists.
std::string resolve_config(const std::string& kind, const std::string& name_or_path, const std::string& field);

/// Short names available in configs/<kind>/, sorted.
std::vector<std::string> list_configs(const std::string& kind);

}  // namespace moebench
