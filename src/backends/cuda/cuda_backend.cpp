// SPDX-License-Identifier: Apache-2.0
// CudaBackend's lifecycle and timing: construction, describe, steps, marks, the CUDA graph state, phase dispatch.
#include "backends/cuda/cuda_backend_impl.hpp"

#include "common/flag_names.hpp"

#include "backends/cuda/device_info.hpp"
#include "backends/cuda/nvml.hpp"
#include "metrics/timing_stats.hpp"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstring>

namespace moebench {
namespace cuda_detail {

CudaBackend::CudaBackend() {
    MOEBENCH_CUDA_CHECK(cudaGetDevice(&device_));
    stream_ = std::make_unique<CudaStream>();
    cublas_ = std::make_unique<CublasHandle>(stream_->get());
    cublas_ws_.resize(kCublasWorkspaceBytes);
    MOEBENCH_CUBLAS_CHECK(cublasSetWorkspace(cublas_->get(), cublas_ws_.get(), cublas_ws_.bytes()));
}

CudaBackend::~CudaBackend() {
    abort_capture();
    if (graph_exec_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaGraphExecDestroy(graph_exec_));
    if (plain_exec_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaGraphExecDestroy(plain_exec_));
    if (plain_graph_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaGraphDestroy(plain_graph_));
    if (graph_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaGraphDestroy(graph_));
    if (stream_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaStreamSynchronize(stream_->get()));
}

BackendTraits CudaBackend::traits() const { return cuda_backend_traits(); }

RooflineCeilings CudaBackend::measure_ceilings(const RunOptions&) const {
    RooflineCeilings c;
    c.source = "measured on this machine";
    json m = measure_device_ceilings(device_);
    c.mem_bw_bytes_per_s = m.value("read_bw_bytes_per_s", 0.0);
    c.peak_flops_per_s = m.value("bf16_gemm_flops", 0.0);
    c.detail = m;
    c.note = "cuda: device read bandwidth (own kernel) and cuBLAS bf16 GEMM rate, measured before the run";
    return c;
}

json CudaBackend::describe() const {
    json d;
    d["backend"] = "cuda";
    d["device_index"] = device_;
    try {
        json all = cuda_devices_json(false);
        d["libraries"] = all["libraries"];
        if (all["devices"].is_array() && device_ < static_cast<int>(all["devices"].size()))
            d["device"] = all["devices"][static_cast<size_t>(device_)];
    } catch (const Error& e) {
        d["device"] = std::string("not available: ") + e.what();
    }
    d["precision"] = "bf16 weights and activations, fp32 accumulation (cuBLAS CUBLAS_COMPUTE_32F), fp32 router logits";
    d["weights"] = "generated on the device from the seed (moe_core counter-based RNG), no host copies";
    d["kernel_variant"] = {
        {"expert_gemm", expert_variant_},
        {"expert_gemm_requested", opt_.expert_gemm},
        {"expert_gemm_choice", expert_choice_},
        {"topk", topk_variant_},
        {"attention", attention_variant()},
        {"attention_requested", opt_.attention_kernel},
        {"mla", mla_expand_ ? "expanded (as DeepSeek's prefill): each step, the latent cache through kv_b "
                              "into per-head k_nope and v (head-batched GEMMs), the rope key copied to "
                              "every head, then multi-head flash attention (dk = nope + rope, dv = v_head_dim)"
                            : "weight-absorbed (as DeepSeek's decode: q_nope W_UK, latent cache kv_lora + "
                              "rope, W_UV after attention); the latent rows are read once per block of "
                              "heads (64 with the latent kernel, up to 8 with split)"},
        {"permute", "tile histogram + one scan + stable warp scatter, O(T k) (moe_core order)"},
        {"gather_combine", "16-byte loads when hidden % 8 == 0"}};
    d["expert_gemm_sync"] = device_sized()
                                ? "none: the expert kernel reads the expert list, offsets and tile map on "
                                  "the device"
                                : "per-expert token counts are copied to the host (one stream sync in permute): "
                                  "cuBLAS takes GEMM sizes on the host";
    d["expert_times"] = opt_.expert_times;
    d["lm_head_rows"] = shape_.mode == Mode::decode ? "every token" : "last token of each sequence";
    d["expert_parallel"] = "not supported on the cuda backend (one GPU): ep_size > 1 is refused before the run";
    d["memory_plan_bytes"] = planned_bytes_;
    d["cold_l2"] = opt_.cold_l2 ? json{{"flush_bytes", l2_flush_.bytes()},
                                       {"how", "a read kernel over 2 x L2 before each step (outside the marks)"}}
                                : json(false);
    if (opt_.cuda_graph) {
        json g;
        const TimingStats replay = summarize(graph_replay_us_), phase_sum = summarize(graph_phase_sum_us_);
        g["replays"] = replay.count;
        g["replay_us_mean"] = replay.mean_us;
        g["replay_us_median"] = replay.p50_us;
        g["phase_sum_us_mean"] = phase_sum.mean_us;
        g["phase_sum_us_median"] = phase_sum.p50_us;
        g["source"] = "measured";
        g["note"] = device_sized()
                        ? "the first step runs eagerly, the second is captured and launched; every step from then on "
                          "replays the graph (the expert kernel reads the routing on the device: it may change). "
                          "replay_us = events around cudaGraphLaunch"
                        : "the first step runs eagerly (to learn the expert token counts the cuBLAS variants bake "
                          "in), the second is captured and launched; every step from then on replays the graph "
                          "(a change of the counts stops the run). replay_us = events around cudaGraphLaunch";
        json o;
        if (!plain_us_.empty()) {
            const TimingStats with = summarize(paired_replay_us_), without = summarize(plain_us_);
            o = {{"runs", without.count},
                 {"replay_with_phase_events_us_mean", with.mean_us},
                 {"replay_without_phase_events_us_mean", without.mean_us},
                 {"replay_with_phase_events_us_median", with.p50_us},
                 {"replay_without_phase_events_us_median", without.p50_us},
                 {"overhead_us", with.mean_us - without.mean_us},
                 {"overhead_fraction", without.mean_us > 0 ? (with.mean_us - without.mean_us) / without.mean_us : 0.0},
                 {"overhead_fraction_median", without.p50_us > 0 ? with.p50_us / without.p50_us - 1 : 0.0},
                 {"source", "measured"},
                 {"how", fmt::format("the step captured a second time without phase events; both graphs replayed in "
                                     "turn from the same input, {} pairs during the capture step (a warm-up step); "
                                     "overhead_fraction_median = median with / median without - 1",
                                     kPlainGraphRuns)}};
        } else {
            o = {{"runs", 0}, {"why", plain_error_.empty() ? std::string("no replay yet") : plain_error_}};
        }
        g["phase_event_overhead"] = o;
        d["cuda_graph"] = g;
    } else {
        d["cuda_graph"] = false;
    }
    if (offload_) d["expert_offload"] = offload_json();
    return d;
}

json CudaBackend::read_device_counters() const {
    char pci[32] = {0};
    if (cudaDeviceGetPCIBusId(pci, sizeof(pci), device_) != cudaSuccess)
        return json{{"available", false}, {"reason", "cudaDeviceGetPCIBusId failed"}};
    return nvml_counters(pci);
}

json CudaBackend::device_conditions(const json& before, const json& after, int64_t tokens) const {
    return nvml_conditions(before, after, tokens);
}

// ---------------------------------------------------------------------------------------------------------------------
// Step, marks, graph.
// ---------------------------------------------------------------------------------------------------------------------

void CudaBackend::reset_hidden() {
    MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(hidden_.get(), x0_.get(), x0_.bytes(), cudaMemcpyDeviceToDevice, s()));
}

void CudaBackend::begin_step() {
    num_marks_ = 0;
    // Steps are independent and identical (as on the CPU): each starts from the embedded tokens, also when the plan
    // has no embed phase. Outside the marks and outside any capture.
    reset_hidden();
    // Cold L2: read a buffer of twice the L2 size, so the lines the last step left (weights, activations) are evicted
    // by clean ones (a memset would leave dirty lines that the step then pays to write back).
    if (opt_.cold_l2 && l2_flush_.size() > 0)
        kernels::launch_l2_flush(l2_flush_.get(), static_cast<size_t>(l2_flush_.bytes()), l2_flush_sink_.get(),
                                 num_sms_, s());
    // cuda_graph: step 0 eager (learns counts), step 1 captured, later steps replay (run_phase/mark do nothing).
    // A capture that failed leaves the state eager with steps_done_ still 1: the next step tries again.
    if (graph_state_ == GraphState::eager && steps_done_ == 1) {
        MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
        if (!device_sized())  // the cuBLAS variants bake the eager step's GEMM sizes into the graph
            for (auto& L : layers_)
                if (L->moe) L->graph_counts.assign(L->counts_host.get(), L->counts_host.get() + L->counts_host.size());
        captured_phases_.clear();
        MOEBENCH_CUDA_CHECK(cudaStreamBeginCapture(s(), cudaStreamCaptureModeThreadLocal));
        graph_state_ = GraphState::capturing;
    }
}

void CudaBackend::abort_capture() noexcept {
    if (!capturing() || !stream_) return;
    graph_state_ = GraphState::eager;
    cudaGraph_t broken = nullptr;
    MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaStreamEndCapture(stream_->get(), &broken));
    if (broken) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaGraphDestroy(broken));
    cudaGetLastError();
}

