// SPDX-License-Identifier: Apache-2.0
// The Backend contract: the optional capabilities are asked for by name and handed out exactly where the traits list
// them; the traits are fixed (prepare() changes none of them) and the prepared step's facts come back from prepare().
#include "backends/cpu/cpu_backend.hpp"
#include "backends/registry.hpp"
#include "backends/sim/sim_backend.hpp"
#include "engine/backend.hpp"
#include "engine/engine.hpp"
#include "error_helpers.hpp"
#include "harness/validate.hpp"
#include "test_models.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

using namespace moebench;

namespace {

// The capability interfaces this backend instance hands out, by the name of their Capability.
std::vector<Capability> handed_out(const Backend& b) {
    std::vector<Capability> out;
    if (b.capability<CeilingProbe>()) out.push_back(Capability::ceilings);
    if (b.capability<TensorAccess>()) out.push_back(Capability::tensors);
    if (b.capability<DeviceCounters>()) out.push_back(Capability::device_counters);
    return out;
}

// The listed capabilities that have an interface (the expert-parallel ones are declarations only).
std::vector<Capability> with_interface(const BackendTraits& t) {
    std::vector<Capability> out;
    for (Capability c : {Capability::ceilings, Capability::tensors, Capability::device_counters})
        if (t.offers(c)) out.push_back(c);
    return out;
}

// Everything validation and the record read from the traits, as one comparable value.
std::string traits_text(const BackendTraits& t) {
    std::string s = t.name + (t.measures ? " measures" : " models");
    for (Capability c : t.capabilities) s += std::string(" ") + to_string(c);
    for (const auto* list : {&t.expert_gemm, &t.attention_kernel, &t.switches})
        for (const std::string& v : *list) s += " " + v;
    s += " " + t.native_precision.describe() + " " + t.default_hardware;
    s += fmt::format(" tp{} la{} gate{} tol{} tie{}", t.tensor_parallel, t.linear_attention, t.attention_output_gate,
                     t.check.tolerance, t.check.tie_epsilon);
    return s;
}

HardwareProfile toy_hw(double memory_bytes) {
    HardwareProfile h;
    h.name = "toy";
    h.memory_bw_bytes_per_s = 1e9;
    h.bf16_flops = 1e9;
    h.fp32_flops = 0.5e9;
    h.scaleup_bw_bytes_per_s = 1e9;
    h.gpus_per_node = 8;
    h.memory_bytes = memory_bytes;
    return h;
}

// A backend that lists the tensors capability but does not implement it, and implements ceilings without listing.
class MislabelledBackend final : public Backend, public CeilingProbe {
public:
    BackendTraits traits() const override {
        BackendTraits t;
        t.name = "mislabelled";
        t.capabilities = {Capability::tensors};
        return t;
    }
    json describe() const override { return json::object(); }
    PreparedStep prepare(const ModelConfig&, const std::vector<int64_t>&, const StepShape&, const RunOptions&,
                         const Topology&) override {
        return {};
    }
    void set_routing_override(const StepRouting*) override {}
    void begin_step() override {}
    void run_phase(Phase, int64_t) override {}
    void mark() override {}
    std::vector<double> end_step() override { return {}; }
    MoeLayerResult moe_result(int64_t) const override { return {}; }
    RooflineCeilings measure_ceilings(const RunOptions&) const override { return {}; }
};

}  // namespace

TEST_CASE("backend capabilities: an instance hands out exactly the interfaces its traits list", "[backend]") {
    // cpu: ceilings and tensors (and expert parallelism over processes, a declaration); sim: none of the interfaces.
    const auto cpu = make_cpu_backend();
    CHECK(handed_out(*cpu) == std::vector<Capability>{Capability::ceilings, Capability::tensors});
    CHECK(handed_out(*cpu) == with_interface(cpu->traits()));
    CHECK(cpu->traits().offers(Capability::ep_processes));
    CHECK_FALSE(cpu->traits().offers(Capability::ep_modeled_ranks));

    const auto sim = make_sim_backend(toy_hw(0), SimParams{});
    CHECK(handed_out(*sim).empty());
    CHECK(with_interface(sim->traits()).empty());
    CHECK(sim->traits().offers(Capability::ep_modeled_ranks));

    // The registry's traits (also of a backend this build lacks) list the same as the instances'.
    for (const KnownBackend& b : known_backends()) {
        INFO("backend " << b.traits.name);
        if (b.traits.name == cpu->traits().name) CHECK(b.traits.capabilities == cpu->traits().capabilities);
        if (b.traits.name == sim->traits().name) CHECK(b.traits.capabilities == sim->traits().capabilities);
    }
    // The cuda backend's declaration: ceilings, tensors and device counters; one GPU, no expert parallelism.
    const BackendTraits* cuda = find_backend_traits("cuda");
    REQUIRE(cuda != nullptr);
    CHECK(with_interface(*cuda) ==
          std::vector<Capability>{Capability::ceilings, Capability::tensors, Capability::device_counters});
    CHECK_FALSE(cuda->offers(Capability::ep_modeled_ranks));
    CHECK_FALSE(cuda->offers(Capability::ep_processes));

    // The traits decide: an interface a backend implements but does not list is not handed out, and one it lists
    // but does not implement is nullptr (never a bad cast).
    MislabelledBackend m;
    CHECK(m.capability<CeilingProbe>() == nullptr);
    CHECK(m.capability<TensorAccess>() == nullptr);
}

