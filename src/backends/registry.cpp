// SPDX-License-Identifier: Apache-2.0
// make_backend: name -> backend; "auto" prefers cuda when built and a GPU is present (never sim: it models, it does
// not measure). known_backends: every backend's traits, also of one this build lacks.
#include "backends/registry.hpp"

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/sim/sim_backend.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/text_list.hpp"
#include "config/hardware.hpp"
#if MOEBENCH_HAS_CUDA
#include "backends/cuda/device_info.hpp"
#endif

namespace moebench {

namespace {

#if MOEBENCH_HAS_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

std::unique_ptr<Backend> make_cpu(const std::string&, std::string* why) {
    if (why) why->clear();
    return make_cpu_backend();
}

std::unique_ptr<Backend> make_sim(const std::string& hardware, std::string* why) {
    if (why)
        *why = hardware.empty() ? std::string("backend sim: modeling ") + kSimDefaultHardware + " (no hardware given)"
                                : "";
    return make_sim_backend(load_hardware(hardware.empty() ? kSimDefaultHardware : hardware));
}

std::unique_ptr<Backend> make_cuda(const std::string&, std::string* why) {
#if MOEBENCH_HAS_CUDA
    std::string reason;
    if (!cuda_available(&reason))
        config_error(
            flag_of("backend"), "cuda is unavailable", reason,
            "run on a machine with an NVIDIA GPU, or use " + flag_of("backend") + " cpu (measured) or sim (modeled)");
    if (why) why->clear();
    return make_cuda_backend();
#else
    (void)why;
    config_error(flag_of("backend"), "this build has no CUDA backend", "cuda",
                 "rebuild with the CUDA toolkit (-DMOEBENCH_CUDA=ON), or use " + flag_of("backend") + " cpu or sim");
#endif
}

}  // namespace

const std::vector<KnownBackend>& known_backends() {
    static const std::vector<KnownBackend> all = [] {
        HardwareProfile sim_default;
        sim_default.name = kSimDefaultHardware;
        return std::vector<KnownBackend>{{cpu_backend_traits(), true, make_cpu},
                                         {cuda_backend_traits(), kCudaBuilt, make_cuda},
                                         {sim_backend_traits(sim_default, SimParams{}), true, make_sim}};
    }();
    return all;
}

std::vector<std::string> backend_choices() {
    std::vector<std::string> names = {"auto"};
    for (const KnownBackend& b : known_backends()) names.push_back(b.traits.name);
    return names;
}

std::string backends_help() { return join_list(backend_choices(), " | "); }

std::string choice_help(std::vector<std::string> BackendTraits::*values) {
    std::string s;
    for (const KnownBackend& b : known_backends()) {
        const std::vector<std::string>& list = b.traits.*values;
        if (list.size() < 2) continue;  // "auto" alone: nothing to choose
        s += (s.empty() ? "" : ", ") + join_list(list, " | ") + " (" + b.traits.name + ")";
    }
    return s;
}

const BackendTraits* find_backend_traits(const std::string& name) {
    for (const KnownBackend& b : known_backends())
        if (b.traits.name == name) return &b.traits;
    return nullptr;
}

std::unique_ptr<Backend> make_backend(const std::string& name, std::string* why) { return make_backend(name, why, ""); }

std::unique_ptr<Backend> make_backend(const std::string& name, std::string* why, const std::string& hardware) {
    if (name == "auto") {
        // cuda when built and a GPU is present, else cpu (never sim: it models, it does not measure).
#if MOEBENCH_HAS_CUDA
        std::string reason;
        if (cuda_available(&reason)) {
            if (why) *why = "backend auto: using cuda (" + reason + ")";
            return make_cuda_backend();
        }
        if (why) *why = "backend auto: using cpu (" + reason + ")";
#else
        if (why) *why = "backend auto: using cpu (built without CUDA)";
#endif
        return make_cpu_backend();
    }
    for (const KnownBackend& b : known_backends())
        if (b.traits.name == name) return b.make(hardware, why);
    config_error(flag_of("backend"), "unknown backend", name, "use " + or_list(backend_choices()));
}

json accelerator_devices_json(bool measure) {
#if MOEBENCH_HAS_CUDA
    json g = cuda_devices_json(measure);
    g["built_with_cuda"] = true;
    return g;
#else
    (void)measure;
    return json{{"built_with_cuda", false},
                {"available", false},
                {"device_count", 0},
                {"reason",
                 "this moebench was built without CUDA (no nvcc at build time, or -DMOEBENCH_CUDA=OFF): "
                 "no GPU can be used; rebuild with the CUDA toolkit to use one"},
                {"devices", json::array()}};
#endif
}

}  // namespace moebench
