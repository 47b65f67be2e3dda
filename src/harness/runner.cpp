// SPDX-License-Identifier: Apache-2.0
// run_point: config -> model -> workload -> engine -> backend -> metrics -> one record of the report's runs[].
// Field meanings are documented in docs/report-schema.md; keep the two in step.
#include "engine/runner.hpp"

#include "build_info.hpp"
#include "common/error.hpp"
#include "common/tensor_file.hpp"
#include "config/model_config.hpp"
#include "engine/backend.hpp"
#include "engine/check.hpp"
#include "engine/engine.hpp"
#include "backends/sim/sim_backend.hpp"
#include "config/hardware.hpp"
#include "common/host_memory.hpp"
#include "metrics/ceilings.hpp"
#include "model/accounting.hpp"
#include "model/phase_work.hpp"
#include "metrics/expert_load.hpp"
#include "metrics/host_conditions.hpp"
#include "metrics/routing_stats.hpp"
#include "metrics/stop_rule.hpp"
#include "metrics/timing_stats.hpp"
#include "report/report_json.hpp"
#include "workload/workload.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#if MOEBENCH_HAS_CUDA
#include "backends/cuda/device_info.hpp"
#endif

#ifndef MOEBENCH_BUILD_TYPE
#define MOEBENCH_BUILD_TYPE "unknown"
#endif