void CudaBackend::record_mark_event(cudaEvent_t ev) {
    MOEBENCH_CUDA_CHECK(
        cudaEventRecordWithFlags(ev, s(), capturing() ? cudaEventRecordExternal : cudaEventRecordDefault));
}

void CudaBackend::mark() {
    const bool replaying = graph_state_ == GraphState::replaying;
    if (num_marks_ >= mark_events_.size()) {
        MOEBENCH_CHECK(!replaying, "cuda graph replay: more marks ({}) than the captured step", num_marks_ + 1);
        mark_events_.emplace_back();
    }
    if (!replaying) {
        try {
            record_mark_event(mark_events_[num_marks_].get());
        } catch (...) {
            abort_capture();
            throw;
        }
    }
    ++num_marks_;
}

std::vector<double> CudaBackend::end_step() {
    std::vector<double> us;
    if (capturing()) {
        graph_state_ = GraphState::eager;  // until the graph is instantiated
        const cudaError_t end = cudaStreamEndCapture(s(), &graph_);
        const cudaError_t inst = end == cudaSuccess ? cudaGraphInstantiate(&graph_exec_, graph_, 0) : end;
        if (inst != cudaSuccess) {
            cudaGetLastError();
            if (graph_) cudaGraphDestroy(graph_);
            graph_ = nullptr;
            graph_exec_ = nullptr;
            throw UnsupportedError(fmt::format("{}: capturing the step failed ({}: {}); run without cuda_graph",
                                               flag_of("cuda_graph"), cudaGetErrorName(inst),
                                               cudaGetErrorString(inst)));
        }
        graph_state_ = GraphState::replaying;
        // The capture step is a warm-up step (the second of a run): the event-overhead pairs run here, so that no
        // measured step carries them.
        capture_plain_graph();
        measure_event_overhead();
    }
    const bool graph_run = graph_state_ == GraphState::replaying;
    if (graph_run) {
        MOEBENCH_CUDA_CHECK(cudaEventRecord(graph_start_.get(), s()));
        MOEBENCH_CUDA_CHECK(cudaGraphLaunch(graph_exec_, s()));
        MOEBENCH_CUDA_CHECK(cudaEventRecord(graph_stop_.get(), s()));
    }
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
    for (size_t i = 1; i < num_marks_; ++i) {
        float ms = 0;
        const cudaError_t err = cudaEventElapsedTime(&ms, mark_events_[i - 1].get(), mark_events_[i].get());
        if (err != cudaSuccess && graph_run) {
            // The phase marks of a replay are event-record nodes of the graph; should a driver not time them,
            // say so plainly instead of inventing numbers.
            cudaGetLastError();
            throw UnsupportedError(
                fmt::format("{}: the phase events recorded inside the graph cannot be timed on this "
                            "driver ({}); run without cuda_graph",
                            flag_of("cuda_graph"), cudaGetErrorString(err)));
        }
        MOEBENCH_CUDA_CHECK(err);
        us.push_back(static_cast<double>(ms) * 1e3);
    }
    if (graph_run) {
        float ms = 0;
        MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, graph_start_.get(), graph_stop_.get()));
        graph_replay_us_.push_back(ms * 1e3);
        double phase_sum_us = 0;
        for (double v : us) phase_sum_us += v;
        graph_phase_sum_us_.push_back(phase_sum_us);
        // The cuBLAS variants baked in the expert GEMM sizes of the captured step: the routing must not have changed.
        // (The gemv kernel reads them on the device: any routing replays.)
        for (auto& L : layers_) {
            if (!L->moe || device_sized()) continue;
            if (!std::equal(L->graph_counts.begin(), L->graph_counts.end(), L->counts_host.get()))
                throw UnsupportedError(fmt::format(
                    "{}: the expert token counts of layer {} changed between steps, but a CUDA graph fixes the GEMM "
                    "sizes; use {} tiled or gemv (sizes read on the device), or run without {}, for routings that "
                    "change from step to step",
                    flag_of("cuda_graph"), L->layer, flag_of("expert_gemm"), flag_of("cuda_graph")));
        }
    }
    ++steps_done_;
    return us;
}

