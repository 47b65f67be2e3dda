// SPDX-License-Identifier: Apache-2.0
// CpuBackend: preparation (preflight, weights, buffers), phase dispatch, timing marks and results.
// The phases themselves live in cpu_attention.cpp and cpu_moe.cpp.
#include "backends/cpu/cpu_backend_impl.hpp"

#include "backends/cpu/cpu_ops.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/host_memory.hpp"
#include "core/moe_core.cuh"
#include "model/phase_work.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace moebench {

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<cpu::CpuBackend>(); }

namespace cpu {

static_assert(static_cast<int>(RoutingKind::softmax_topk) == core::kRouteSoftmaxTopk);
static_assert(static_cast<int>(RoutingKind::topk_softmax) == core::kRouteTopkSoftmax);
static_assert(static_cast<int>(RoutingKind::sigmoid_group_topk) == core::kRouteSigmoidGroupTopk);
static_assert(static_cast<int>(RoutingKind::softmax_group_greedy) == core::kRouteSoftmaxGroupGreedy);
static_assert(static_cast<int>(RoutingKind::topk_sigmoid) == core::kRouteTopkSigmoid);
static_assert(static_cast<int>(RoutingKind::sparsemixer) == core::kRouteSparsemixer);
static_assert(static_cast<int>(Activation::swiglu) == core::kActSwiglu);
static_assert(static_cast<int>(Activation::geglu) == core::kActGeglu);
static_assert(static_cast<int>(Activation::swiglu_oai) == core::kActSwigluOai);

namespace {
int64_t lm_rows_for(const StepShape& s) {
    // Prefill computes logits only for the last token of each sequence (what serving engines do); decode for all.
    return s.mode == Mode::prefill ? s.batch : s.num_tokens();
}
std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }
}  // namespace

int64_t activation_floats(const ModelConfig& m, const std::vector<int64_t>& layers, const StepShape& shape,
                          int64_t kmax) {
    const Dims d = resolve_dims(m);
    const int64_t T = shape.num_tokens();
    int64_t n = 5 * T * d.H;  // x, x0, xn, fin, tmp
    n += T *
         (d.qkv_width + d.nh * d.qk_dim + 2 * d.nkv * std::max(d.qk_dim, d.v_dim) + std::max(d.nh * d.v_dim, d.la_v));
    if (d.la_in > 0) n += T * (d.la_in + d.la_channels) + shape.batch * d.la_nv * d.la_dk * d.la_dv;
    if (d.mla) n += T * (d.q_lora + d.kv_lora + d.rot_dim + d.kv_lora + d.nh * (d.nope + d.v_dim));
    int64_t moe_slots = 0;
    for (int64_t l : layers) moe_slots += m.is_moe_layer(l);
    if (moe_slots > 0) {
        n += T * d.E + 2 * moe_slots * T * d.H + moe_slots * T * d.E;  // logits, moe_in/out, stored logits
        n += T * kmax * (2 * d.H + 3 * d.I);
        n += T * (3 * d.shared_I + d.H);
    }
    n += T * 3 * d.dense_I;
    const int64_t rows = lm_rows_for(shape);
    n += rows * (d.H + d.V);
    n += 2 * T;  // token ids and positions
    if (shape.mode == Mode::prefill) n += std::min<int64_t>(256, shape.seq_len) * shape.seq_len;  // score block
    return n;
}

BackendTraits CpuBackend::traits() const { return cpu_backend_traits(); }

}  // namespace cpu

BackendTraits cpu_backend_traits() {
    BackendTraits t;
    t.name = "cpu";
    t.native_precision = uniform_precision(DType::fp32);  // every phase in fp32
    t.weight_dtypes = {DType::fp32};
    t.kv_dtypes = {DType::fp32};
    t.dispatch_dtypes = {DType::fp32, DType::bf16, DType::fp8};  // rows encoded on the wire (core/dispatch_dtype.hpp)
    t.capabilities = {Capability::ceilings, Capability::tensors, Capability::ep_processes};
    t.expert_gemm = {"auto", "panel", "blas"};
    t.linear_attention = true;
    t.attention_output_gate = true;
    t.check = {1e-4, 1e-5};  // fp32 against the fp32 reference: only summation order differs
    return t;
}