namespace moebench {

namespace {

// Router logits kept per layer for the routing statistics (floats); beyond it later steps are left out (and the
// record says how many tokens the statistics cover).
constexpr int64_t kMaxLogitFloatsPerLayer = int64_t{1} << 22;

// What the measured steps of one MoE layer produced, accumulated step after step.
struct MoeAccum {
    int64_t slot = 0;
    int64_t layer = 0;
    int64_t k = 0;
    std::vector<int32_t> ids;            // [steps * T, k], steps in order
    std::vector<float> logits;           // [logit_tokens, E]
    int64_t logit_tokens = 0;
    std::vector<double> expert_gemm_us;  // summed over steps
    int64_t gemm_steps = 0;
    int64_t backend_dropped = 0;         // as reported by the backend
};

std::string layer_kind(const ModelConfig& m, int64_t layer) { return layer_is_moe(m, layer) ? "moe" : "dense"; }

std::string fmt_num(double v) { return fmt::format("{}", v); }

void dump_moe_layer(const std::string& dir, const Backend& backend, const ModelConfig& model, const RunConfig& cfg,
                    int64_t slot, int64_t layer) {
    TensorFile file;
    file.tensors = backend.moe_block_tensors(slot);
    const MoeConfig& moe = model.moe;
    file.metadata = {
        {"format", "moebench.moe_layer/1"},
        {"model", model.name},
        {"family", model.family},
        {"layer", std::to_string(layer)},
        {"backend", backend.name()},
        {"seed", std::to_string(cfg.options.seed)},
        {"workload", cfg.routing},
        {"routing", to_string(moe.routing)},
        {"num_experts", std::to_string(moe.num_experts)},
        {"top_k", std::to_string(moe.top_k)},
        {"norm_topk_prob", moe.norm_topk_prob ? "true" : "false"},
        {"routed_scaling_factor", fmt_num(moe.routed_scaling_factor)},
        {"num_groups", std::to_string(moe.num_groups)},
        {"topk_groups", std::to_string(moe.topk_groups)},
        {"router_jitter_noise", fmt_num(moe.router_jitter_noise)},
        {"num_shared_experts", std::to_string(moe.num_shared_experts)},
        {"shared_expert_gate", moe.shared_expert_gate ? "true" : "false"},
        {"router_bias", moe.router_bias ? "true" : "false"},
        {"router_correction_bias", moe.router_correction_bias ? "true" : "false"},
        {"expert_bias", moe.expert_bias ? "true" : "false"},
        {"activation", to_string(model.activation)},
        {"swiglu_limit", fmt_num(model.swiglu_limit)},
        {"capacity_factor", fmt_num(cfg.options.capacity_factor)},
        {"soft_topn", std::to_string(cfg.options.soft_topn)},
        {"mode", to_string(cfg.shape.mode)},
        {"batch", std::to_string(cfg.shape.batch)},
        {"seq_len", std::to_string(cfg.shape.seq_len)},
        {"context", std::to_string(cfg.shape.context)},
        {"tie_break", "higher score wins; equal scores: lower expert id wins"},
    };
    write_safetensors((std::filesystem::path(dir) / "moe_layer.safetensors").string(), file);
}


// ---- roofline: counted work per phase against ceilings (docs/report-schema.md, "roofline") ----

// The two rates a floor is computed against, and where they came from.
struct RooflineCeilings {
    double peak_flops_per_s = 0;      // 0 = unknown
    double mem_bw_bytes_per_s = 0;    // 0 = unknown
    std::string source;               // "hardware profile <name>" | "measured on this machine" | ""
    std::string note;                 // why they are missing, or what was measured
    json detail = json::object();
};

// Measures this machine's ceilings for the backend about to run (before its weights are allocated).
RooflineCeilings measure_ceilings(const std::string& backend_name, const Backend& backend, const RunConfig& cfg) {
    RooflineCeilings c;
    c.source = "measured on this machine";
    if (backend_name == "cpu") {
        // Other work on the machine only ever lowers a measured ceiling, and a low ceiling puts a run "below its
        // floor": best of 12 read passes (~0.5 s for 1 GiB) and 5 sgemms. With 5 passes a default run on the
        // shared 2-core Xeon read 25.9 GB/s where bench moe (best of 28) read 30-31.
        ReadBuffer buf(0, cfg.options.num_threads);
        Ceiling bw = measure_read_bandwidth(buf, 12);
        Ceiling gemm = measure_sgemm_rate(2048, cfg.options.num_threads, 5);
        c.mem_bw_bytes_per_s = bw.value;
        c.peak_flops_per_s = gemm.value;
        c.detail = {{"mem_bw", {{"value", bw.value}, {"unit", bw.unit}, {"method", bw.method}, {"before", bw.value}}},
                    {"peak_flops", {{"value", gemm.value}, {"unit", gemm.unit}, {"method", gemm.method}}}};
        c.note = "cpu: streaming read bandwidth and OpenBLAS sgemm rate (fp32), measured before the run";
        return c;
    }
#if MOEBENCH_HAS_CUDA
    if (backend_name == "cuda") {
        json info = backend.describe();
        int index = info.value("device_index", 0);
        json m = measure_device_ceilings(index);
        c.mem_bw_bytes_per_s = m.value("read_bw_bytes_per_s", 0.0);
        c.peak_flops_per_s = m.value("bf16_gemm_flops", 0.0);
        c.detail = m;
        c.note = "cuda: device read bandwidth (own kernel) and cuBLAS bf16 GEMM rate, measured before the run";
        return c;
    }
#else
    (void)backend;
#endif
    c.source.clear();
    c.note = "--measure-ceilings: nothing to measure for backend " + backend_name;
    return c;
}

// The cpu read bandwidth once more after the steps, the best of both kept: the machine's neighbours only ever
// lower a measurement, and 12 passes in one moment proved too few on a shared host (a default run read 24.7 GB/s
// where bench moe, best of 28 spread over its iterations, read 30-31). The buffer must dwarf the LLC and leave the
// weights room: up to 40% of MemAvailable, skipped below 4 x LLC.
void remeasure_cpu_bandwidth(RooflineCeilings& c, const RunConfig& cfg) {
    const int64_t want = std::max<int64_t>(4 * llc_bytes(), int64_t(1) << 30);
    const int64_t bytes = std::min<int64_t>(want, mem_available_bytes() * 2 / 5);
    if (bytes < 4 * llc_bytes() || c.mem_bw_bytes_per_s <= 0) return;
    ReadBuffer buf(bytes, cfg.options.num_threads);
    const Ceiling after = measure_read_bandwidth(buf, 12);
    c.mem_bw_bytes_per_s = std::max(c.mem_bw_bytes_per_s, after.value);
    c.detail["mem_bw"]["value"] = c.mem_bw_bytes_per_s;
    c.detail["mem_bw"]["method"] = c.detail["mem_bw"].value("method", std::string()) +
                                   fmt::format(" before the weights, and best of 12 over {:.0f} MiB after the steps: "
                                               "{:.2f} GB/s before, {:.2f} GB/s after, the higher kept",
                                               bytes / 1048576.0, c.detail["mem_bw"].value("before", 0.0) / 1e9,
                                               after.value / 1e9);
    c.note = "cpu: streaming read bandwidth (before the weights and after the steps) and OpenBLAS sgemm rate (fp32)";
}

// Ceilings from a hardware profile: fp32 peak for the cpu backend (it computes in fp32), bf16 otherwise.
RooflineCeilings profile_ceilings(const std::string& profile, const std::string& backend_name) {
    HardwareProfile hw;
    try {
        hw = load_hardware(profile);
    } catch (const ConfigError& e) {
        std::string what = e.what();
        if (what.find("--hardware") != std::string::npos) throw;
        throw ConfigError("hardware (--hardware): " + what);
    }
    RooflineCeilings c;
    c.peak_flops_per_s = backend_name == "cpu" ? hw.fp32_flops : hw.bf16_flops;
    c.mem_bw_bytes_per_s = hw.memory_bw_bytes_per_s;
    c.source = "hardware profile " + hw.name;
    c.note = fmt::format("{} datasheet: {} peak and memory bandwidth", hw.display_name.empty() ? hw.name : hw.display_name,
                         backend_name == "cpu" ? "fp32" : "bf16");
    return c;
}

json rate_or_null(double v) { return v > 0 ? json(v) : json(nullptr); }

// Per-phase counted work (phase_work), summed over the layers run, with the MoE layers' work taken at each
// measured step's actual tokens per expert and averaged over the steps; achieved rates from the phase means.
// The sim models times, not capacity: say when the layers it ran would not fit on the profile's GPUs (their weights
// per rank: everything but the routed experts replicated, the routed experts split over the EP ranks; the KV cache
// and activations come on top). Empty when they fit or the profile gives no capacity.
std::string sim_fit_note(const ModelConfig& model, const std::vector<int64_t>& layers, const RunConfig& cfg,
                         const json& backend_info) {
    const double capacity = backend_info.value("hardware", json::object()).value("memory_bytes", 0.0);
    if (!(capacity > 0)) return "";
    const double elem_bytes = backend_info.value("dtype", std::string("bf16")) == "fp32" ? 4.0 : 2.0;
    const double ep = static_cast<double>(std::max<int64_t>(1, cfg.options.ep_size));
    double replicated = 0, experts = 0;
    for (int64_t l : layers) {
        replicated += static_cast<double>(attention_params_per_layer(model) + norm_params_per_layer(model));
        if (layer_is_moe(model, l)) {
            replicated += static_cast<double>(router_params_per_layer(model) + shared_expert_params(model));
            experts += static_cast<double>(model.moe.num_experts) * static_cast<double>(routed_expert_params(model));
        } else {
            replicated += static_cast<double>(dense_mlp_params_per_layer(model));
        }
    }
    const double per_rank_bytes = (replicated + experts / ep) * elem_bytes;
    if (per_rank_bytes <= capacity) return "";
    return fmt::format("the {} layer(s) run need {:.1f} GiB of {} weights per GPU (EP {}), more than the {:.1f} GiB "
                       "of the profile: the modeled times assume they fit; size a real layout with moebench plan",
                       layers.size(), per_rank_bytes / 1073741824.0, backend_info.value("dtype", std::string("bf16")),
                       static_cast<int64_t>(ep), capacity / 1073741824.0);
}

json roofline_block(const ModelConfig& model, const RunConfig& cfg, const std::string& backend_name,
                    const json& backend_info, const std::string& times_source, const std::vector<PhaseEntry>& plan,
                    const std::vector<StepTimes>& steps, const std::vector<MoeAccum>& moe,
                    const std::map<Phase, TimingStats>& phase_stats, const RooflineCeilings& ceil) {
    // Element sizes and the MLA form of the backend that ran.
    double elem_bytes = 2;
    MlaForm form = MlaForm::absorbed;
    std::string precision = "bf16 weights and activations (cuda)";
    if (backend_name == "cpu") {
        elem_bytes = 4;
        form = MlaForm::expanded_cache;
        precision = "fp32 weights and activations (cpu)";
    } else if (backend_name == "sim") {
        elem_bytes = backend_info.value("dtype", std::string("bf16")) == "fp32" ? 4 : 2;
        std::string f = backend_info.value("mla_form", std::string("latent_expand"));
        form = f == "absorbed" ? MlaForm::absorbed : f == "expanded_cache" ? MlaForm::expanded_cache : MlaForm::latent_expand;
        precision = backend_info.value("dtype", std::string("bf16")) + " (sim)";
    }
    PhaseWorkOptions wopt;
    wopt.mla_form = form;
    const int64_t T = cfg.shape.num_tokens(), E = model.moe.num_experts;
    const int64_t num_steps = static_cast<int64_t>(steps.size());

    std::map<Phase, PhaseWork> per_phase;
    PhaseWork block;
    double block_measured_us = 0;
    std::vector<std::string> block_phases;
    for (size_t p = 0; p < plan.size(); ++p) {
        const PhaseEntry& e = plan[p];
        const PhaseGroup g = phase_group(e.phase);
        const bool in_block = g == PhaseGroup::router || g == PhaseGroup::dispatch || g == PhaseGroup::experts ||
                              g == PhaseGroup::combine;
        const MoeAccum* acc = nullptr;
        for (const MoeAccum& a : moe)
            if (a.slot == e.slot) acc = &a;
        PhaseWork w;
        if (acc && in_block && acc->k > 0 && E > 0) {
            // Average over the measured steps of the work at that step's tokens per expert.
            const int64_t k = acc->k;
            std::vector<int64_t> tpe(static_cast<size_t>(E));
            for (int64_t i = 0; i < num_steps; ++i) {
                std::fill(tpe.begin(), tpe.end(), 0);
                for (int64_t a = i * T * k; a < (i + 1) * T * k && a < static_cast<int64_t>(acc->ids.size()); ++a)
                    if (acc->ids[a] >= 0 && acc->ids[a] < E) ++tpe[static_cast<size_t>(acc->ids[a])];
                PhaseWork wi = phase_work(model, e.phase, e.layer, cfg.shape, tpe, elem_bytes, elem_bytes,
                                          cfg.options.ep_size, wopt);
                w.flops += wi.flops / num_steps;
                w.weight_bytes += wi.weight_bytes / num_steps;
                w.activation_bytes += wi.activation_bytes / num_steps;
            }
        } else {
            w = phase_work(model, e.phase, e.layer, cfg.shape, {}, elem_bytes, elem_bytes, cfg.options.ep_size, wopt);
        }
        PhaseWork& sum = per_phase[e.phase];
        sum.flops += w.flops;
        sum.weight_bytes += w.weight_bytes;
        sum.activation_bytes += w.activation_bytes;
        if (acc && in_block) {
            block.flops += w.flops;
            block.weight_bytes += w.weight_bytes;
            block.activation_bytes += w.activation_bytes;
            double mean = 0;
            for (int64_t i = 0; i < num_steps; ++i) mean += steps[static_cast<size_t>(i)].phase_us[p];
            block_measured_us += num_steps > 0 ? mean / num_steps : 0.0;
            std::string name(phase_name(e.phase));
            if (std::find(block_phases.begin(), block_phases.end(), name) == block_phases.end())
                block_phases.push_back(name);
        }
    }

    // The work counts every rank (the whole step); with expert parallelism (sim only) the ranks run side by side,
    // so the floors and fractions use the ranks' summed ceilings.
    const double ranks = static_cast<double>(std::max<int64_t>(1, cfg.options.ep_size));
    const double peak = ceil.peak_flops_per_s * ranks, bw = ceil.mem_bw_bytes_per_s * ranks;
    const bool have_ceilings = peak > 0 && bw > 0;
    json phases = json::object();
    for (const auto& [ph, w] : per_phase) {
        auto it = phase_stats.find(ph);
        const double us = it == phase_stats.end() ? 0.0 : it->second.mean_us;
        json j = {{"flops", w.flops},
                  {"bytes", w.bytes()},
                  {"weight_bytes", w.weight_bytes},
                  {"activation_bytes", w.activation_bytes},
                  {"arithmetic_intensity", w.bytes() > 0 ? json(w.flops / w.bytes()) : json(nullptr)},
                  {"mean_us", us},
                  {"achieved_tflops", us > 0 ? json(w.flops / (us * 1e-6) / 1e12) : json(nullptr)},
                  {"achieved_gbps", us > 0 ? json(w.bytes() / (us * 1e-6) / 1e9) : json(nullptr)}};
        if (have_ceilings) {
            Floor f = physical_floor(w.bytes(), w.flops, bw, peak);
            j["floor_us"] = f.floor_us;
            j["bound"] = f.bound;
            j["fraction_of_floor"] = us > 0 ? json(f.floor_us / us) : json(nullptr);
            j["fraction_of_peak_flops"] = us > 0 ? json(w.flops / (us * 1e-6) / peak) : json(nullptr);
            j["fraction_of_mem_bw"] = us > 0 ? json(w.bytes() / (us * 1e-6) / bw) : json(nullptr);
        } else {
            j["floor_us"] = nullptr;
            j["fraction_of_floor"] = nullptr;
        }
        phases[std::string(phase_name(ph))] = j;
    }
    json r = {{"source", "counted"},
              {"times_source", times_source},
              {"precision", precision},
              {"weight_elem_bytes", elem_bytes},
              {"act_elem_bytes", elem_bytes},
              {"mla_form", to_string(form)},
              {"basis", "model/phase_work.hpp: FLOPs (2 per multiply-add) and bytes (weights touched once per step + "
                        "activations) per phase, summed over the layers run; MoE phases at each measured step's "
                        "tokens per expert, averaged over the steps"},
              {"peak_flops_per_s", rate_or_null(ceil.peak_flops_per_s)},
              {"mem_bw_bytes_per_s", rate_or_null(ceil.mem_bw_bytes_per_s)},
              {"ranks", static_cast<int64_t>(ranks)},
              {"ceiling_source", ceil.source.empty() ? json(nullptr) : json(ceil.source)},
              {"phases", phases}};
    if (!ceil.note.empty()) r["ceiling_note"] = ceil.note;
    if (!ceil.detail.empty()) r["ceiling_detail"] = ceil.detail;
    if (!have_ceilings)
        r["floor_unavailable"] = "no ceilings: give --hardware PROFILE (datasheet) or --measure-ceilings (cpu, cuda)";
    if (!block_phases.empty()) {
        json b = {{"phases", block_phases},
                  {"layers", static_cast<int64_t>(moe.size())},
                  {"flops", block.flops},
                  {"bytes", block.bytes()},
                  {"weight_bytes", block.weight_bytes},
                  {"measured_us", block_measured_us},
                  {"basis", "the MoE-layer phases of the router, dispatch, experts and combine groups, per step, "
                            "all MoE layers run; floor = max(bytes / bandwidth, FLOPs / peak) of their summed work"}};
        if (have_ceilings) {
            Floor f = physical_floor(block.bytes(), block.flops, bw, peak);
            b["floor_us"] = f.floor_us;
            b["memory_floor_us"] = f.memory_us;
            b["compute_floor_us"] = f.compute_us;
            b["bound"] = f.bound;
            b["ratio_to_floor"] = f.floor_us > 0 ? json(block_measured_us / f.floor_us) : json(nullptr);
            // Only a measured time below its floor points at an under-measured ceiling.
            const std::string warning = times_source == "measured" ? below_floor_warning(f, block_measured_us) : "";
            if (!warning.empty()) b["floor_warning"] = "the MoE block " + warning;
        } else {
            b["floor_us"] = nullptr;
            b["ratio_to_floor"] = nullptr;
        }
        r["moe_block"] = b;
    }
    return r;
}

}  // namespace

json run_point(const RunConfig& cfg) {
    validate(cfg);
    ModelConfig model = load_model(cfg.model);

    // Layers: the first N of the model (0 = all).
    if (cfg.layers > model.num_layers)
        config_error("layers (--layers)", fmt::format("exceeds the {} layers of model {}", model.num_layers, model.name),
                     std::to_string(cfg.layers),
                     fmt::format("use --layers between 1 and {} (0 = all layers)", model.num_layers));
    int64_t num_run = cfg.layers == 0 ? model.num_layers : cfg.layers;
    std::vector<int64_t> layers(static_cast<size_t>(num_run));
    for (int64_t i = 0; i < num_run; ++i) layers[static_cast<size_t>(i)] = i;

    // Options checked against the model before anything is allocated.
    if (!cfg.dump_tensors.empty() &&
        std::none_of(layers.begin(), layers.end(), [&](int64_t l) { return layer_is_moe(model, l); }))
        config_error("dump_tensors (--dump-tensors)", "no MoE layer among the layers run",
                     fmt::format("--layers {}", num_run), "run more --layers so that a MoE layer is included");
    if (cfg.check && std::none_of(layers.begin(), layers.end(), [&](int64_t l) { return layer_is_moe(model, l); }))
        config_error("check (--check)", "no MoE layer among the layers run, so there is no MoE block to check",
                     fmt::format("--layers {}", num_run), "run more --layers so that a MoE layer is included");
    const int64_t num_experts = model.moe.num_experts;
    if (cfg.options.soft_topn > 0 && cfg.options.soft_topn > num_experts)
        config_error("soft_topn (--soft-topn)", fmt::format("exceeds the {} experts of model {}", num_experts, model.name),
                     std::to_string(cfg.options.soft_topn), fmt::format("use 1..{} (0 = the family's top-k)", num_experts));
    if (cfg.options.ep_size > 1 && num_experts > 0 && num_experts % cfg.options.ep_size != 0)
        config_error("ep (--ep)", fmt::format("does not divide the {} experts of model {}", num_experts, model.name),
                     std::to_string(cfg.options.ep_size), "use an expert-parallel size that divides the expert count");

    // The workload before the backend, so that a bad --routing fails before any allocation.
    std::unique_ptr<Workload> workload = make_workload(cfg.routing, model, cfg.options.seed, "routing (--routing)");
    workload->check_layers(layers);

    // Backend. Its own ConfigError (a bad hardware profile for sim, no device for cuda) names the real cause.
    std::string why;
    std::unique_ptr<Backend> backend = make_backend(cfg.backend, &why, cfg.hardware);
    // Once per process: a sweep would repeat the same line for every point (each report keeps it as backend_note).
    static std::string said;
    if (!why.empty() && why != said) std::cerr << why << "\n";
    said = why;
    if (cfg.check && backend->name() == "sim")
        config_error("--check", "compares computed tensors against the fp32 reference; the sim backend computes none",
                     "backend sim", "use --check with --backend cuda (or cpu, a self-check of the reference path)");

    if (cfg.options.ep_size > 1 && backend->name() == "cpu")
        config_error("ep (--ep)", "the cpu backend runs in one process, so there is no all-to-all to time",
                     std::to_string(cfg.options.ep_size),
                     "use ep 1 on the cpu backend (expert parallelism needs the cuda backend)");
    if (backend->name() != "cuda") {
        if (cfg.options.cuda_graph)
            config_error("cuda_graph (--cuda-graph)", "is a cuda backend option", "backend " + backend->name(),
                         "drop --cuda-graph, or run on the cuda backend");
        if (cfg.options.cold_l2)
            config_error("cold_l2 (--cold-l2)", "is a cuda backend option", "backend " + backend->name(),
                         "drop --cold-l2, or run on the cuda backend");
        if (cfg.options.expert_gemm == "grouped" || cfg.options.expert_gemm == "loop")
            config_error("expert_gemm (--expert-gemm)", "chooses a cuBLAS expert GEMM variant, so it needs the cuda backend",
                         cfg.options.expert_gemm + " with backend " + backend->name(),
                         backend->name() == "cpu" ? "use auto, panel or blas on cpu, or --backend cuda"
                                                  : "use auto, or --backend cuda");
    }
    if (backend->name() != "cpu" && (cfg.options.expert_gemm == "panel" || cfg.options.expert_gemm == "blas"))
        config_error("expert_gemm (--expert-gemm)", "chooses a cpu backend expert GEMM kernel",
                     cfg.options.expert_gemm + " with backend " + backend->name(),
                     backend->name() == "cuda" ? "use auto, grouped or loop on cuda" : "use auto, or --backend cpu");
    if (cfg.measure_ceilings && backend->name() == "sim")
        config_error("measure_ceilings (--measure-ceilings)", "measures this machine; the sim backend models a profile",
                     "backend sim", "drop --measure-ceilings (sim uses --hardware), or use --backend cpu or cuda");

    // Ceilings for the roofline block: measured here before the weights take the memory, else a hardware profile.
    RooflineCeilings ceilings;
    if (cfg.measure_ceilings) {
        ceilings = measure_ceilings(backend->name(), *backend, cfg);
    } else if (!cfg.hardware.empty() || backend->name() == "sim") {
        ceilings = profile_ceilings(cfg.hardware.empty() ? std::string(kSimDefaultHardware) : cfg.hardware,
                                    backend->name());
    }

    backend->prepare(model, layers, cfg.shape, cfg.options);
    const std::vector<PhaseEntry> plan = step_plan(model, layers, cfg.options.ep_size, cfg.include_lm_head);
    const int64_t T = cfg.shape.num_tokens();

    std::vector<MoeAccum> moe;
    for (size_t s = 0; s < layers.size(); ++s)
        if (layer_is_moe(model, layers[s])) {
            MoeAccum a;
            a.slot = static_cast<int64_t>(s);
            a.layer = layers[s];
            moe.push_back(std::move(a));
        }

    // One step with the workload's routing for this step (nullptr when the router decides).
    // The stream is cut into steps of T tokens in order; warm-up steps consume it too, then it restarts at 0 so
    // that the measured steps see the stream from its beginning (the same ids as `moebench trace gen`).
    std::optional<StepRouting> routing;
    auto one_step = [&]() {
        routing = workload->next_step(T, layers);
        backend->set_routing_override(routing ? &*routing : nullptr);
        return run_step(*backend, plan);
    };

    for (int64_t w = 0; w < cfg.warmup; ++w) one_step();
    workload->seek(0);

    std::vector<StepTimes> steps;
    std::vector<double> wall_us;
    const json device_before = backend->read_device_counters();
    const HostSample host_before = sample_host();
    StopRule stop(StopTargets{cfg.iters, cfg.max_iters, cfg.min_time_s, cfg.max_noise});
    while (true) {
        steps.push_back(one_step());
        wall_us.push_back(steps.back().wall_us);
        if (steps.size() == 1 && !cfg.dump_tensors.empty() && !moe.empty())
            dump_moe_layer(cfg.dump_tensors, *backend, model, cfg, moe.front().slot, moe.front().layer);
        for (MoeAccum& a : moe) {
            MoeLayerResult r = backend->moe_result(a.slot);
            a.k = r.routing.k;
            a.ids.insert(a.ids.end(), r.routing.ids.begin(), r.routing.ids.end());
            a.backend_dropped += r.dropped;
            int64_t E = model.moe.num_experts;
            if (!r.router_logits.empty() && (a.logit_tokens + T) * E <= kMaxLogitFloatsPerLayer) {
                a.logits.insert(a.logits.end(), r.router_logits.begin(), r.router_logits.end());
                a.logit_tokens += T;
            }
            if (!r.expert_gemm_us.empty()) {
                a.expert_gemm_us.resize(r.expert_gemm_us.size(), 0.0);
                for (size_t e = 0; e < r.expert_gemm_us.size(); ++e) a.expert_gemm_us[e] += r.expert_gemm_us[e];
                ++a.gemm_steps;
            }
        }
        if (stop.done(wall_us)) break;
    }
    const HostSample host_after = sample_host();
    const json device_after = backend->read_device_counters();
    const int64_t num_steps = static_cast<int64_t>(steps.size());
    json conditions = {{"host", host_conditions(host_before, host_after, T * num_steps)}};
    if (!device_before.is_null())
        conditions["device"] = backend->device_conditions(device_before, device_after, T * num_steps);
    if (cfg.measure_ceilings && backend->name() == "cpu") remeasure_cpu_bandwidth(ceilings, cfg);

    // --check: the first MoE layer of the last measured step against the fp32 host reference (engine/check.hpp).
    json check_block;
    if (cfg.check && !moe.empty()) {
        const int64_t slot = moe.front().slot;
        const LayerRouting* imposed = nullptr;
        if (routing && slot < static_cast<int64_t>(routing->per_layer.size()) &&
            routing->per_layer[static_cast<size_t>(slot)].k > 0)
            imposed = &routing->per_layer[static_cast<size_t>(slot)];
        CheckResult cr = check_moe_block(model, cfg.options, backend->moe_block_tensors(slot), imposed,
                                         check_options_for(backend->name()));
        cr.layer = moe.front().layer;
        check_block = to_json(cr);
        check_block["step"] = "last measured step";
    }

    // ---- latency: per phase (summed over the layers run, per step), per layer, whole step ----
    const std::string source = backend->timing_source();
    std::map<Phase, std::vector<double>> per_phase;  // ordered by the phase vocabulary
    for (const PhaseEntry& e : plan) per_phase[e.phase].assign(static_cast<size_t>(num_steps), 0.0);
    for (int64_t i = 0; i < num_steps; ++i)
        for (size_t p = 0; p < plan.size(); ++p) per_phase[plan[p].phase][static_cast<size_t>(i)] += steps[i].phase_us[p];
    double phase_sum_us = 0;
    std::map<Phase, TimingStats> phase_stats;
    for (const auto& [ph, samples] : per_phase) {
        phase_stats[ph] = summarize(samples);
        phase_sum_us += phase_stats[ph].mean_us;
    }
    json phases = json::object();
    std::map<std::string, double> group_us;
    std::vector<std::string> group_order;
    for (const auto& [ph, st] : phase_stats) {
        json p = to_json(st);
        p["share"] = phase_sum_us > 0 ? st.mean_us / phase_sum_us : 0.0;
        phases[std::string(phase_name(ph))] = p;
        std::string g(phase_group_name(phase_group(ph)));
        if (!group_us.count(g)) group_order.push_back(g);
        group_us[g] += st.mean_us;
    }
    json groups = json::object();
    for (const std::string& g : group_order)
        groups[g] = {{"mean_us", group_us[g]}, {"share", phase_sum_us > 0 ? group_us[g] / phase_sum_us : 0.0}};

    // Per layer: the mean of each phase of that layer, and the layer's total.
    json per_layer = json::array();
    std::map<std::string, std::vector<double>> layer_totals_by_kind;
    for (size_t s = 0; s < layers.size(); ++s) {
        json lp = json::object();
        double total = 0;
        for (size_t p = 0; p < plan.size(); ++p) {
            if (plan[p].slot != static_cast<int64_t>(s)) continue;
            std::vector<double> samples(static_cast<size_t>(num_steps));
            for (int64_t i = 0; i < num_steps; ++i) samples[static_cast<size_t>(i)] = steps[i].phase_us[p];
            TimingStats st = summarize(samples);
            lp[std::string(phase_name(plan[p].phase))] = {{"mean_us", st.mean_us}, {"p50_us", st.p50_us}};
            total += st.mean_us;
        }
        std::string kind = layer_kind(model, layers[s]);
        layer_totals_by_kind[kind].push_back(total);
        per_layer.push_back({{"layer", layers[s]}, {"kind", kind}, {"mean_us", total}, {"phases", lp}});
    }

    // Whole model: once-per-step phases + the mean layer of each kind times the model's count of that kind.
    bool extrapolated = num_run != model.num_layers;
    json whole = {{"source", source}, {"extrapolated", extrapolated}};
    {
        double once_us = 0;
        for (const PhaseEntry& e : plan)
            if (e.slot < 0) once_us += phase_stats[e.phase].mean_us;
        std::map<std::string, int64_t> model_counts = {{"moe", model.num_moe_layers()}, {"dense", model.num_dense_layers()}};
        if (model.moe.num_experts <= 0) model_counts = {{"moe", 0}, {"dense", model.num_layers}};
        double step_us = once_us;
        std::string missing;
        json method = json::object();
        for (const auto& [kind, count] : model_counts) {
            if (count == 0) continue;
            auto it = layer_totals_by_kind.find(kind);
            if (it == layer_totals_by_kind.end()) {
                missing = "no " + kind + " layer was run; use more --layers";
                break;
            }
            double mean = 0;
            for (double v : it->second) mean += v;
            mean /= static_cast<double>(it->second.size());
            step_us += mean * static_cast<double>(count);
            method[kind] = {{"layers_run", it->second.size()}, {"layer_mean_us", mean}, {"model_layers", count}};
        }
        if (!missing.empty()) {
            whole["unavailable"] = missing;
        } else {
            whole["step_us"] = step_us;
            whole["tokens_per_s"] = step_us > 0 ? static_cast<double>(T) / (step_us * 1e-6) : 0.0;
            whole["method"] = extrapolated ? "once-per-step phases + mean layer time of each kind x the model's count"
                                           : "sum of phase means over all layers";
            whole["per_kind"] = method;
            whole["includes_embed_and_head"] = cfg.include_lm_head;
        }
    }

    // The step: the host clock around the whole step when the phases are measured; for a modeled backend (sim)
    // the host time means nothing, so the step is the sum of its modeled phases.
    const bool measured = source == "measured";
    std::vector<double> step_samples = wall_us;
    if (!measured)
        for (int64_t i = 0; i < num_steps; ++i) {
            double sum = 0;
            for (double v : steps[i].phase_us) sum += v;
            step_samples[static_cast<size_t>(i)] = sum;
        }
    TimingStats step_stats = summarize(step_samples);
    json latency = {{"source", source},
                    {"step", to_json(step_stats)},
                    {"step_clock", measured ? "host steady_clock around begin_step..end_step"
                                            : "sum of the modeled phases (" + source + ")"},
                    {"phase_sum_us", phase_sum_us},
                    {"step_minus_phase_sum_us", step_stats.mean_us - phase_sum_us},
                    {"phases", phases},
                    {"groups", groups},
                    {"per_layer", per_layer},
                    {"step_samples_us", step_samples},
                    {"whole_model", whole}};

    // ---- expert load and routing, per MoE layer ----
    const int64_t E = model.moe.num_experts;
    json load_layers = json::array(), routing_layers = json::array();
    for (const MoeAccum& a : moe) {
        int64_t n_tok = a.k > 0 ? static_cast<int64_t>(a.ids.size()) / a.k : 0;
        ExpertLoad load = expert_load(a.ids.data(), n_tok, a.k, E);
        json l = to_json(load);
        l.erase("source");
        l["layer"] = a.layer;
        l["num_tokens"] = n_tok;
        l["capacity_dropped"] = a.backend_dropped;  // the backend's count; `dropped` also counts -1 ids of a trace
        l["k"] = a.k;
        int64_t steps_per_window = std::max<int64_t>(1, (num_steps + 31) / 32);
        l["windows"] = to_json(load_windows(a.ids.data(), n_tok, a.k, E, steps_per_window * T));
        std::vector<int64_t> coact = coactivation_counts(a.ids.data(), n_tok, a.k, E);
        json cm = json::array();
        for (int64_t i = 0; i < E; ++i)
            cm.push_back(std::vector<int64_t>(coact.begin() + i * E, coact.begin() + (i + 1) * E));
        l["coactivation"] = cm;
        if (a.gemm_steps > 0) {
            std::vector<double> mean_us(a.expert_gemm_us.size());
            for (size_t e = 0; e < mean_us.size(); ++e) mean_us[e] = a.expert_gemm_us[e] / static_cast<double>(a.gemm_steps);
            l["expert_gemm_us"] = mean_us;
            l["expert_gemm_source"] = source;
        } else {
            l["expert_gemm_us"] = json::array();
        }
        load_layers.push_back(l);

        // Stream order (step after step, row after row); prefill sequences are contiguous runs of seq_len tokens.
        std::vector<int64_t> seq_starts;
        if (cfg.shape.mode == Mode::prefill)
            for (int64_t t = 0; t < n_tok; t += cfg.shape.seq_len) seq_starts.push_back(t);
        SwitchStats sw = switch_stats(a.ids.data(), n_tok, a.k, seq_starts);
        json r = {{"layer", a.layer}, {"switch_rate", sw.switch_rate}, {"switch_pairs", sw.num_pairs},
                  {"mean_overlap", sw.mean_overlap}};
        if (a.logit_tokens > 0) {
            RouterStats rs = router_stats(a.logits.data(), a.logit_tokens, E);
            r["entropy_bits_mean"] = rs.entropy_bits_mean;
            r["entropy_bits_p95"] = rs.entropy_bits_p95;
            r["entropy_normalized"] = rs.entropy_norm_mean;
            r["top1_prob_mean"] = rs.top1_prob_mean;
            r["logit_min"] = rs.logit_min;
            r["logit_max"] = rs.logit_max;
            r["logit_range_mean"] = rs.logit_range_mean;
            r["logit_tokens"] = a.logit_tokens;
        }
        routing_layers.push_back(r);
    }

    // Where the ids and logits really came from: the sim backend has no router (it routes as its describe() says),
    // and without an override every cpu/cuda step routes the same seeded tokens.
    const json backend_info = backend->describe();
    const bool is_sim = backend->name() == "sim", overridden = workload->overrides_routing();
    const std::string ids_from =
        overridden ? "workload: " + workload->describe()
        : is_sim   ? "the sim backend (no router): " + backend_info.value("routing", std::string("its own routing"))
                   : "the model's router (" + std::string(to_string(model.moe.routing)) + ")";
    std::string load_basis = "final expert ids of the measured steps (after override, soft top-N, capacity)";
    if (!overridden && !is_sim)
        load_basis += "; with the router workload every step embeds the same seeded tokens (steps are identical, so "
                      "that their times compare), so the counts repeat one step's; use a synthetic workload or a trace "
                      "for load over a stream";
    json record;
    record["status"] = "ok";
    record["axes"] = {{"backend", backend->name()},       {"mode", to_string(cfg.shape.mode)},
                      {"batch", cfg.shape.batch},         {"seq_len", cfg.shape.seq_len},
                      {"context", cfg.shape.context},     {"routing", cfg.routing},
                      {"ep", cfg.options.ep_size},        {"capacity_factor", cfg.options.capacity_factor},
                      {"soft_topn", cfg.options.soft_topn}, {"layers", num_run}};
    record["model"] = model.name;
    record["mode"] = to_string(cfg.shape.mode);
    record["batch"] = cfg.shape.batch;
    record["seq_len"] = cfg.shape.mode == Mode::decode ? 1 : cfg.shape.seq_len;
    record["context"] = cfg.shape.mode == Mode::decode ? cfg.shape.context : 0;  // prefill starts from an empty cache
    record["num_tokens"] = T;
    record["backend"] = backend->name();
    if (!why.empty()) record["backend_note"] = why;
    if (is_sim) {
        const std::string fit = sim_fit_note(model, layers, cfg, backend_info);
        if (!fit.empty()) {
            record["sim_fit_warning"] = fit;
            std::cerr << "warning: sim: " << fit << "\n";
        }
    }
    record["backend_info"] = backend_info;
    record["seed"] = cfg.options.seed;
    json kinds = json::array();
    for (int64_t l : layers) kinds.push_back(layer_kind(model, l));
    double measured_s = 0;
    for (double w : wall_us) measured_s += w * 1e-6;
    record["layers"] = {{"run", layers}, {"model_total", model.num_layers}, {"kinds", kinds},
                        {"extrapolated", extrapolated}};
    record["iterations"] = {{"warmup", cfg.warmup}, {"measured", num_steps}, {"stop_reason", stop.reason()},
                            {"measured_time_s", measured_s}, {"noise", stop.noise()}, {"noise_rule", kNoiseRule}};
    record["latency"] = latency;
    record["conditions"] = conditions;
    record["throughput"] = {{"source", source},
                            {"tokens_per_s",
                             step_stats.mean_us > 0 ? static_cast<double>(T) / (step_stats.mean_us * 1e-6) : 0.0},
                            {"basis", "num_tokens / mean end-to-end step time of the layers run"}};
    record["expert_load"] = {{"source", "counted"},
                             {"basis", load_basis},
                             {"per_layer", load_layers}};
    record["routing"] = {{"source", "counted"},
                         {"workload", cfg.routing},
                         {"ids_from", ids_from},
                         {"logits_from", is_sim ? "none: the sim backend runs no router GEMM"
                                             : "router GEMM on the step's hidden states (before any override)"},
                         {"switch_order", cfg.shape.mode == Mode::decode
                                              ? "stream order (step after step, batch row after row), one sequence"
                                              : "consecutive tokens of each prefill sequence"},
                         {"per_layer", routing_layers}};
    if (!check_block.is_null()) record["check"] = check_block;
    try {
        record["roofline"] = roofline_block(model, cfg, backend->name(), record["backend_info"], source, plan, steps, moe,
                                            phase_stats, ceilings);
    } catch (const Error& e) {
        record["roofline"] = {{"source", "counted"}, {"unavailable", e.what()}};
    }
    return record;
}

json report_context(int /*argc_or_0*/, const std::string& command_line) {
    return json{{"tool", {{"name", "moebench"}, {"version", MOEBENCH_VERSION}, {"git_rev", MOEBENCH_GIT_REV},
                          {"build_type", MOEBENCH_BUILD_TYPE}}},
                {"command", command_line},
                {"created_utc", utc_now(false)},
                {"environment", environment_block()}};
}

json resolved_config(const RunConfig& cfg) {
    return json{{"run", run_config_to_json(cfg)}, {"model", model_to_json(load_model(cfg.model))}};
}

}  // namespace moebench
