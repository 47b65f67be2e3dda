// SPDX-License-Identifier: Apache-2.0
#include "harness/validate.hpp"
#include "workload/expert_cache.hpp"

#include "backends/registry.hpp"
#include "comm/process_group.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/text_list.hpp"
#include "config/run_fields.hpp"

#include <algorithm>
#include <functional>

namespace moebench {

namespace {

// The known backends for which `accepts` holds, as "cpu or cuda".
std::string backends_where(const std::function<bool(const BackendTraits&)>& accepts) {
    std::vector<std::string> names;
    for (const KnownBackend& b : known_backends())
        if (accepts(b.traits)) names.push_back(b.traits.name);
    return or_list(names);
}

// A run option whose accepted values each backend lists in its traits.
struct ChoiceOption {
    const char* key;   // run field: "expert_gemm"
    const char* what;  // "expert GEMM variant"
    std::vector<std::string> BackendTraits::*values;
    std::string RunOptions::*option;
};
const ChoiceOption kChoiceOptions[] = {
    {"expert_gemm", "expert GEMM variant", &BackendTraits::expert_gemm, &RunOptions::expert_gemm},
    {"attention_kernel", "attention kernel", &BackendTraits::attention_kernel, &RunOptions::attention_kernel},
};

void check_choice(const BackendTraits& t, const ChoiceOption& c, const std::string& value) {
    if (t.accepts(c.values, value)) return;
    const std::string owners = backends_where([&](const BackendTraits& b) { return b.accepts(c.values, value); });
    const std::string field = run_field_label("", c.key);
    if (owners.empty()) {
        std::vector<std::string> per_backend;
        for (const KnownBackend& b : known_backends())
            per_backend.push_back(or_list(b.traits.*c.values) + " (" + b.traits.name + ")");
        config_error(field, std::string("unknown ") + c.what, value, "use " + or_list(per_backend));
    }
    config_error(field, std::string("chooses an ") + c.what + " of the " + owners + " backend",
                 value + " with backend " + t.name,
                 "use " + or_list(t.*c.values) + " on " + t.name + ", or " + flag_of("backend") + " " + owners);
}

// ep N: modeled in one process (sim), or N processes started by a launcher (cpu; one rank each).
void check_expert_parallel(const BackendTraits& t, const RunConfig& cfg) {
    const Layout layout = resolve_layout(cfg.layout);
    const int64_t ep = layout.moe_ep;
    if (layout.resident_experts > 0 || layout.offload_ratio > 0)  // the policy table: did-you-mean and the list
        offload_policy(layout.offload_policy, run_field_label("", "offload_policy"));
    if ((layout.attn_tp > 1 || layout.moe_tp > 1) && !t.tensor_parallel) {
        const bool attn = layout.attn_tp > 1;
        const std::string modeling = backends_where([](const BackendTraits& b) { return b.tensor_parallel; });
        config_error(run_field_label("", attn ? "tp" : "moe_tp"),
                     "splits layers over GPUs (tensor parallelism); the " + t.name + " backend runs none",
                     std::to_string(attn ? layout.attn_tp : layout.moe_tp) + " with backend " + t.name,
                     "model it with " + flag_of("backend") + " " + modeling + ", or drop it: " + t.name +
                         " runs expert parallelism with data-parallel attention (" + flag_of("ep") + " N)");
    }
    const Communicator* comm = process_group();
    const int64_t world = comm ? comm->world_size() : 1;
    const std::string field = run_field_label("", "ep");
    const std::string multi = backends_where([](const BackendTraits& b) { return b.offers(Capability::ep_processes); });
    const std::string modeled =
        backends_where([](const BackendTraits& b) { return b.offers(Capability::ep_modeled_ranks); });
    if (world > 1) {
        if (!t.offers(Capability::ep_processes))
            config_error(
                run_field_label("", "backend"),
                fmt::format("runs in one process, but {} processes were launched", world), t.name,
                "use " + flag_of("backend") + " " + multi + " under mpirun (or run " + t.name + " without mpirun)");
        if (ep != world)
            config_error(field, fmt::format("must equal the {} processes the launcher started (one rank each)", world),
                         std::to_string(ep), fmt::format("use {} {} (or mpirun -np {})", flag_of("ep"), world, ep));
        if (cfg.shape.batch < world)
            config_error(run_field_label("", "batch"),
                         fmt::format("gives some of the {} ranks no sequence (each rank runs its own)", world),
                         std::to_string(cfg.shape.batch), fmt::format("use {} {} or more", flag_of("batch"), world));
        if (cfg.options.capacity_factor > 0)
            config_error(run_field_label("", "capacity_factor"),
                         "is not supported with expert parallelism over processes yet (each expert's capacity would "
                         "need the whole step's arrival order)",
                         fmt::format("{}", cfg.options.capacity_factor), "use 0 (dropless) under mpirun");
        if (cfg.check)
            config_error(run_field_label("", "check"),
                         "needs every expert's weights in one process; a rank holds only its own",
                         flag_of("ep") + " " + std::to_string(ep),
                         "check the single-process run (same seed: the outputs match; " + flag_of("dump_tensors") +
                             " compares them)");
        if (layout.redundant_experts > 0)
            config_error(run_field_label("", "redundant_experts"),
                         "replicates each layer's own hottest experts, so a rank's experts differ by layer; a process "
                         "holds one set of experts for every layer",
                         std::to_string(layout.redundant_experts) + " under mpirun",
                         fmt::format("model it in one process ({} {} {} {}), or replicate by a trace for every layer "
                                     "at once: moebench place {} T {} {} {} R -o P.json, then {} P.json",
                                     flag_of("backend"), modeled, flag_of("ep"), ep, flag_of("trace"), flag_of("ep"),
                                     ep, flag_of("replicas"), flag_of("placement")));
        return;
    }
    if (ep > 1 && !t.offers(Capability::ep_modeled_ranks)) {
        if (t.offers(Capability::ep_processes))
            config_error(field, fmt::format("runs {} ranks as {} processes, but this is one process", ep, ep),
                         std::to_string(ep),
                         mpi_built() ? fmt::format("launch it with `mpirun -np {} moebench run {} {} ...` (or srun), "
                                                   "or use {} {} to model the ranks",
                                                   ep, flag_of("ep"), ep, flag_of("backend"), modeled)
                                     : fmt::format("rebuild with MPI (apt install libopenmpi-dev openmpi-bin; "
                                                   "scripts/setup.sh), then `mpirun -np {} moebench run {} {} ...`; or "
                                                   "use {} {}",
                                                   ep, flag_of("ep"), ep, flag_of("backend"), modeled));
        config_error(field, "backend " + t.name + " runs in one process, so there is no all-to-all to time",
                     std::to_string(ep),
                     fmt::format("use {} 1 on {}, {} {} to model expert parallelism, or mpirun -np {} with {} {}",
                                 flag_of("ep"), t.name, flag_of("backend"), modeled, ep, flag_of("backend"), multi));
    }
    if (!cfg.layout.placement.empty() && ep == 1)
        config_error(run_field_label("", "placement"), "places experts on expert-parallel ranks; this run has one",
                     cfg.layout.placement,
                     fmt::format("add {} N (under mpirun -np N, or with {} {}), or drop {}", flag_of("ep"),
                                 flag_of("backend"), modeled, flag_of("placement")));
}

// The number formats asked for against what the backend computes (its traits list the formats of each class).
void check_precision(const BackendTraits& t, const PrecisionRequest& req) {
    const Precision p = resolve_precision(req, t.native_precision);
    const struct {
        const char* key;
        DType dtype;
        const std::vector<DType>& accepted;
        std::vector<DType> BackendTraits::*list;
    } classes[] = {{"dtype", p.dense_weights, t.weight_dtypes, &BackendTraits::weight_dtypes},
                   {"expert_dtype", p.expert_weights, t.weight_dtypes, &BackendTraits::weight_dtypes},
                   {"kv_dtype", p.kv_cache, t.kv_dtypes, &BackendTraits::kv_dtypes},
                   {"dispatch_dtype", p.dispatch, t.dispatch_dtypes, &BackendTraits::dispatch_dtypes}};
    for (const auto& c : classes) {
        if (std::find(c.accepted.begin(), c.accepted.end(), c.dtype) != c.accepted.end()) continue;
        std::vector<std::string> names;
        for (DType d : c.accepted) names.emplace_back(to_string(d));
        const DType dtype = c.dtype;
        const auto list = c.list;
        const std::string owners = backends_where([&](const BackendTraits& b) {
            return std::find((b.*list).begin(), (b.*list).end(), dtype) != (b.*list).end();
        });
        config_error(
            run_field_label("", c.key),
            "is a format the " + t.name + " backend does not compute (it computes " + or_list(names) + ")",
            std::string(to_string(dtype)) + " with backend " + t.name,
            "use auto or " + or_list(names) + (owners.empty() ? "" : ", or " + flag_of("backend") + " " + owners));
    }
}

}  // namespace

void validate_run(RunConfig& cfg) {
    validate(cfg);
    // The layout as every report records it: each size given (a re-run of the report resolves to the same layout).
    const Layout layout = resolve_layout(cfg.layout);
    cfg.layout = layout_request_of(layout);
    const std::vector<std::string> choices = backend_choices();
    if (std::find(choices.begin(), choices.end(), cfg.backend) == choices.end())
        config_error(run_field_label("", "backend"), "unknown backend", cfg.backend, "use " + or_list(choices));
    if (const BackendTraits* t = find_backend_traits(cfg.backend)) {
        check_backend_accepts(*t, cfg);
    } else {
        // "auto": its pick is checked once made; an option no backend accepts is refused now.
        BackendTraits any;
        any.name = "auto";
        for (const ChoiceOption& c : kChoiceOptions) {
            (any.*c.values).clear();
            for (const KnownBackend& b : known_backends())
                for (const std::string& v : b.traits.*c.values)
                    if (!any.accepts(c.values, v)) (any.*c.values).push_back(v);
            check_choice(any, c, cfg.options.*c.option);
        }
    }
}

void check_backend_runs_model(const BackendTraits& t, const ModelConfig& m, const std::vector<int64_t>& layers) {
    const bool linear =
        std::any_of(layers.begin(), layers.end(), [&](int64_t l) { return m.is_linear_attention_layer(l); });
    if (linear && !t.linear_attention)
        config_error(run_field_label("", "backend"),
                     std::string("does not run linear attention yet (") + to_string(m.linear_attn.kind) + ", " +
                         std::to_string(m.num_linear_attention_layers()) + " of " + m.name + "'s layers)",
                     t.name,
                     "use " + flag_of("backend") + " " +
                         backends_where([](const BackendTraits& b) { return b.linear_attention; }) + "; the " + t.name +
                         " backend has no linear-attention kernel yet");
    if (m.attn.output_gate && !t.attention_output_gate &&
        std::any_of(layers.begin(), layers.end(), [&](int64_t l) { return !m.is_linear_attention_layer(l); }))
        config_error(run_field_label("", "backend"), "does not run the gated attention output of " + m.name + " yet",
                     t.name,
                     "use " + flag_of("backend") + " " +
                         backends_where([](const BackendTraits& b) { return b.attention_output_gate; }) + "; the " +
                         t.name + " backend has no kernel for it yet");
}

void check_backend_accepts(const BackendTraits& t, const RunConfig& cfg) {
    for (const ChoiceOption& c : kChoiceOptions) check_choice(t, c, cfg.options.*c.option);
    for (const auto& [key, on] : {std::pair<std::string, bool>{"cuda_graph", cfg.options.cuda_graph},
                                  {"cold_l2", cfg.options.cold_l2},
                                  {"expert_times", cfg.options.expert_times}})
        if (on && !t.accepts_switch(key)) {
            // An init-capture: clang before 16 cannot capture a structured binding (the sanitizer tree is clang 14).
            const std::string owners =
                backends_where([&key = key](const BackendTraits& b) { return b.accepts_switch(key); });
            config_error(run_field_label("", key), "is an option of the " + owners + " backend", "backend " + t.name,
                         "drop " + flag_of(key) + ", or use " + flag_of("backend") + " " + owners);
        }
    check_expert_parallel(t, cfg);
    check_precision(t, cfg.precision);
    const std::string computing = backends_where([](const BackendTraits& b) { return b.offers(Capability::tensors); });
    if (cfg.check && !t.offers(Capability::tensors))
        config_error(run_field_label("", "check"),
                     "compares computed tensors against the fp32 reference; the " + t.name + " backend computes none",
                     "backend " + t.name, "use " + flag_of("check") + " with " + flag_of("backend") + " " + computing);
    if (!cfg.dump_tensors.empty() && !t.offers(Capability::tensors))
        config_error(run_field_label("", "dump_tensors"),
                     "writes computed tensors; the " + t.name + " backend computes none", "backend " + t.name,
                     "use " + flag_of("dump_tensors") + " with " + flag_of("backend") + " " + computing);
    if (cfg.measure_ceilings && !t.offers(Capability::ceilings))
        config_error(run_field_label("", "measure_ceilings"),
                     "measures this machine; the " + t.name + " backend measures nothing", "backend " + t.name,
                     fmt::format("drop {} ({} gives datasheet ceilings), or use {} ", flag_of("measure_ceilings"),
                                 flag_of("hardware"), flag_of("backend")) +
                         backends_where([](const BackendTraits& b) { return b.offers(Capability::ceilings); }));
}

RunOptions resolved_options(const RunConfig& cfg, const BackendTraits& t) {
    RunOptions o = cfg.options;
    o.layout = resolve_layout(cfg.layout);
    o.precision = resolve_precision(cfg.precision, t.native_precision);
    return o;
}

std::vector<int64_t> layers_to_run(const ModelConfig& model, const RunConfig& cfg) {
    const int64_t total = model.num_layers, first = cfg.first_layer;
    if (first >= total)
        config_error(run_field_label("", "first_layer"),
                     fmt::format("is beyond the last layer of model {} (layers 0 to {})", model.name, total - 1),
                     std::to_string(first), fmt::format("use {} between 0 and {}", flag_of("first_layer"), total - 1));
    const int64_t left = total - first;  // layers from `first` to the model's end
    if (cfg.layers > left)
        config_error(run_field_label("", "layers"),
                     first == 0
                         ? fmt::format("exceeds the {} layers of model {}", total, model.name)
                         : fmt::format("exceeds the {} layers of model {} from layer {} on", left, model.name, first),
                     std::to_string(cfg.layers),
                     fmt::format("use {} between 1 and {} (0 = all layers{})", flag_of("layers"), left,
                                 first == 0 ? "" : " from " + flag_of("first_layer") + " on"));
    const int64_t num_run = cfg.layers == 0 ? left : cfg.layers;
    std::vector<int64_t> layers(static_cast<size_t>(num_run));
    for (int64_t i = 0; i < num_run; ++i) layers[static_cast<size_t>(i)] = first + i;

    const bool any_moe = std::any_of(layers.begin(), layers.end(), [&](int64_t l) { return model.is_moe_layer(l); });
    if (!any_moe && (!cfg.dump_tensors.empty() || cfg.check)) {
        // The run's layers as given, and a fix that reaches the model's first MoE layer (if it has one).
        const std::string given =
            first == 0 ? fmt::format("{} {}", flag_of("layers"), num_run)
                       : fmt::format("{} {} {} {}", flag_of("first_layer"), first, flag_of("layers"), num_run);
        int64_t first_moe = -1;
        for (int64_t l = 0; l < total && first_moe < 0; ++l)
            if (model.is_moe_layer(l)) first_moe = l;
        const std::string reach =
            first_moe < 0 ? fmt::format("model {} has no MoE layer", model.name)
                          : fmt::format("run more {}, or {} {} {} 1 (its first MoE layer)", flag_of("layers"),
                                        flag_of("first_layer"), first_moe, flag_of("layers"));
        if (!cfg.dump_tensors.empty())
            config_error(run_field_label("", "dump_tensors"), "no MoE layer among the layers run", given, reach);
        config_error(run_field_label("", "check"),
                     "no MoE layer among the layers run, so there is no MoE block to check", given, reach);
    }
    const int64_t num_experts = model.moe.num_experts;
    if (cfg.options.soft_topn > 0 && cfg.options.soft_topn > num_experts)
        config_error(run_field_label("", "soft_topn"),
                     fmt::format("exceeds the {} experts of model {}", num_experts, model.name),
                     std::to_string(cfg.options.soft_topn),
                     fmt::format("use 1..{} (0 = the family's top-k)", num_experts));
    return layers;
}

}  // namespace moebench