namespace cpu {

json CpuBackend::describe() const {
    json j;
    j["backend"] = "cpu";
    j["dtype"] = "fp32";
    j["threads"] = pool_ ? pool_->size() : 0;
    const std::string blas = openblas_get_config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." in the builds seen
    j["blas"] = blas.rfind("OpenBLAS", 0) == 0 ? blas : "OpenBLAS " + blas;
    j["blas_threads"] = openblas_get_num_threads();
    const auto kernel = [](bool panels) {
        return panels ? fmt::format("moebench panel kernel (weights in {}-column k-major panels)", kPanelCols)
                      : fmt::format("OpenBLAS sgemm (moebench small-row kernel for <= {} rows)", kSkinnyRows);
    };
    if (d_.E > 0) {
        j["expert_gemm"] = plan_.experts ? "panel" : "blas";
        j["expert_gemm_requested"] = opt_.expert_gemm;
        j["expert_gemm_kernel"] = kernel(plan_.experts);
    }
    j["dense_gemm"] = plan_.dense ? "panel" : "blas";
    j["dense_gemm_kernel"] = kernel(plan_.dense) + (plan_.dense ? ", for weights with a multiple of 16 outputs" : "");
    j["lm_head_gemm"] = w_.lm_head.panels ? "panel" : "blas";
    j["hardware_threads"] = static_cast<int64_t>(std::thread::hardware_concurrency());
    if (ep_on())
        j["expert_parallel"] = {{"rank", ep_.rank},
                                {"ranks", ep_.world},
                                {"a2a", ep_.dedup ? "dedup" : "per-expert"},
                                {"dispatch_dtype", core::to_string(ep_.dtype)},
                                {"combine_dtype", "fp32"},
                                {"experts_held", ep_.experts.size()},
                                {"tokens", T_}};
    if (offload_) j["expert_offload"] = offload_json();
    return j;
}

// Checks of what this backend can run (the config layer validates the rest).
void CpuBackend::check_runnable(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                                const RunOptions& opt) const {
    if (T_ < 1)
        config_error("batch", "the step has no tokens", std::to_string(T_),
                     fmt::format("use {} >= 1 (and {} >= 1)", flag_of("batch"), flag_of("seq_len")));
    for (int64_t l : layers)
        if (l < 0 || l >= model.num_layers)
            config_error("layers", "layer index outside the model", std::to_string(l),
                         fmt::format("use {} <= {}", flag_of("layers"), model.num_layers));
    if (opt.capacity_factor < 0)
        config_error("capacity_factor", "must be >= 0 (0 = dropless)", fmt::format("{}", opt.capacity_factor),
                     "use e.g. " + flag_of("capacity_factor") + " 1.25");
    if (d_.E > 0) {
        if (d_.K < 1 || d_.K > d_.E)
            config_error("moe.top_k", "top-k must be in [1, num_experts]", std::to_string(d_.K),
                         fmt::format("use <= {}", d_.E));
        if (opt.soft_topn < 0 || opt.soft_topn > d_.E)
            config_error("soft_topn", "must be in [0, num_experts]", std::to_string(opt.soft_topn),
                         fmt::format("use <= {}", d_.E));
        const int64_t G = std::max<int64_t>(1, model.moe.num_groups);
        if (d_.E % G != 0 || model.moe.topk_groups > G || model.moe.topk_groups > 64 ||
            (G > 1 && model.moe.topk_groups < G && model.moe.topk_groups * (d_.E / G) < d_.K))
            config_error("moe.topk_groups", "group-limited routing cannot select top_k experts",
                         fmt::format("{} of {} groups", model.moe.topk_groups, G), "fix num_groups/topk_groups");
    }
    if (shape.mode == Mode::decode && shape.context < 0)
        config_error("context", "must be >= 0", std::to_string(shape.context),
                     "use " + flag_of("context") + " 0 or more");
}

// Weight layout: for products of few rows (decode-sized steps) the panel layout and its kernel (see cpu_ops.hpp);
// with many rows, PyTorch's [out, in] for OpenBLAS, whose packing then pays off. Experts by their average rows
// (tokens x k / experts), unless --expert-gemm says; dense weights by the step's tokens; the LM head by its rows
// (one per sequence at prefill).
// With expert parallelism the kernels are chosen by the whole step (`global`), as one process would: every rank
// then runs the kernel the single-process run runs, and its results match.
void CpuBackend::plan_layout(const StepShape& shape, const StepShape& global, const RunOptions& opt) {
    if (opt.expert_gemm != "auto" && opt.expert_gemm != "panel" && opt.expert_gemm != "blas")
        config_error("expert_gemm", "not an expert GEMM kernel of the cpu backend", opt.expert_gemm,
                     "use auto, panel or blas");
    lm_rows_ = lm_rows_for(shape);
    const int64_t T = global.num_tokens();
    PanelPlan& plan = plan_;
    plan.experts =
        d_.E > 0 && (opt.expert_gemm == "panel" || (opt.expert_gemm == "auto" && T * kmax_ <= kPanelMaxRows * d_.E));
    plan.dense = T <= kPanelMaxRows;
    plan.lm_head = lm_rows_for(global) <= kPanelMaxRows;
}

// Memory preflight against MemAvailable, before any allocation.
void CpuBackend::check_memory(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                              int64_t cache_ctx, const WeightSlice& slice) const {
    const double weight_bytes = 4.0 * static_cast<double>(weight_floats(model, layers, shape.batch, cache_ctx, slice));
    const double act_bytes = 4.0 * static_cast<double>(activation_floats(model, layers, shape, kmax_));
    const double avail = static_cast<double>(mem_available_bytes());
    if (avail > 0 && weight_bytes + act_bytes > 0.85 * avail)
        throw UnsupportedError(fmt::format(
            "cpu backend: {} layer(s) of {} need {} of fp32 weights{} and {} of activations, but only {} of RAM is "
            "available (MemAvailable, 85% usable); run fewer {}, a smaller {}/{}{}",
            layers.size(), model.name, gib(weight_bytes), cache_ctx > 0 ? " and KV cache" : "", gib(act_bytes),
            gib(avail), flag_of("layers"), flag_of("batch"), flag_of("seq_len"),
            cache_ctx > 0 ? "/" + flag_of("context") : std::string()));
}

// The activation buffers of the step (weights are allocated by make_weights).
void CpuBackend::allocate_buffers(const std::vector<int64_t>& layers) {
    const int64_t H = d_.H;
    x_.alloc(T_ * H);
    xn_.alloc(T_ * H);
    fin_.alloc(T_ * H);
    tmp_h_.alloc(T_ * H);
    if (!d_.mla) qkv_.alloc(T_ * d_.qkv_width);
    q_.alloc(T_ * d_.nh * d_.qk_dim);
    k_.alloc(T_ * d_.nkv * d_.qk_dim);
    v_.alloc(T_ * d_.nkv * d_.v_dim);
    attn_out_.alloc(T_ * std::max(d_.nh * d_.v_dim, d_.la_v));
    if (d_.la_in > 0) {  // hybrid model: linear attention's projections, conv output and one running state per sequence
        la_proj_.alloc(T_ * d_.la_in);
        la_conv_out_.alloc(T_ * d_.la_channels);
        la_run_.alloc(shape_.batch * d_.la_nv * d_.la_dk * d_.la_dv);
    }
    if (d_.mla) {
        q_a_.alloc(T_ * d_.q_lora);
        kv_a_.alloc(T_ * (d_.kv_lora + d_.rot_dim));
        kv_lat_.alloc(T_ * d_.kv_lora);
        kvb_.alloc(T_ * d_.nh * (d_.nope + d_.v_dim));
    }
    moe_.clear();
    moe_.resize(layers.size());
    bool any_moe = false, any_dense = false;
    for (size_t s = 0; s < layers.size(); ++s) {
        if (w_.layers[s].is_moe) {
            any_moe = true;
            moe_[s].moe_in.alloc(T_ * H);
            moe_[s].moe_out.alloc(T_ * H);
        } else {
            any_dense = true;
        }
    }
    if (any_moe) {
        logits_.alloc(T_ * d_.E);
        counts_.assign(static_cast<size_t>(d_.E), 0);
        offsets_.assign(static_cast<size_t>(d_.E + 1), 0);
        cursor_.assign(static_cast<size_t>(d_.E), 0);
        ensure_routing_capacity(kmax_);
        if (d_.shared_I > 0) {
            sgu_.alloc(T_ * 2 * d_.shared_I);
            sact_.alloc(T_ * d_.shared_I);
            sout_.alloc(T_ * H);
        }
    }
    if (any_dense && d_.dense_I > 0) {
        dgu_.alloc(T_ * 2 * d_.dense_I);
        dact_.alloc(T_ * d_.dense_I);
    }
    lm_in_.alloc(lm_rows_ * H);
    lm_logits_.alloc(lm_rows_ * d_.V);
}

// Token ids and positions: decode tokens sit at position `context`; prefill tokens at 0..S-1 of their sequence.
void CpuBackend::init_tokens(const ModelConfig& model, const StepShape& shape, uint64_t seed) {
    token_ids_.resize(static_cast<size_t>(T_));
    positions_.resize(static_cast<size_t>(T_));
    const uint64_t tok_base = core::rng_base(seed, core::weight_stream(-1, core::kWTokenIds));
    for (int64_t t = 0; t < T_; ++t) {  // expert parallelism: this rank's tokens of the whole step's stream
        const auto global_t = static_cast<uint64_t>(ep_.first_token + t);
        token_ids_[t] = static_cast<int32_t>(core::mix64(tok_base + global_t) % static_cast<uint64_t>(d_.V));
        positions_[t] = shape.mode == Mode::decode ? shape.context : t % shape.seq_len;
    }
    const int64_t num_pos = shape.mode == Mode::decode ? shape.context + 1 : shape.seq_len;
    rope_cs_.alloc(num_pos * d_.rot_dim);
    rope_table(rope_cs_.data(), num_pos, d_.rot_dim, model.attn.rope_theta);
}

PreparedStep CpuBackend::prepare(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                                 const RunOptions& opt, const Topology& topo) {
    m_ = model;
    opt_ = opt;
    layers_ = layers;
    d_ = resolve_dims(model);
    // Expert parallelism over processes: this rank's sequences (data-parallel attention) and its experts.
    ep_ = EpState{};
    StepShape local = shape;
    WeightSlice slice;
    if (topo.world_size > 1) {
        ep_setup(topo, opt);
        local.batch = sequences_on_rank(shape, topo.rank, topo.world_size);
        for (int64_t r = 0; r < topo.rank; ++r) slice.first_sequence += sequences_on_rank(shape, r, topo.world_size);
        ep_.first_token = slice.first_sequence * (shape.mode == Mode::decode ? 1 : shape.seq_len);
        ep_.global_tokens = shape.num_tokens();
        slice.experts = ep_.experts;
    }
    shape_ = local;
    T_ = local.num_tokens();
    check_runnable(model, layers, local, opt);
    kmax_ = std::max<int64_t>(d_.K, opt.soft_topn);
    const int64_t cache_ctx = local.mode == Mode::decode ? local.context : 0;
    plan_layout(local, shape, opt);
    check_memory(model, layers, local, cache_ctx, slice);

    pool_ = std::make_unique<ThreadPool>(opt.num_threads);
    // OpenBLAS threads beyond the usable CPUs only take turns on them (and its idle threads spin).
    openblas_set_num_threads(static_cast<int>(std::min(pool_->size(), usable_cpus())));
    w_ = make_weights(*pool_, model, layers, local.batch, cache_ctx, opt.seed, plan_, slice);
    allocate_buffers(layers);
    init_tokens(model, local, opt.seed);
    has_override_ = false;
    // Steps are independent and identical: each starts from the embedded tokens, even when the engine skips embed.
    x0_.alloc(T_ * d_.H);
    phase_embed();
    std::memcpy(x0_.data(), x_.data(), sizeof(float) * T_ * d_.H);
    offload_setup();
    PreparedStep step;
    step.mla_form = MlaForm::expanded_cache;  // MLA keys and values expanded per head into the cache
    if (d_.E > 0) step.kernels.emplace_back("expert_gemm", plan_.experts ? "panel" : "blas");
    step.kernels.emplace_back("dense_gemm", plan_.dense ? "panel" : "blas");
    return step;
}

void CpuBackend::ensure_routing_capacity(int64_t k) {
    if (k <= static_cast<int64_t>(ids_.size()) / std::max<int64_t>(1, T_) && !ids_.empty()) return;
    const int64_t n = T_ * k;
    ids_.assign(static_cast<size_t>(n), -1);
    wts_.assign(static_cast<size_t>(n), 0.0f);
    slot_of_.assign(static_cast<size_t>(n), -1);
    token_of_row_.assign(static_cast<size_t>(n), 0);
    xperm_.alloc(n * d_.H);
    gu_.alloc(n * 2 * d_.I);
    act_.alloc(n * d_.I);
    yperm_.alloc(n * d_.H);
    kmax_ = k;
}

void CpuBackend::set_routing_override(const StepRouting* routing) {
    has_override_ = routing != nullptr;
    if (!routing) return;
    override_ = *routing;
    for (size_t s = 0; s < override_.per_layer.size() && s < layers_.size(); ++s) {
        LayerRouting& r = override_.per_layer[s];
        if (!w_.layers[s].is_moe || r.k == 0) continue;
        if (ep_on() && r.num_tokens == ep_.global_tokens) {  // the whole step's routing: this rank's rows of it
            const auto from = static_cast<size_t>(ep_.first_token * r.k), to = from + static_cast<size_t>(T_ * r.k);
            r.ids = std::vector<int32_t>(r.ids.begin() + from, r.ids.begin() + to);
            if (r.weights.size() == static_cast<size_t>(ep_.global_tokens * r.k))
                r.weights = std::vector<float>(r.weights.begin() + from, r.weights.begin() + to);
            r.num_tokens = T_;
        }
        if (r.num_tokens != T_ || static_cast<int64_t>(r.ids.size()) != r.num_tokens * r.k)
            config_error("routing", fmt::format("routing for layer slot {} has the wrong shape", s),
                         fmt::format("{} tokens x k {}", r.num_tokens, r.k), fmt::format("the step has {} tokens", T_));
        for (int32_t id : r.ids)
            if (id < -1 || id >= d_.E)
                config_error("routing", "expert id outside the model", std::to_string(id),
                             fmt::format("ids must be in [0, {})", d_.E));
        ensure_routing_capacity(std::max(kmax_, r.k));
    }
}

void CpuBackend::begin_step() {
    marks_.clear();
    if (!x0_.empty()) std::memcpy(x_.data(), x0_.data(), sizeof(float) * x0_.n);
}

void CpuBackend::mark() { marks_.push_back(std::chrono::steady_clock::now()); }

std::vector<double> CpuBackend::end_step() {
    std::vector<double> us;
    for (size_t i = 1; i < marks_.size(); ++i)
        us.push_back(std::chrono::duration<double, std::micro>(marks_[i] - marks_[i - 1]).count());
    marks_.clear();
    return us;
}

LayerWeights& CpuBackend::lw(int64_t slot) {
    MOEBENCH_CHECK(slot >= 0 && slot < static_cast<int64_t>(w_.layers.size()), "cpu backend: bad layer slot {}", slot);
    return w_.layers[static_cast<size_t>(slot)];
}

float* CpuBackend::ffn_in(int64_t slot) {
    return lw(slot).is_moe ? moe_[static_cast<size_t>(slot)].moe_in.data() : fin_.data();
}

void CpuBackend::norm(const float* x, const FBuf& w, const FBuf& b, float* out, int64_t rows) const {
    const float eps = static_cast<float>(m_.norm_eps);
    if (m_.norm == NormKind::layernorm)
        layernorm_rows(*pool_, x, w.data(), b.empty() ? nullptr : b.data(), out, rows, d_.H, eps);
    else
        rmsnorm_rows(*pool_, x, w.data(), out, rows, d_.H, eps);
}

void CpuBackend::run_phase(Phase phase, int64_t slot) {
    MOEBENCH_CHECK(pool_ != nullptr, "cpu backend: run_phase before prepare");
    switch (phase) {
        case Phase::embed: phase_embed(); break;
        case Phase::attn_norm: phase_attn_norm(slot); break;
        case Phase::qkv_proj: phase_qkv(slot); break;
        case Phase::attention: phase_attention(slot); break;
        case Phase::linear_attention: phase_linear_attention(slot); break;
        case Phase::o_proj: phase_o_proj(slot); break;
        case Phase::ffn_norm: phase_ffn_norm(slot); break;
        case Phase::router_gemm: phase_router(slot); break;
        case Phase::topk: phase_topk(slot); break;
        case Phase::permute: ep_on() ? ep_permute(slot) : phase_permute(slot); break;
        case Phase::dispatch_a2a:
            if (ep_on()) ep_dispatch(slot);
            break;  // one process: nothing crosses ranks
        case Phase::expert_fetch: phase_expert_fetch(slot); break;
        case Phase::expert_up: phase_expert_up(slot); break;
        case Phase::activation: phase_activation(slot); break;
        case Phase::expert_down: phase_expert_down(slot); break;
        case Phase::shared_expert: phase_shared(slot); break;
        case Phase::combine_a2a:
            if (ep_on()) ep_combine(slot);
            break;
        case Phase::unpermute_reduce: ep_on() ? ep_unpermute(slot) : phase_unpermute(slot); break;
        case Phase::dense_mlp: phase_dense(slot); break;
        case Phase::final_norm: phase_final_norm(); break;
        case Phase::lm_head: phase_lm_head(); break;
        case Phase::attn_allreduce:
        case Phase::moe_allgather:
        case Phase::moe_allreduce:
        case Phase::dense_allreduce:  // tensor parallelism: traits().tensor_parallel is false, the harness refuses it
                                      // first
            MOEBENCH_CHECK(false, "cpu backend: {} needs tensor parallelism, which it does not run", phase_name(phase));
        case Phase::count_: MOEBENCH_CHECK(false, "cpu backend: invalid phase");
    }
}

void CpuBackend::phase_embed() {
    const int64_t H = d_.H;
    const float* table = w_.embed.data();
    float* x = x_.data();
    pool_->parallel_for(
        T_,
        [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t)
                std::memcpy(x + t * H, table + static_cast<int64_t>(token_ids_[t]) * H, sizeof(float) * H);
        },
        16);
}