void CudaBackend::capture_plain_graph() {
    if (plain_exec_ || captured_phases_.empty()) return;
    // cold L2: the extra replays would warm it; expert_times: both graphs would hold the per-expert events.
    if (opt_.cold_l2 || opt_.expert_times) {
        plain_error_ = opt_.cold_l2
                           ? "not measured with " + flag_of("cold_l2") + " (the extra replays would warm L2)"
                           : "not measured with " + flag_of("expert_times") + " (its events are in both graphs)";
        return;
    }
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));  // an error here is the step's own, not the extra's
    const cudaError_t begin = cudaStreamBeginCapture(s(), cudaStreamCaptureModeThreadLocal);
    if (begin != cudaSuccess) {  // the overhead is an extra: its failure must not stop the run
        cudaGetLastError();
        plain_error_ = std::string("capturing the step without phase events failed: ") + cudaGetErrorString(begin);
        return;
    }
    graph_state_ = GraphState::capturing;
    try {
        for (const auto& [phase, layer_slot] : captured_phases_) run_phase_eager(phase, layer_slot);
    } catch (const std::exception& e) {  // the overhead is an extra: its failure must not stop the run
        abort_capture();
        graph_state_ = GraphState::replaying;
        plain_error_ = std::string("capturing the step without phase events failed: ") + e.what();
        return;
    }
    graph_state_ = GraphState::replaying;
    const cudaError_t end = cudaStreamEndCapture(s(), &plain_graph_);
    const cudaError_t inst = end == cudaSuccess ? cudaGraphInstantiate(&plain_exec_, plain_graph_, 0) : end;
    if (inst != cudaSuccess) {  // the overhead then goes unmeasured, and describe() says so
        cudaGetLastError();
        if (plain_graph_) cudaGraphDestroy(plain_graph_);
        plain_graph_ = nullptr;
        plain_exec_ = nullptr;
        plain_error_ = cudaGetErrorString(inst);
    }
}

