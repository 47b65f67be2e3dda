// SPDX-License-Identifier: Apache-2.0
#include "config/precision_request.hpp"

#include "common/error.hpp"
#include "config/run_fields.hpp"

namespace moebench {

namespace {

struct Settable {
    const char* key;                      // run field
    std::string PrecisionRequest::*name;  // its value in the request
    TensorClass cls;
};
constexpr Settable kSettable[] = {
    {"dtype", &PrecisionRequest::dtype, TensorClass::dense_weights},
    {"expert_dtype", &PrecisionRequest::expert_dtype, TensorClass::expert_weights},
    {"kv_dtype", &PrecisionRequest::kv_dtype, TensorClass::kv_cache},
    {"dispatch_dtype", &PrecisionRequest::dispatch_dtype, TensorClass::dispatch},
};

bool allowed(const DTypeInfo& i, TensorClass c) {
    switch (c) {
        case TensorClass::kv_cache: return i.kv_cache;
        case TensorClass::dispatch: return i.dispatch;
        default: return i.weights;
    }
}

// "auto" -> nullopt; a known format allowed for the class -> it; anything else: ConfigError naming the field.
std::optional<DType> named(const Settable& s, const std::string& name) {
    if (name == "auto") return std::nullopt;
    const std::optional<DType> d = dtype_named(name);
    if (!d || !allowed(dtype_info(*d), s.cls))
        config_error(
            run_field_label("", s.key),
            d ? std::string("is not a format for the ") + std::string(to_string(s.cls)) : "unknown number format", name,
            "use auto (the backend's own) or " + dtype_names_for(s.cls));
    return d;
}

}  // namespace

void check_precision_request(const PrecisionRequest& r) {
    for (const Settable& s : kSettable) named(s, r.*s.name);
}

Precision resolve_precision(const PrecisionRequest& r, const Precision& native) {
    Precision p = native;
    p.dense_weights = named(kSettable[0], r.dtype).value_or(native.dense_weights);
    p.expert_weights =
        named(kSettable[1], r.expert_dtype).value_or(r.dtype == "auto" ? native.expert_weights : p.dense_weights);
    p.kv_cache = named(kSettable[2], r.kv_dtype).value_or(native.kv_cache);
    p.activations = r.dtype == "auto" ? native.activations : activation_dtype_for(p.dense_weights);
    p.combine = p.activations;
    p.dispatch = named(kSettable[3], r.dispatch_dtype).value_or(p.activations);
    return p;
}

}  // namespace moebench