void CpuBackend::phase_final_norm() { norm(x_.data(), w_.final_norm_w, w_.final_norm_b, xn_.data(), T_); }

void CpuBackend::phase_lm_head() {
    const int64_t H = d_.H;
    const float* src = xn_.data();
    if (lm_rows_ != T_) {  // prefill: the last token of each sequence
        for (int64_t b = 0; b < lm_rows_; ++b)
            std::memcpy(lm_in_.data() + b * H, xn_.data() + ((b + 1) * shape_.seq_len - 1) * H, sizeof(float) * H);
        src = lm_in_.data();
    }
    const FBuf& head = w_.lm_head.empty() ? w_.embed : w_.lm_head;  // tied: the embedding, always [V, H]
    gemm_w(*pool_, lm_rows_, d_.V, H, src, head.data(), head.panels, lm_logits_.data());
}

MoeLayerResult CpuBackend::moe_result(int64_t slot) const {
    MOEBENCH_CHECK(slot >= 0 && slot < static_cast<int64_t>(moe_.size()), "cpu backend: bad layer slot {}", slot);
    return moe_[static_cast<size_t>(slot)].result;
}

std::vector<NamedTensor> CpuBackend::moe_block_tensors(int64_t slot) const {
    MOEBENCH_CHECK(slot >= 0 && slot < static_cast<int64_t>(moe_.size()) && w_.layers[slot].is_moe,
                   "cpu backend: layer slot {} is not a MoE layer", slot);
    const LayerWeights& w = w_.layers[static_cast<size_t>(slot)];
    const MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const int64_t T = T_, H = d_.H, E = d_.E, I = d_.I, SI = d_.shared_I;
    std::vector<NamedTensor> out;
    out.push_back(NamedTensor::f32("moe_in", {T, H}, st.moe_in.data()));
    if (ep_on()) {  // a rank holds only its experts: its token rows alone (the harness joins every rank's)
        const LayerRouting& r = st.result.routing;
        out.push_back(NamedTensor::i32("topk_ids", {r.num_tokens, r.k}, r.ids.data()));
        out.push_back(NamedTensor::f32("topk_weights", {r.num_tokens, r.k}, r.weights.data()));
        out.push_back(NamedTensor::f32("moe_out", {T, H}, st.moe_out.data()));
        return out;
    }
    out.push_back(NamedTensor::f32("router_weight", {E, H},
                                   row_major(*pool_, w.router_w.data(), w.router_w.panels, E, H).data()));
    if (!w.router_b.empty()) out.push_back(NamedTensor::f32("router_bias", {E}, w.router_b.data()));
    if (!w.correction_b.empty()) out.push_back(NamedTensor::f32("e_score_correction_bias", {E}, w.correction_b.data()));
    // Unfuse [E, 2I, H] into w_gate / w_up [E, I, H] (from the panel layout first where the weights use it).
    std::vector<float> g(static_cast<size_t>(E * I * H)), u(static_cast<size_t>(E * I * H));
    for (int64_t e = 0; e < E; ++e) {
        const std::vector<float> gu = row_major(*pool_, w.w_gu.data() + e * 2 * I * H, w.w_gu.panels, 2 * I, H);
        std::memcpy(g.data() + e * I * H, gu.data(), sizeof(float) * I * H);
        std::memcpy(u.data() + e * I * H, gu.data() + I * H, sizeof(float) * I * H);
    }
    out.push_back(NamedTensor::f32("w_gate", {E, I, H}, g.data()));
    out.push_back(NamedTensor::f32("w_up", {E, I, H}, u.data()));
    g.clear();
    g.shrink_to_fit();
    u.clear();
    u.shrink_to_fit();
    {
        std::vector<float> down(static_cast<size_t>(E * H * I));
        for (int64_t e = 0; e < E; ++e) {
            const std::vector<float> d = row_major(*pool_, w.w_down.data() + e * H * I, w.w_down.panels, H, I);
            std::copy(d.begin(), d.end(), down.begin() + e * H * I);
        }
        out.push_back(NamedTensor::f32("w_down", {E, H, I}, down.data()));
    }
    if (!w.b_gu.empty()) {
        std::vector<float> bg(static_cast<size_t>(E * I)), bu(static_cast<size_t>(E * I));
        for (int64_t e = 0; e < E; ++e)
            for (int64_t i = 0; i < I; ++i) {
                bg[e * I + i] = w.b_gu.data()[e * 2 * I + i];
                bu[e * I + i] = w.b_gu.data()[e * 2 * I + I + i];
            }
        out.push_back(NamedTensor::f32("b_gate", {E, I}, bg.data()));
        out.push_back(NamedTensor::f32("b_up", {E, I}, bu.data()));
        out.push_back(NamedTensor::f32("b_down", {E, H}, w.b_down.data()));
    }
    if (SI > 0) {
        const std::vector<float> sgu = row_major(*pool_, w.shared_gu.data(), w.shared_gu.panels, 2 * SI, H);
        out.push_back(NamedTensor::f32("shared_w_gate", {SI, H}, sgu.data()));
        out.push_back(NamedTensor::f32("shared_w_up", {SI, H}, sgu.data() + SI * H));
        out.push_back(NamedTensor::f32("shared_w_down", {H, SI},
                                       row_major(*pool_, w.shared_down.data(), w.shared_down.panels, H, SI).data()));
        if (!w.shared_gate_w.empty())
            out.push_back(NamedTensor::f32("shared_gate_weight", {1, H}, w.shared_gate_w.data()));
    }
    const LayerRouting& r = st.result.routing;
    out.push_back(NamedTensor::i32("topk_ids", {r.num_tokens, r.k}, r.ids.data()));
    out.push_back(NamedTensor::f32("topk_weights", {r.num_tokens, r.k}, r.weights.data()));
    // moe_out: routed experts + shared experts, BEFORE the residual add (and before Grok's post-FFN norm).
    out.push_back(NamedTensor::f32("moe_out", {T, H}, st.moe_out.data()));
    return out;
}

}  // namespace cpu
}  // namespace moebench
