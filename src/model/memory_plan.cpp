// SPDX-License-Identifier: Apache-2.0
// Memory plan per GPU: weights by dtype and sharding, KV cache, activation estimate, headroom, minimum layout that
// fits.
#include "model/memory_plan.hpp"

#include "common/error.hpp"
#include "config/run_fields.hpp"
#include "model/decode_floor.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>
#include <vector>

namespace moebench {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

MemoryPlan plan_memory(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in) {
    MemoryPlan p;
    const Layout& par = in.layout;
    const double n = double(par.num_gpus()), tp = double(par.attn_tp);
    const double lin = in.precision.dense_weight_bytes(), experts = in.precision.expert_weight_bytes();
    const double hp = in.precision.high_precision_bytes();

    // Weights: quantised dtype for linear layers; embedding, head, norms and router stay in high precision.
    AccountingOptions opt;
    opt.include_mtp = in.include_mtp;
    ParamCounts pc = count_params(m, opt);
    auto params = [&](Component c) { return double(pc.by_component[int(c)]); };
    auto& w = p.weights_by_component_bytes;
    w[int(Component::embedding)] = params(Component::embedding) * hp / tp;
    w[int(Component::lm_head)] = params(Component::lm_head) * hp / tp;
    w[int(Component::attention)] = params(Component::attention) * lin / tp;
    w[int(Component::norms)] = params(Component::norms) * hp;    // replicated, tiny
    w[int(Component::router)] = params(Component::router) * hp;  // replicated, tiny
    w[int(Component::dense_mlp)] = params(Component::dense_mlp) * lin / tp;
    // Redundant experts: E + R expert slots per MoE layer over the GPUs instead of E.
    const double copies = m.is_moe_model() ? par.expert_copies(m.moe.num_experts) : 1.0;
    w[int(Component::routed_experts)] = params(Component::routed_experts) * copies * experts / n;
    // Expert offload (one GPU): N of the E routed experts of every MoE layer on the GPU, the rest in host memory, and
    // fetch buffers for one layer's top-k experts, double-buffered (the next layer's copies while this one computes).
    if (m.is_moe_model() && par.offloads(m.moe.num_experts)) {
        const int64_t E = m.moe.num_experts, N = par.resident_of(E);
        const double one_expert = double(routed_expert_params(m)) * experts;
        p.resident_experts = N;
        p.fetch_buffer_experts = 2 * m.moe.top_k;
        p.fetch_buffer_bytes = double(p.fetch_buffer_experts) * one_expert;
        p.host_expert_bytes = double(E - N) * double(m.num_moe_layers()) * one_expert;
        w[int(Component::routed_experts)] =
            params(Component::routed_experts) * experts * double(N) / double(E) + p.fetch_buffer_bytes;
    }
    w[int(Component::shared_experts)] = params(Component::shared_experts) * lin / tp;
    if (in.include_mtp) {
        // The MTP module is one MoE decoder layer plus projections: its experts shard like routed experts, the rest
        // over tp.
        double mtp_experts =
            m.is_moe_model() ? double(m.num_mtp_layers) * double(m.moe.num_experts) * double(routed_expert_params(m))
                             : 0.0;
        mtp_experts = std::min(mtp_experts, params(Component::mtp));
        w[int(Component::mtp)] = mtp_experts * copies * experts / n + (params(Component::mtp) - mtp_experts) * lin / tp;
    }
    for (double b : w) p.weights_bytes += b;

    // KV cache.
    const double kvb = in.precision.kv_bytes();
    const double elems_per_layer = double(kv_elems_per_token_per_layer(m));
    const int64_t mtp_layers = in.include_mtp ? m.num_mtp_layers : 0;
    const double shard = kv_shard_fraction(m, par.attn_tp);
    p.kv_bytes_per_token = kv_bytes_per_token(m, kvb) + double(mtp_layers) * elems_per_layer * kvb;
    p.kv_bytes_per_token_per_gpu = p.kv_bytes_per_token * shard;
    // Sliding-window / chunked layers keep at most their window (accounting's kv_bytes_per_sequence).
    p.kv_bytes_per_sequence_per_gpu =
        (kv_bytes_per_sequence(m, in.context, kvb) + double(mtp_layers) * elems_per_layer * double(in.context) * kvb) *
        shard;
    p.linear_state_bytes_per_sequence_per_gpu = linear_state_bytes_per_sequence(m) * shard;
    p.sequences_per_gpu = ceil_div(in.batch, par.attn_dp);
    p.kv_cache_bytes = double(p.sequences_per_gpu) * p.kv_bytes_per_sequence_per_gpu;

    // Activations: the live buffers of one layer for the tokens of one step (decode rows, or a prefill chunk), plus
    // fp32 router logits and fp32 LM-head logits for the decode rows, plus a fixed workspace.
    const int64_t rows = p.sequences_per_gpu;
    p.activation_tokens = std::max(rows, std::min(in.context, kPrefillChunkTokens));
    const double h = double(m.hidden_size), heads = double(m.attn.num_heads);
    double q_dim = heads * double(m.attn.q_head_dim());
    double kv_dim, o_in;
    if (m.attn.kind == AttentionKind::mla) {
        kv_dim = double(m.attn.kv_lora_rank + m.attn.qk_rope_head_dim) +
                 heads * double(m.attn.qk_nope_head_dim + m.attn.v_head_dim);  // latent + expanded K/V
        o_in = heads * double(m.attn.v_head_dim);
    } else {
        kv_dim = 2.0 * double(m.attn.num_kv_heads) * double(m.attn.head_dim);
        o_in = heads * double(m.attn.head_dim);
    }
    double attn_elems = (q_dim + kv_dim + o_in) / tp;
    double moe_elems = 0, dense_elems = 0;
    if (m.is_moe_model()) {
        moe_elems = double(m.moe.top_k) * (h + 3.0 * double(m.moe.expert_intermediate_size) / double(par.moe_tp)) +
                    3.0 * double(m.moe.num_shared_experts) * double(m.moe.shared_intermediate_size) / tp;
    }
    if (m.dense_intermediate_size > 0) dense_elems = 3.0 * double(m.dense_intermediate_size) / tp;
    double per_token_elems = 4.0 * h + attn_elems + std::max(moe_elems, dense_elems);
    const double act_elem_bytes = in.precision.act_bytes();
    double router_logits = m.is_moe_model() ? double(m.moe.num_experts) * 4.0 : 0.0;
    p.activation_only_bytes = double(p.activation_tokens) * (per_token_elems * act_elem_bytes + router_logits) +
                              double(rows) * double(m.vocab_size) / tp * 4.0;
    p.workspace_bytes = kWorkspaceBytes;
    p.activation_bytes = p.activation_only_bytes + p.workspace_bytes;

    p.capacity_bytes = hw.memory_bytes;
    p.free_bytes = p.capacity_bytes - p.weights_bytes - p.kv_cache_bytes - p.activation_bytes;
    p.weights_fit = p.weights_bytes + p.activation_bytes <= p.capacity_bytes;
    p.fits = p.free_bytes >= 0;
    double for_kv = p.capacity_bytes - p.weights_bytes - p.activation_bytes;
    if (for_kv > 0 && p.kv_bytes_per_sequence_per_gpu > 0) {
        double per_replica = std::floor(for_kv / p.kv_bytes_per_sequence_per_gpu);
        p.max_concurrent_sequences = int64_t(std::min(per_replica * double(par.attn_dp), 9e18));
    }
    return p;
}

MinLayout min_layout_for_weights(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in, bool whole) {
    std::vector<int64_t> eps{1}, tps{1};
    if (m.is_moe_model())
        for (int64_t d = 2; d <= m.moe.num_experts; ++d)
            if (m.moe.num_experts % d == 0) eps.push_back(d);
    for (int64_t t = 2; t <= m.attn.num_heads; ++t)
        if (m.attn.num_heads % t == 0) tps.push_back(t);

    MinLayout best;
    for (int64_t ep : eps) {
        for (int64_t tp : tps) {
            if (std::max(ep, tp) % std::min(ep, tp) != 0) continue;
            LayoutRequest req;
            req.ep = ep;
            req.tp = tp;
            Layout par = resolve_layout(req);
            par.a2a = in.layout.a2a;
            par.placement = in.layout.placement;
            PlanInput trial = in;
            trial.layout = par;
            const MemoryPlan trial_plan = plan_memory(m, hw, trial);
            if (!(whole ? trial_plan.fits : trial_plan.weights_fit)) continue;
            auto rank = [&](const Layout& q) {
                // fewest GPUs; then the user's tp; then more expert parallelism (less tensor parallelism)
                return std::tuple(q.num_gpus(), q.attn_tp == in.layout.attn_tp ? 0 : 1, -q.moe_ep);
            };
            if (!best.found || rank(par) < rank(best.layout)) best = MinLayout{true, par};
        }
    }
    return best;
}

namespace {

std::string flag(const char* key) { return find_run_field(key)->flag; }

// "--ep 8 --tp 2": what to type for a layout of the --ep/--tp kind.
std::string layout_flags(const Layout& l) {
    return fmt::format("{} {} {} {}", flag("ep"), l.moe_ep, flag("tp"), l.attn_tp);
}

}  // namespace

namespace {

double gib(double bytes) { return bytes / kGiB; }

// The largest value in [1, hi] for which `fits` holds (monotone), 0 when none.
int64_t largest_fitting(int64_t hi, const std::function<bool(int64_t)>& fits) {
    if (hi < 1 || !fits(1)) return 0;
    int64_t lo = 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// The weight formats smaller than `than` that the profile computes, largest first (the least lossy first).
std::vector<DType> smaller_formats(const HardwareProfile& hw, DType than) {
    std::vector<DType> out;
    for (const DTypeInfo& i : dtype_table())
        if (i.weights && i.bytes_per_elem() < dtype_info(than).bytes_per_elem() &&
            profile_rate(hw, i.weight_compute) > 0)
            out.push_back(i.dtype);
    std::stable_sort(out.begin(), out.end(),
                     [](DType a, DType b) { return dtype_info(a).bytes_per_elem() > dtype_info(b).bytes_per_elem(); });
    return out;
}

// "at least 16 GPUs in bf16: --ep 16 --tp 1 (62.1 GiB of weights per GPU)", or "" when no --ep/--tp layout fits.
std::string more_gpus(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in) {
    const MinLayout ml = min_layout_for_weights(m, hw, in, /*whole=*/true);
    if (!ml.found || ml.layout.num_gpus() <= in.layout.num_gpus()) return "";
    PlanInput at = in;
    at.layout = ml.layout;
    return fmt::format("at least {} GPUs in {}: {} ({:.1f} GiB of weights per GPU)", ml.layout.num_gpus(),
                       to_string(in.precision.dense_weights), layout_flags(ml.layout),
                       gib(plan_memory(m, hw, at).weights_bytes));
}

}  // namespace

FitAdvice fit_advice(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in, const MemoryPlan& plan) {
    FitAdvice a;
    const Layout& l = in.layout;
    a.value =
        fmt::format("{}; {}; batch {} at context {}", l.describe(), in.precision.describe(), in.batch, in.context);
    const auto fits_with = [&](const PlanInput& trial) { return plan_memory(m, hw, trial).fits; };
    std::vector<std::string> fixes;
    if (plan.weights_fit) {
        // The weights fit: the KV cache of this batch at this context is what does not.
        a.field = flag("batch") + "/" + flag("context");
        a.what = fmt::format(
            "the KV cache of {} sequences at context {} needs {:.1f} GiB per GPU, {:.1f} GiB is left "
            "after {:.1f} GiB of weights and {:.1f} GiB of activations/workspace on {} ({:.1f} GiB)",
            in.batch, in.context, gib(plan.kv_cache_bytes), gib(std::max(0.0, plan.free_bytes + plan.kv_cache_bytes)),
            gib(plan.weights_bytes), gib(plan.activation_bytes), hw.name, gib(plan.capacity_bytes));
        const int64_t batch = largest_fitting(in.batch, [&](int64_t b) {
            PlanInput t = in;
            t.batch = b;
            return fits_with(t);
        });
        if (batch > 0) fixes.push_back(fmt::format("{} {} or less", flag("batch"), batch));
        if (in.precision.kv_cache != DType::fp8 && dtype_info(in.precision.kv_cache).bytes_per_elem() > 1.0) {
            PlanInput t = in;
            t.precision.kv_cache = DType::fp8;
            if (fits_with(t)) fixes.push_back(flag("kv_dtype") + " fp8");
        }
    } else {
        a.field = flag("dtype") + "/" + flag("ep") + "/" + flag("tp");
        a.what = fmt::format(
            "{}'s weights need {:.1f} GiB per GPU, with {:.1f} GiB of KV cache and {:.1f} GiB of "
            "activations/workspace, over the {:.1f} GiB of {}",
            m.name, gib(plan.weights_bytes), gib(plan.kv_cache_bytes), gib(plan.activation_bytes),
            gib(plan.capacity_bytes), hw.name);
        // A smaller weight format on these GPUs: every linear layer's, else the routed experts' alone.
        const bool experts_follow = in.precision.expert_weights == in.precision.dense_weights;
        std::string format_fix;
        for (DType d : smaller_formats(hw, in.precision.dense_weights)) {
            PlanInput t = in;
            t.precision.dense_weights = d;
            if (experts_follow) t.precision.expert_weights = d;
            t.precision.activations = activation_dtype_for(d);
            if (!fits_with(t)) continue;
            format_fix = fmt::format("{} {} on these {} GPUs ({:.1f} GiB of weights per GPU)", flag("dtype"),
                                     to_string(d), l.num_gpus(), gib(plan_memory(m, hw, t).weights_bytes));
            break;
        }
        if (format_fix.empty() && m.is_moe_model())
            for (DType d : smaller_formats(hw, in.precision.expert_weights)) {
                PlanInput t = in;
                t.precision.expert_weights = d;
                if (!fits_with(t)) continue;
                format_fix = fmt::format("{} {} on these {} GPUs ({:.1f} GiB of weights per GPU)", flag("expert_dtype"),
                                         to_string(d), l.num_gpus(), gib(plan_memory(m, hw, t).weights_bytes));
                break;
            }
        if (!format_fix.empty()) fixes.push_back(format_fix);
    }
    const std::string gpus = more_gpus(m, hw, in);
    if (!gpus.empty()) fixes.push_back(gpus);
    if (fixes.empty())
        a.fix = fmt::format(
            "no smaller weight format {} computes and no {}/{} layout of up to {} GPUs fits {} "
            "(pipeline parallelism is not modeled); use a larger GPU",
            hw.name, flag("ep"), flag("tp"),
            std::max<int64_t>(m.is_moe_model() ? m.moe.num_experts : 1, m.attn.num_heads), m.name);
    else {
        a.fix = "use " + fixes[0];
        for (size_t i = 1; i < fixes.size(); ++i) a.fix += ", or " + fixes[i];
    }
    return a;
}

void require_weights_fit(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in, const MemoryPlan& plan) {
    if (plan.weights_fit) return;
    const Layout& par = in.layout;
    const std::string dtype(to_string(in.precision.dense_weights));
    // The weights fit with one sequence: the batch's activations are what overflow, so the batch is the field to
    // change (the largest batch that fits, by bisection on the same plan).
    PlanInput one = in;
    one.batch = 1;
    if (in.batch > 1 && plan_memory(m, hw, one).weights_fit) {
        int64_t lo = 1, hi = in.batch;  // lo fits, hi does not
        while (hi - lo > 1) {
            PlanInput mid = in;
            mid.batch = lo + (hi - lo) / 2;
            (plan_memory(m, hw, mid).weights_fit ? lo : hi) = mid.batch;
        }
        config_error(flag("batch"),
                     fmt::format("needs {:.1f} GiB of activations/workspace per GPU beside {:.1f} GiB of {} weights, "
                                 "more than the {:.1f} GiB of {}",
                                 plan.activation_bytes / kGiB, plan.weights_bytes / kGiB, dtype,
                                 plan.capacity_bytes / kGiB, hw.name),
                     std::to_string(in.batch),
                     fmt::format("use {} {} or less (or add GPUs: {}/{})", flag("batch"), lo, flag("ep"), flag("tp")));
    }
    std::string what = fmt::format(
        "{} weights need {:.1f} GiB per GPU plus {:.1f} GiB activations/workspace, more than the {:.1f} GiB of {}",
        dtype, plan.weights_bytes / kGiB, plan.activation_bytes / kGiB, plan.capacity_bytes / kGiB, hw.name);
    std::string got = fmt::format("{} ({})", layout_flags(par), par.describe());
    MinLayout ml = min_layout_for_weights(m, hw, in);
    std::string fix;
    if (ml.found)
        fix = fmt::format("use at least {} GPUs: {} (or a smaller {})", ml.layout.num_gpus(), layout_flags(ml.layout),
                          flag("dtype"));
    else
        fix = fmt::format(
            "no EP/TP layout of up to {} GPUs fits {} in {} (pipeline parallelism is not modeled); "
            "use a smaller {} or a larger GPU",
            std::max<int64_t>(m.is_moe_model() ? m.moe.num_experts : 1, m.attn.num_heads), m.name, dtype,
            flag("dtype"));
    config_error(flag("ep") + "/" + flag("tp"), what, got, fix);
}

}  // namespace moebench
