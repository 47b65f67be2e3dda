// SPDX-License-Identifier: Apache-2.0
#include "config/run_fields.hpp"

#include "common/overloaded.hpp"
#include "config/hardware.hpp"

namespace moebench {

namespace {

// One accessor per row: a captureless lambda converts to the table's function pointer.
#define MOEBENCH_FIELD(member) [](RunConfig& c) -> RunFieldRef { return &c.member; }

const std::vector<RunField> kRunFields = {
    {"model", "--model", "Model: short name, moebench model file or HF config.json", true, false,
     MOEBENCH_FIELD(model)},
    {"hardware", "--hardware",
     std::string("Hardware profile: short name in configs/hardware or a JSON path. sim models it (default ") +
         kDefaultHardware +
         ", as plan); cpu and cuda run on this machine and take none unless given (then its "
         "figures are the roofline's ceilings)",
     false, false, MOEBENCH_FIELD(hardware)},
    {"backend", "--backend", "Backend (auto picks cuda when a GPU is present, else cpu)", true, true,
     MOEBENCH_FIELD(backend)},
    {"mode", "--mode", "decode | prefill", true, true, MOEBENCH_FIELD(shape.mode)},
    {"batch", "--batch", "Sequences (decode: tokens) per step", true, true, MOEBENCH_FIELD(shape.batch)},
    {"seq_len", "--seq-len", "Prefill: tokens per sequence", true, true, MOEBENCH_FIELD(shape.seq_len)},
    {"context", "--context", "Decode: tokens already in the KV cache (prefill starts empty)", true, true,
     MOEBENCH_FIELD(shape.context)},
    {"layers", "--layers", "Run N layers from --first-layer on (0 = all)", true, true, MOEBENCH_FIELD(layers)},
    {"first_layer", "--first-layer",
     "The model layer the run starts at (0-based), e.g. --first-layer 3 --layers 1: DeepSeek-V3's first MoE layer "
     "alone",
     false, true, MOEBENCH_FIELD(first_layer)},
    {"routing", "--routing", "Workload: router, uniform, zipf:1.2, hot:4:0.6, trace:FILE ...", true, true,
     MOEBENCH_FIELD(routing)},
    {"routing_path", "--routing-path",
     "auto | per-token | statistical: how a backend that models (sim) routes: every token's experts, or each layer's "
     "counts drawn from the workload's shares (auto: statistical where the run allows it; docs/sim-backend.md)",
     true, false, MOEBENCH_FIELD(routing_path)},
    {"seed", "--seed", "Seed for weights, inputs and synthetic routing", false, false, MOEBENCH_FIELD(options.seed)},
    {"capacity_factor", "--capacity-factor", "Expert capacity factor (0 = dropless)", true, true,
     MOEBENCH_FIELD(options.capacity_factor)},
    {"soft_topn", "--soft-topn", "Combine the N most probable experts (0 = family top-k)", true, true,
     MOEBENCH_FIELD(options.soft_topn)},
    {"threads", "--threads", "CPU threads (0 = all cores)", true, false, MOEBENCH_FIELD(options.num_threads)},
    {"ep", "--ep",
     "Expert-parallel ranks, with data-parallel attention over the same ranks (adds dispatch_a2a / combine_a2a)", true,
     true, MOEBENCH_FIELD(layout.ep)},
    {"tp", "--tp", "Attention tensor-parallel GPUs (also dense layers, shared experts, embedding, LM head; 0 = 1)",
     true, true, MOEBENCH_FIELD(layout.tp)},
    {"attention_dp", "--attention-dp", "Attention data-parallel replicas (0 = the GPUs left by --tp)", true, true,
     MOEBENCH_FIELD(layout.attention_dp)},
    {"moe_tp", "--moe-tp", "GPUs each routed expert is split over (0 = the GPUs left by the expert-parallel size)",
     true, true, MOEBENCH_FIELD(layout.moe_tp)},
    {"moe_ep", "--moe-ep", "Expert-parallel GPUs, whole experts each (0 = --ep)", true, true,
     MOEBENCH_FIELD(layout.moe_ep)},
    {"a2a", "--a2a",
     "Expert-parallel dispatch: dedup (a token once per destination rank) | per-expert (a row per assignment)", false,
     false, MOEBENCH_FIELD(layout.a2a)},
    // The formats of each class come from the dtype table (core/precision.cpp).
    {"dtype", "--dtype",
     "Weights (dense layers; the experts too unless --expert-dtype): auto (the backend's own) | " +
         dtype_names_for(TensorClass::dense_weights),
     true, true, MOEBENCH_FIELD(precision.dtype)},
    {"expert_dtype", "--expert-dtype",
     "Routed experts' weights: auto (as --dtype) | " + dtype_names_for(TensorClass::expert_weights), true, true,
     MOEBENCH_FIELD(precision.expert_dtype)},
    {"kv_dtype", "--kv-dtype", "KV cache: auto (the backend's own) | " + dtype_names_for(TensorClass::kv_cache), true,
     true, MOEBENCH_FIELD(precision.kv_dtype)},
    {"dispatch_dtype", "--dispatch-dtype",
     "Dispatch payload: auto (activation dtype) | " + dtype_names_for(TensorClass::dispatch), false, false,
     MOEBENCH_FIELD(precision.dispatch_dtype)},
    {"placement", "--placement", "Expert placement file from `moebench place` (default: contiguous blocks)", false,
     false, MOEBENCH_FIELD(layout.placement)},
    {"redundant_experts", "--redundant-experts",
     "Extra expert slots per MoE layer (experts + N a multiple of the expert-parallel size): replicas of the layer's "
     "hottest experts by the workload's expected load, on the least-loaded ranks (EPLB; 0 = none)",
     true, true, MOEBENCH_FIELD(layout.redundant_experts)},
    {"resident_experts", "--resident-experts",
     "Expert offload (one GPU): routed experts per MoE layer kept on the GPU, the rest fetched from host memory on a "
     "miss (phase expert_fetch; 0 = all resident)",
     true, true, MOEBENCH_FIELD(layout.resident_experts)},
    {"offload_ratio", "--offload-ratio",
     "Expert offload as the share of routed experts kept in host memory (resident = E - round(R x E); 0 = none)", true,
     true, MOEBENCH_FIELD(layout.offload_ratio)},
    {"offload_policy", "--offload-policy",
     "Which experts stay resident: static-hot | lru | lfu | prefetch | optimal (docs/offload.md)", true, true,
     MOEBENCH_FIELD(layout.offload_policy)},
    {"expert_gemm", "--expert-gemm", "Expert GEMMs (the values each backend accepts)", false, false,
     MOEBENCH_FIELD(options.expert_gemm)},
    {"attention_kernel", "--attention-kernel", "Attention kernel (the values each backend accepts)", false, false,
     MOEBENCH_FIELD(options.attention_kernel)},
    {"cuda_graph", "--cuda-graph", "cuda: capture the step in a CUDA graph and time replays", false, false,
     MOEBENCH_FIELD(options.cuda_graph)},
    {"cold_l2", "--cold-l2", "cuda: flush L2 before each step", false, false, MOEBENCH_FIELD(options.cold_l2)},
    {"expert_times", "--expert-times",
     "cuda: time each expert's GEMMs (runs the per-expert loop with an event per expert inside the step)", false, false,
     MOEBENCH_FIELD(options.expert_times)},
    {"warmup", "--warmup", "Warm-up iterations (not measured)", false, false, MOEBENCH_FIELD(warmup)},
    {"iters", "--iters", "Minimum measured iterations", false, false, MOEBENCH_FIELD(iters)},
    {"min_time_s", "--min-time", "Keep measuring until this many seconds", false, false, MOEBENCH_FIELD(min_time_s)},
    {"max_noise", "--max-noise",
     "Keep measuring until the median step time is known to within this fraction (95% CI half-width / median; "
     "0 = off)",
     false, false, MOEBENCH_FIELD(max_noise)},
    {"max_iters", "", "", false, false, MOEBENCH_FIELD(max_iters)},
    {"include_lm_head", "", "", false, false, MOEBENCH_FIELD(include_lm_head)},
    {"out", "--out", "Report file (default results/run-<UTC time>.json)", false, false, MOEBENCH_FIELD(out)},
    {"record", "--record",
     "full | brief: a point's record with its per-layer and per-expert tables (latency, expert load, routing, "
     "ranks), or without them (the step, phases, groups, whole model and summaries; for sweeps of thousands of points)",
     true, false, MOEBENCH_FIELD(record)},
    {"dump_tensors", "--dump-tensors", "Folder for moe_layer.safetensors (first MoE layer)", false, false,
     MOEBENCH_FIELD(dump_tensors)},
    {"check", "--check",
     "Compare the first MoE block with the fp32 host reference (cuda; cpu: self-check); exit 3 on mismatch", false,
     false, MOEBENCH_FIELD(check)},
    {"measure_ceilings", "--measure-ceilings",
     "Measure memory bandwidth and GEMM rate here for the roofline floors (seconds: cpu reads a buffer of "
     "max(4 x LLC, 1 GiB))",
     false, false, MOEBENCH_FIELD(measure_ceilings)},
    {"allow_no_fit", "--allow-no-fit",
     "sim: model a deployment whose weights, KV cache and activations do not fit the profile's memory anyway "
     "(refused otherwise, naming a layout or format that fits; the report says fits: false)",
     false, false, MOEBENCH_FIELD(allow_no_fit)},
    {"rank_timeout", "--rank-timeout",
     "Under mpirun: seconds a collective may wait for the other ranks before the job ends naming the rank it waited "
     "on (auto = max(30 s, 5 x the slowest step so far))",
     false, false, MOEBENCH_FIELD(rank_timeout)},
    {"prune_below", "--prune-below",
     "Prune each MoE layer's experts whose share of the routing is below this fraction (from a trace's counts or a "
     "synthetic workload's shares; a token takes a kept expert instead; quality is not measured; 0 = off)",
     true, true, MOEBENCH_FIELD(prune_below)},
    {"max_cv", "--max-cv",
     "Gate: exit 1 (after the report is written) when a MoE layer's coefficient of variation of tokens per expert "
     "exceeds this (0 = off; docs/report-schema.md, Balance)",
     true, false, MOEBENCH_FIELD(max_cv)},
    {"min_balancedness", "--min-balancedness",
     "Gate: exit 1 (after the report is written) when the balancedness (mean over MoE layers of mean/max load, over "
     "the expert-parallel ranks, or the experts without expert parallelism) falls below this (0 = off)",
     true, false, MOEBENCH_FIELD(min_balancedness)},
};

#undef MOEBENCH_FIELD

}  // namespace

const std::vector<RunField>& run_fields() { return kRunFields; }

RunFieldType run_field_type(const RunField& f) {
    RunConfig probe;
    return std::visit(
        Overloaded{[](int64_t*) { return RunFieldType::whole; }, [](uint64_t*) { return RunFieldType::whole; },
                   [](double*) { return RunFieldType::decimal; }, [](bool*) { return RunFieldType::flag; },
                   [](auto*) { return RunFieldType::text; }},
        f.ref(probe));
}

const RunField* find_run_field(const std::string& key) {
    for (const RunField& f : kRunFields)
        if (f.key == key) return &f;
    return nullptr;
}

json run_fields_json(const RunConfig& cfg, bool record_axes_only) {
    RunConfig c = cfg;  // the accessors take a mutable config
    json j = json::object();
    for (const RunField& f : kRunFields)
        if (!record_axes_only || f.record_axis)
            j[f.key] = std::visit(
                Overloaded{[](Mode* v) { return json(to_string(*v)); }, [](auto* v) { return json(*v); }}, f.ref(c));
    return j;
}

json run_axes(const RunConfig& cfg) { return run_fields_json(cfg, true); }

std::string run_field_label(const std::string& path, const std::string& key) {
    const std::string name = path.empty() ? key : path + "." + key;
    const RunField* f = find_run_field(key);
    return f && !f->flag.empty() ? name + " (" + f->flag + ")" : name;
}

}  // namespace moebench
