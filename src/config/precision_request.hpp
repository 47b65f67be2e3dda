// SPDX-License-Identifier: Apache-2.0
// What a run, sweep or plan asks of the number formats (run fields dtype, expert_dtype, kv_dtype, dispatch_dtype),
// resolved into the one Precision value (core/precision.hpp) over what "auto" means for the backend (its native
// precision). The only place where a format's name and its class are checked. Errors name the run fields.
#pragma once
#include "core/precision.hpp"

#include <string>

namespace moebench {

/// One name per settable class; "auto" = the backend's own (dense weights: its native format; experts: the dense
/// weights' format; KV cache: its native; dispatch: the activations').
struct PrecisionRequest {
    std::string dtype = "auto";
    std::string expert_dtype = "auto";
    std::string kv_dtype = "auto";
    std::string dispatch_dtype = "auto";
    bool operator==(const PrecisionRequest&) const = default;
};

/// Every name is "auto" or a format allowed for its class (ConfigError naming the field and the allowed formats).
void check_precision_request(const PrecisionRequest& r);
/// The request over `native`; activations and combine follow the dense weights (activation_dtype_for).
Precision resolve_precision(const PrecisionRequest& r, const Precision& native);

}  // namespace moebench