TEST_CASE("backend capabilities: a backend without one is refused by the capability's name", "[backend]") {
    RunConfig cfg;
    const BackendTraits sim = sim_backend_traits(toy_hw(0), SimParams{});
    cfg.measure_ceilings = true;
    std::string msg = test::config_error_of([&] { check_backend_accepts(sim, cfg); });
    CHECK_THAT(msg, Catch::Contains("measure_ceilings") && Catch::Contains("sim") && Catch::Contains("cpu or cuda"));
    cfg.measure_ceilings = false;
    cfg.check = true;
    msg = test::config_error_of([&] { check_backend_accepts(sim, cfg); });
    CHECK_THAT(msg, Catch::Contains("check") && Catch::Contains("computes none") && Catch::Contains("cpu or cuda"));
    cfg.check = false;
    cfg.dump_tensors = "dir";
    msg = test::config_error_of([&] { check_backend_accepts(sim, cfg); });
    CHECK_THAT(msg, Catch::Contains("dump_tensors") && Catch::Contains("cpu or cuda"));
    // The cpu backend offers all three: nothing refused.
    cfg.measure_ceilings = cfg.check = true;
    CHECK(test::config_error_of([&] { check_backend_accepts(cpu_backend_traits(), cfg); }).empty());
}

TEST_CASE("prepared step: prepare() returns the step's facts and leaves the traits as they were", "[backend]") {
    const ModelConfig m = test::tiny_gqa_h8();
    RunOptions opt;
    opt.seed = 3;
    opt.num_threads = 1;

    const auto cpu = make_cpu_backend();
    const std::string before = traits_text(cpu->traits());
    const PreparedStep step = cpu->prepare(m, {0, 1}, test::decode(2, 3), opt);
    CHECK(traits_text(cpu->traits()) == before);
    CHECK(step.mla_form == MlaForm::expanded_cache);  // the cpu caches MLA keys and values expanded per head
    // The expert GEMM kernel it chose, as its describe() reports it.
    CHECK(step.kernel("expert_gemm") == cpu->describe().at("expert_gemm").get<std::string>());
    CHECK(step.kernel("dense_gemm") == cpu->describe().at("dense_gemm").get<std::string>());
    CHECK(step.kernel("no such family").empty());
    CHECK_FALSE(step.fit.has_value());  // runs on real hardware: nothing modeled to fit

    // sim: the MLA form of its parameters; whether the deployment fits follows the profile's capacity (none: it fits).
    SimParams p;
    p.mla_form = MlaForm::latent_expand;
    const auto roomy = make_sim_backend(toy_hw(0), p);
    const std::string sim_before = traits_text(roomy->traits());
    const PreparedStep s1 = roomy->prepare(m, {0, 1}, test::decode(2, 3), opt);
    CHECK(traits_text(roomy->traits()) == sim_before);
    CHECK(s1.mla_form == MlaForm::latent_expand);
    REQUIRE(s1.fit.has_value());
    CHECK(s1.fit->fits);
    CHECK(s1.kernels.empty());
    const auto tiny = make_sim_backend(toy_hw(1024), p);  // 1 KiB of memory: the weights cannot fit
    const PreparedStep s2 = tiny->prepare(m, {0, 1}, test::decode(2, 3), opt);
    REQUIRE(s2.fit.has_value());
    CHECK_FALSE(s2.fit->fits);
    CHECK_FALSE(s2.fit->field.empty());
    CHECK_FALSE(s2.fit->fix.empty());
}