void CudaBackend::measure_event_overhead() {
    if (!plain_exec_) return;
    // Pairs from the same input (hidden_ reset before each launch): the graph without phase events, then with them.
    for (int64_t i = 0; i < kPlainGraphRuns; ++i) {
        reset_hidden();
        MOEBENCH_CUDA_CHECK(cudaEventRecord(plain_start_.get(), s()));
        MOEBENCH_CUDA_CHECK(cudaGraphLaunch(plain_exec_, s()));
        MOEBENCH_CUDA_CHECK(cudaEventRecord(plain_stop_.get(), s()));
        reset_hidden();
        MOEBENCH_CUDA_CHECK(cudaEventRecord(graph_start_.get(), s()));
        MOEBENCH_CUDA_CHECK(cudaGraphLaunch(graph_exec_, s()));
        MOEBENCH_CUDA_CHECK(cudaEventRecord(graph_stop_.get(), s()));
        MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
        float plain_ms = 0, with_ms = 0;
        MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&plain_ms, plain_start_.get(), plain_stop_.get()));
        MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&with_ms, graph_start_.get(), graph_stop_.get()));
        plain_us_.push_back(plain_ms * 1e3);
        paired_replay_us_.push_back(with_ms * 1e3);
    }
    // The step itself starts from the embedded tokens again.
    reset_hidden();
}

