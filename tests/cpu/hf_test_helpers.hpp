// SPDX-License-Identifier: Apache-2.0
// Shared by the Hugging Face import tests: the published configs, an import with validation, and the comparison
// of a counted figure with a vendor's printed one.
#pragma once
#include "config/model_config.hpp"
#include "model/accounting.hpp"
#include "test_paths.hpp"

#include <cmath>
#include <string>

namespace moebench::test {

inline const std::string kHf = std::string(MOEBENCH_TEST_DATA) + "/hf-configs/";
inline ModelConfig hf(const std::string& name) { return load_model(kHf + name); }
inline ModelConfig hf_json(const json& j) {
    ModelConfig m = model_from_hf(j, "config.json");
    validate(m, "config.json");
    return m;
}
inline int64_t comp(const ParamCounts& p, Component c) { return p.by_component[static_cast<int>(c)]; }
inline double rel_err(double counted, double published) { return std::fabs(counted - published) / published; }

// Vendors print counts to 2-3 significant digits, some rounding and some truncating. `unit` is the value of the
// last printed digit; the count is consistent with the figure if rounding or truncating it there gives the figure.
inline bool consistent(double counted, double published, double unit) {
    return counted >= published - unit / 2 && counted < published + unit;
}

}  // namespace moebench::test
