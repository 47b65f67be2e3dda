// SPDX-License-Identifier: Apache-2.0
// make_backend: name -> backend; "auto" prefers cuda when built and a GPU is present (never sim: it models, it does
// not measure).
#include "backends/cpu/cpu_backend.hpp"
#include "backends/sim/sim_backend.hpp"
#include "common/error.hpp"
#include "config/hardware.hpp"
#include "engine/backend.hpp"
#if MOEBENCH_HAS_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace moebench {

std::unique_ptr<Backend> make_backend(const std::string& name, std::string* why) { return make_backend(name, why, ""); }

std::unique_ptr<Backend> make_backend(const std::string& name, std::string* why, const std::string& hardware) {
    auto note = [&](const std::string& s) { if (why) *why = s; };
    if (name == "cpu") {
        note("");
        return make_cpu_backend();
    }
    if (name == "sim") {
        const std::string profile = hardware.empty() ? kSimDefaultHardware : hardware;
        note(hardware.empty() ? std::string("backend sim: modeling ") + kSimDefaultHardware + " (no hardware given)"
                              : "");
        return make_sim_backend(load_hardware(profile));
    }
    if (name == "cuda" || name == "auto") {
#if MOEBENCH_HAS_CUDA
        std::string reason;
        if (cuda_available(&reason)) {
            note(name == "auto" ? "backend auto: using cuda (" + reason + ")" : "");
            return make_cuda_backend();
        }
        if (name == "cuda")
            config_error("--backend", "cuda is unavailable", reason,
                         "run on a machine with an NVIDIA GPU, or use --backend cpu (measured) or sim (modeled)");
        note("backend auto: using cpu (" + reason + ")");
#else
        if (name == "cuda")
            config_error("--backend", "this build has no CUDA backend", "cuda",
                         "rebuild with the CUDA toolkit (-DMOEBENCH_CUDA=ON), or use --backend cpu or sim");
        note("backend auto: using cpu (built without CUDA)");
#endif
        return make_cpu_backend();
    }
    config_error("--backend", "unknown backend", name, "use auto, cpu, cuda or sim");
}

}  // namespace moebench