void CudaBackend::run_phase(Phase phase, int64_t layer_slot) {
    if (graph_state_ == GraphState::replaying) {
        // Replay: the graph holds the step. Only an imposed routing is host data the graph reads at replay time
        // (a copy node from the pinned staging): refresh the staging with this step's routing.
        if (phase == Phase::topk && layer_slot >= 0) {
            Layer& L = slot(layer_slot);
            if (stage_override(L, layer_slot) != L.graph_override)
                throw UnsupportedError(flag_of("cuda_graph") +
                                       ": the routing override appeared or disappeared after the step was captured; "
                                       "run without cuda_graph");
        }
        return;
    }
    try {
        if (capturing()) captured_phases_.emplace_back(phase, layer_slot);
        run_phase_eager(phase, layer_slot);
    } catch (...) {
        abort_capture();  // a failure inside a capture must not leave the stream capturing
        throw;
    }
}

void CudaBackend::run_phase_eager(Phase phase, int64_t layer_slot) {
    const std::string_view nm = phase_name(phase);
    char name_buf[32] = {0};
    std::memcpy(name_buf, nm.data(), std::min(nm.size(), sizeof(name_buf) - 1));
    nvtxRangePushA(name_buf);
    struct Pop {
        ~Pop() { nvtxRangePop(); }
    } pop;
    Layer* L = layer_slot >= 0 ? &slot(layer_slot) : nullptr;
    auto need = [&] {
        MOEBENCH_CHECK(L != nullptr, "phase {} needs a layer slot", nm);
        return L;
    };
    switch (phase) {
        case Phase::embed: phase_embed(); break;
        case Phase::attn_norm: phase_norm(true, need()); break;
        case Phase::qkv_proj: phase_qkv(*need()); break;
        case Phase::attention: phase_attention(*need()); break;
        case Phase::linear_attention:  // traits().linear_attention is false: the harness refuses such layers first
            MOEBENCH_CHECK(false, "cuda backend: linear attention is not implemented");
        case Phase::o_proj: phase_o_proj(*need()); break;
        case Phase::ffn_norm: phase_norm(false, need()); break;
        case Phase::router_gemm: phase_router_gemm(*need()); break;
        case Phase::topk: phase_topk(*need(), layer_slot); break;
        case Phase::permute: phase_permute(*need()); break;
        case Phase::dispatch_a2a:
        case Phase::combine_a2a: break;  // ep_size > 1 is refused in prepare(): nothing to move on one GPU
        case Phase::expert_fetch: phase_expert_fetch(*need(), layer_slot); break;
        case Phase::expert_up: phase_expert_up(*need()); break;
        case Phase::activation: phase_activation(*need()); break;
        case Phase::expert_down: phase_expert_down(*need()); break;
        case Phase::shared_expert: phase_shared(*need()); break;
        case Phase::unpermute_reduce: phase_combine(*need()); break;
        case Phase::dense_mlp: phase_dense(*need()); break;
        case Phase::final_norm: phase_final_norm(); break;
        case Phase::lm_head: phase_lm_head(); break;
        case Phase::attn_allreduce:
        case Phase::moe_allgather:
        case Phase::moe_allreduce:
        case Phase::dense_allreduce:  // traits().tensor_parallel is false: the harness refuses tensor parallelism first
            MOEBENCH_CHECK(false, "cuda backend: {} needs tensor parallelism, which it does not run", nm);
        case Phase::count_: MOEBENCH_CHECK(false, "invalid phase"); break;
    }
}

}  // namespace cuda_detail

std::unique_ptr<Backend> make_cuda_backend() {
    std::string why;
    if (!cuda_available(&why)) throw UnsupportedError("cuda backend: " + why);
    return std::make_unique<cuda_detail::CudaBackend>();
}

}  // namespace moebench
