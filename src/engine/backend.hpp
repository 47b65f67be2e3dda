// SPDX-License-Identifier: Apache-2.0
// The backend contract: the engine owns the order of phases, a backend executes (or models) each one.
// cpu, cuda and sim implement it (backends/), and describe themselves in traits(): nothing outside backends/ knows
// which one runs, or compares a backend's name. The contract is the step's execution; what only some backends do
// (measure ceilings, hand out tensors, read device counters) are small interfaces asked for by name.
#pragma once
#include "common/json_util.hpp"
#include "common/tensor_file.hpp"
#include "config/model_config.hpp"
#include "core/phase.hpp"
#include "core/step.hpp"
#include "metrics/roofline.hpp"
#include "model/phase_work.hpp"
#include "model/placement.hpp"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moebench {

class Communicator;  // the processes of one expert-parallel job (src/comm/, with MPI or NCCL)

/// Where this process stands: rank `rank` of `world_size` processes and their communicator (nullptr in a single
/// process). Expert-parallel ranks that one process models (the sim's RunOptions::ep_size) are not processes.
struct Topology {
    int64_t rank = 0;
    int64_t world_size = 1;
    Communicator* comm = nullptr;
    const ExpertPlacement* placement = nullptr;  // which rank holds which experts (processes, or modeled ranks)
};

/// --check tolerances, set by the backend's precision (harness/check.hpp uses them).
struct CheckOptions {
    double tolerance = 1e-2;  // relative L2 error of moe_out that still passes (bf16: 1e-2, fp32: 1e-4)
    /// Two selection scores a, b tie when |a - b| <= tie_epsilon * max(1, |a|, |b|). Scores are compared in the
    /// family's selection domain: router logits for the softmax and top-k families (softmax keeps their order),
    /// sigmoid + correction bias for sigmoid_group_topk; group scores likewise for group-limited routing;
    /// sparsemixer: also a logit whose band value lies within tie_epsilon of the band's edge (2 jitter).
    double tie_epsilon = 1e-3;
};

/// Whether the deployment a backend models fits the memory of the hardware it models (the sim, after prepare()): as
/// plan counts it, weights + KV cache + activations and workspace per GPU. When it does not, the parts of the refusal
/// (model/memory_plan.hpp fit_advice: the flags to change, what needs how much, the layout and formats given, and
/// a layout or number format that fits).
struct ModeledFit {
    bool fits = true;
    std::string field, what, value, fix;
};

/// A step's routing as statistics instead of ids (the statistical routing path, docs/sim-backend.md): tokens that
/// pick their k experts independently of each other with the same probabilities, so that a backend that models (the
/// sim) can draw each MoE layer's tokens per expert and all-to-all rows in O(experts + ranks) per layer, whatever the
/// number of tokens. Workload::independent_shares and popularity_permutation fill it.
struct RoutingStatistics {
    std::vector<double> shares_by_rank;             // popularity shares, summing to 1 (empty: the backend's own router)
    std::vector<std::vector<int32_t>> permutation;  // [slot]: expert perm[r] takes rank r's share (empty: dense slot
                                                    // or the backend's own router)
    std::string source;                             // what they describe, for the report
};

/// The optional capabilities a backend may offer besides running steps, by name. The traits list the ones a backend
/// offers (validation reads them without an instance, also of a backend this build lacks); an instance hands out
/// the interface of each one it lists through Backend::capability<Interface>() (nullptr for the others).
enum class Capability {
    ceilings,          // CeilingProbe: measures this machine's read bandwidth and peak rate (--measure-ceilings)
    tensors,           // TensorAccess: runs router and experts on real tensors (--check, --dump-tensors, router logits)
    device_counters,   // DeviceCounters: the device's own clocks, throttle reasons and energy around the steps
    ep_modeled_ranks,  // expert parallelism in one process: models the ranks (--ep N > 1 without a launcher)
    ep_processes,      // expert parallelism as N processes (mpirun), one rank each
};
const char* to_string(Capability c);

/// What a backend is and accepts: declarative facts, fixed for the backend's lifetime (prepare() never changes them).
/// The harness validates options, labels numbers and counts work from this alone.
struct BackendTraits {
    std::string name;                      // "cpu", "cuda", "sim": the report's `backend`
    bool measures = true;                  // false: its phase times are modeled (sim)
    std::vector<Capability> capabilities;  // the optional capabilities it offers (see Capability)
    /// The number formats it computes: "auto" means native_precision; each class accepts the formats listed
    /// (the harness refuses others by name, config/precision_request.hpp resolves the request).
    Precision native_precision = uniform_precision(DType::fp32);
    std::vector<DType> weight_dtypes = {DType::fp32};  // dense and expert weights
    std::vector<DType> kv_dtypes = {DType::fp32};
    std::vector<DType> dispatch_dtypes = {DType::fp32};    // rows on the expert-parallel wire
    std::vector<std::string> expert_gemm = {"auto"};       // accepted expert_gemm values
    std::vector<std::string> attention_kernel = {"auto"};  // accepted attention_kernel values
    std::vector<std::string> switches;   // accepted on/off options (RunOptions): "cuda_graph", "cold_l2"
    bool tensor_parallel = false;        // accepts tp / moe_tp > 1 (splits layers over GPUs)
    std::string default_hardware;        // profile its ceilings come from without a hardware ("" = none)
    bool linear_attention = false;       // runs linear-attention layers (hybrid models: Qwen3-Next, MiniMax)
    bool attention_output_gate = false;  // runs the gated attention output (Qwen3-Next)
    bool routing_statistics = false;     // models a step from RoutingStatistics (set_routing_statistics)
    CheckOptions check;                  // with Capability::tensors: --check tolerances for its precision
    bool offers(Capability c) const;
    bool accepts_switch(const std::string& key) const;
    /// `value` is one of the values it lists in `values` (expert_gemm, attention_kernel).
    bool accepts(std::vector<std::string> BackendTraits::*values, const std::string& value) const;
};

