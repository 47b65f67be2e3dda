// SPDX-License-Identifier: Apache-2.0
// The plausible range of every real number a model config carries, shared by moebench's own schema (validate in
// model_config.cpp) and the Hugging Face import (hf_import.cpp, under HF's key names).
#pragma once
#include <string>

namespace moebench {

/// [lo, hi], both included. Each is wide enough for every published model (configs/models, tests/data/hf-configs:
/// the span they use is in `fix`), yet bounded, so that a typo such as 1e308 is refused by name instead of turning
/// the outputs into inf, NaN or 0, as hardware profiles' figures are.
struct ModelRange {
    double lo, hi;
    const char* fix;
};

namespace model_range {
inline constexpr ModelRange kNormEps{1e-12, 0.1, "published models use 1e-6 to 1e-5"};
inline constexpr ModelRange kRopeTheta{100, 1e12, "published models use 1e4 to 1e7"};
inline constexpr ModelRange kRopeScalingFactor{0.01, 10000, "published models use 1 to 40 (rope_scaling.factor)"};
inline constexpr ModelRange kRoutedScalingFactor{0.01, 1000, "published models use 1 to 16 (1.0: no scaling)"};
inline constexpr ModelRange kRouterJitterNoise{0, 1, "PhiMoE uses 0.01"};
inline constexpr ModelRange kSwigluLimit{0, 1000, "gpt-oss uses 7.0 (0: no clamp)"};
}  // namespace model_range

/// ConfigError naming `field`, the value and the range when `value` is not finite or lies outside `range`.
void check_model_range(const std::string& field, double value, const ModelRange& range);

}  // namespace moebench
