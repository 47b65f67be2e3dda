// SPDX-License-Identifier: Apache-2.0
// The backends this tool knows: their traits (what each accepts, also for a backend this build lacks) and their
// construction. The one place that maps a backend's name to code; a new backend adds its folder and one line here.
#pragma once
#include "common/json_util.hpp"
#include "engine/backend.hpp"

#include <memory>
#include <string>
#include <vector>

namespace moebench {

/// Every backend, in the order of --backend's help (cpu, cuda, sim): its traits, whether this build has it, and
/// how to make one (`hardware`: the profile to model, "" = the default; `why` gets a line worth printing, or "").
struct KnownBackend {
    BackendTraits traits;
    bool built = true;
    std::unique_ptr<Backend> (*make)(const std::string& hardware, std::string* why) = nullptr;
};
const std::vector<KnownBackend>& known_backends();
/// The names --backend accepts: "auto" and every known backend.
std::vector<std::string> backend_choices();
/// For --help: "auto | cpu | cuda | sim", and "auto | panel | blas (cpu), auto | grouped | loop (cuda)".
std::string backends_help();
/// "v1 | v2 (backend), ..." over the backends that list more than "auto" in `values` (BackendTraits::expert_gemm, ...).
std::string choice_help(std::vector<std::string> BackendTraits::*values);
/// The traits of `name` (not "auto"); nullptr for an unknown name.
const BackendTraits* find_backend_traits(const std::string& name);

/// "auto" picks cuda when built and a GPU is present, else cpu; `why` receives the one-line reason.
/// Unknown or unavailable backend -> ConfigError (exit 2) saying so.
std::unique_ptr<Backend> make_backend(const std::string& name, std::string* why);
/// The same, with the hardware profile the sim backend models (RunConfig::hardware; "" = h200-sxm). cpu and cuda
/// ignore it. A bad profile -> ConfigError naming --hardware.
std::unique_ptr<Backend> make_backend(const std::string& name, std::string* why, const std::string& hardware);

/// `moebench devices`: the accelerators of this machine and the libraries, or why there are none
/// ({"built_with_cuda": bool, ...}; the cuda backend's cuda_devices_json when built).
json accelerator_devices_json(bool measure);

}  // namespace moebench