/// What prepare() settled for the step it prepared: facts that follow the step's shape and options, fixed until the
/// next prepare(). Counted work and the record read them here (the traits stay as they were).
struct PreparedStep {
    MlaForm mla_form = MlaForm::expanded_cache;  // the MLA attention form the step runs (counted work; cuda: by mode
                                                 // and attention_kernel)
    std::vector<std::pair<std::string, std::string>> kernels;  // the variant chosen per kernel family:
                                                               // {"expert_gemm", "panel"}, ...
    /// Whether the deployment the backend models fits the memory of the hardware it models (sim); nullopt where it
    /// runs on real hardware (which decides by itself). The harness refuses a point that does not fit unless
    /// --allow-no-fit.
    std::optional<ModeledFit> fit;
    /// The variant chosen for `family`, or "" when the step names none.
    std::string kernel(const std::string& family) const;
};

class Backend {
public:
    virtual ~Backend() = default;

    virtual BackendTraits traits() const = 0;
    std::string name() const { return traits().name; }
    /// Where this backend's phase times come from: "measured" (cpu, cuda) or "modeled" (sim).
    std::string timing_source() const { return traits().measures ? "measured" : "modeled"; }
    /// Environment block for the report: threads and BLAS (cpu), device and library versions (cuda), profile (sim).
    virtual json describe() const = 0;

    /// Allocates weights (random from opt.seed) and buffers for `layers` (model layer indices, ascending) at `shape`,
    /// and returns what it settled for this step. Throws UnsupportedError / ConfigError with the fix when the memory
    /// would not suffice. `topo`: this process's place in a multi-process job (the default: one process).
    virtual PreparedStep prepare(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                                 const RunOptions& opt, const Topology& topo = Topology{}) = 0;
    /// Routing imposed on the next steps (nullptr: the router decides). The router GEMM and top-k still run and are
    /// timed.
    virtual void set_routing_override(const StepRouting* routing) = 0;
    /// Routing given as statistics for every following step (traits().routing_statistics; the harness chooses the
    /// path, harness/routing_path.hpp). moe_result then has tokens per expert and all-to-all rows but no ids.
    virtual void set_routing_statistics(const RoutingStatistics& statistics);

    virtual void begin_step() = 0;
    /// Runs one phase. layer_slot indexes `layers` from prepare(); -1 for embed, final_norm and lm_head.
    virtual void run_phase(Phase phase, int64_t layer_slot) = 0;
    /// Records a timestamp in the stream of work (host clock or CUDA event). The engine marks before the first
    /// phase and after every phase.
    virtual void mark() = 0;
    /// Finishes the step; returns the intervals between consecutive marks, in microseconds.
    virtual std::vector<double> end_step() = 0;

    /// Routing, loads and router logits observed in the MoE layer at `layer_slot` during the last step.
    virtual MoeLayerResult moe_result(int64_t layer_slot) const = 0;

    /// The optional capability `C` (CeilingProbe, TensorAccess, DeviceCounters) when this backend offers it (its
    /// traits list C::kCapability), else nullptr.
    template <class C>
    C* capability() {
        return traits().offers(C::kCapability) ? dynamic_cast<C*>(this) : nullptr;
    }
    template <class C>
    const C* capability() const {
        return traits().offers(C::kCapability) ? dynamic_cast<const C*>(this) : nullptr;
    }
};

/// Capability::ceilings: this machine's read bandwidth and peak rate for the backend (--measure-ceilings).
class CeilingProbe {
public:
    static constexpr Capability kCapability = Capability::ceilings;
    virtual ~CeilingProbe() = default;
    /// Measured before prepare() takes the memory.
    virtual RooflineCeilings measure_ceilings(const RunOptions& opt) const = 0;
    /// After the measured steps: a second look that may raise a measured ceiling (neighbours only ever lower one).
    virtual void remeasure_ceilings(RooflineCeilings& c, const RunOptions& opt) const {}
};

/// Capability::tensors: the tensors of the MoE block the last step computed (--dump-tensors, --check).
class TensorAccess {
public:
    static constexpr Capability kCapability = Capability::tensors;
    virtual ~TensorAccess() = default;
    /// fp32 host copies of the MoE block of `layer_slot` (see --dump-tensors in docs/report-schema.md).
    virtual std::vector<NamedTensor> moe_block_tensors(int64_t layer_slot) const = 0;
    /// What --check reads: the same, or (with an I32 tensor "routed_experts" [R]) the expert tensors of only those
    /// R experts, in that order (a GPU with hundreds of experts need not copy them all to the host).
    virtual std::vector<NamedTensor> moe_check_tensors(int64_t layer_slot) const {
        return moe_block_tensors(layer_slot);
    }
};

/// Capability::device_counters: the device's own counters (clocks, throttle reasons, energy), read just before and
/// just after the measured steps (the host's counters are the runner's).
class DeviceCounters {
public:
    static constexpr Capability kCapability = Capability::device_counters;
    virtual ~DeviceCounters() = default;
    virtual json read_device_counters() const = 0;
    /// The report's conditions.device block from two readings and the tokens processed between them (energy per
    /// token).
    virtual json device_conditions(const json& before, const json& after, int64_t tokens) const = 0;
};

}  // namespace moebench
