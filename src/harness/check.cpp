// SPDX-License-Identifier: Apache-2.0
// The --check reference: one MoE block recomputed in fp32 (OpenBLAS GEMMs per expert, routing from moe_core) from
// the tensors a backend dumped, and the comparison of outputs and expert ids (near-ties excused and counted).
#include "harness/check.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "core/moe_core.cuh"
#include "model/route_params.hpp"

#include <cblas.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace moebench {

namespace {

const NamedTensor* find_tensor(const std::vector<NamedTensor>& all, const std::string& name) {
    for (const NamedTensor& t : all)
        if (t.name == name) return &t;
    return nullptr;
}

// A read-only view of an F32 tensor's bytes (no copy: expert weights of a large model are tens of GB on the host).
struct F32View {
    const float* p = nullptr;
    int64_t n = 0;
    bool empty() const { return p == nullptr; }
    const float* data() const { return p; }
    const float& operator[](int64_t i) const { return p[i]; }
};

// The tensor `name` checked against `shape`; an empty view when absent and not required.
F32View get_f32(const std::vector<NamedTensor>& all, const std::string& name, const std::vector<int64_t>& shape,
                bool required) {
    const NamedTensor* t = find_tensor(all, name);
    if (!t) {
        MOEBENCH_CHECK(!required, "{}: the backend's MoE block has no tensor '{}'", flag_of("check"), name);
        return {};
    }
    MOEBENCH_CHECK(t->shape == shape, "{}: tensor '{}' has shape [{}], expected [{}]", flag_of("check"), name,
                   fmt::join(t->shape, ","), fmt::join(shape, ","));
    MOEBENCH_CHECK(t->dtype == "F32" && static_cast<int64_t>(t->data.size()) == t->numel() * 4,
                   "{}: tensor '{}' is {} with {} bytes, expected F32", flag_of("check"), name, t->dtype,
                   t->data.size());
    // std::vector storage is aligned for any fundamental type, so the bytes can be read as floats in place.
    return F32View{reinterpret_cast<const float*>(t->data.data()), t->numel()};
}

// out[m, n] = x[m, k] . w[n, k]^T
void gemm_xwt(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* out) {
    if (m == 0 || n == 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                1.0f, x, static_cast<int>(k), w, static_cast<int>(k), 0.0f, out, static_cast<int>(n));
}

bool near(double a, double b, double eps) {
    return std::fabs(a - b) <= eps * std::max({1.0, std::fabs(a), std::fabs(b)});
}

// Scores `vals` (with `keep` mask, may be null): true when the k-th best and the (k+1)-th best tie within eps.
bool kth_tie(const std::vector<float>& vals, const std::vector<unsigned char>* keep, int k, double eps) {
    std::vector<float> v;
    for (size_t i = 0; i < vals.size(); ++i)
        if (!keep || (*keep)[i]) v.push_back(vals[i]);
    if (k <= 0 || static_cast<int>(v.size()) <= k) return false;
    std::nth_element(v.begin(), v.begin() + (k - 1), v.end(), std::greater<float>());
    const float kth = v[static_cast<size_t>(k - 1)];
    const float next = *std::max_element(v.begin() + k, v.end());
    return near(kth, next, eps);
}

// Near-tie of one token's selection in the family's selection domain (see CheckOptions::tie_epsilon).
bool selection_near_tie(const core::RouteParams& p, int64_t soft_topn, const float* logits, const float* corr,
                        double eps) {
    const int E = p.num_experts, G = std::max(1, p.num_groups), gs = E / G;
    std::vector<float> l(logits, logits + E);
    if (soft_topn > 0) return kth_tie(l, nullptr, static_cast<int>(soft_topn), eps);
    const bool grouped = G > 1 && p.topk_groups < G;
    if (p.kind == core::kRouteSigmoidGroupTopk) {
        std::vector<float> choice(static_cast<size_t>(E));
        for (int e = 0; e < E; ++e) choice[e] = core::sigmoidf_(l[e]) + (corr ? corr[e] : 0.0f);
        std::vector<unsigned char> keep(static_cast<size_t>(E), 1);
        if (grouped) {
            std::vector<float> gscore(static_cast<size_t>(G));
            for (int g = 0; g < G; ++g) {
                std::vector<float> grp(choice.begin() + g * gs, choice.begin() + (g + 1) * gs);
                std::sort(grp.begin(), grp.end(), std::greater<float>());
                gscore[g] = grp.size() >= 2 ? grp[0] + grp[1] : grp[0];
            }
            if (kth_tie(gscore, nullptr, p.topk_groups, eps)) return true;
            std::vector<float> best(static_cast<size_t>(p.topk_groups));
            std::vector<int> ids(static_cast<size_t>(p.topk_groups));
            core::topk_row(gscore.data(), G, p.topk_groups, nullptr, best.data(), ids.data());
            for (int g = 0; g < G; ++g) {
                const bool chosen = std::find(ids.begin(), ids.end(), g) != ids.end();
                for (int i = 0; i < gs; ++i) keep[g * gs + i] = chosen;
            }
        }
        return kth_tie(choice, &keep, p.top_k, eps);
    }
    if (p.kind == core::kRouteSoftmaxGroupGreedy && grouped) {
        // Group score = max probability of the group = softmax of the group's max logit: compare max logits.
        std::vector<float> gscore(static_cast<size_t>(G));
        for (int g = 0; g < G; ++g) gscore[g] = *std::max_element(l.begin() + g * gs, l.begin() + (g + 1) * gs);
        if (kth_tie(gscore, nullptr, p.topk_groups, eps)) return true;
        std::vector<float> best(static_cast<size_t>(p.topk_groups));
        std::vector<int> ids(static_cast<size_t>(p.topk_groups));
        core::topk_row(gscore.data(), G, p.topk_groups, nullptr, best.data(), ids.data());
        std::vector<unsigned char> keep(static_cast<size_t>(E), 0);
        for (int g : ids)
            for (int i = 0; i < gs; ++i) keep[g * gs + i] = 1;
        return kth_tie(l, &keep, p.top_k, eps);
    }
    // sparsemixer: the slots are ordered (the first weight counts the runner-up, the second leaves the first
    // out), so a tie between the first two matters as much as one between the second and third.
    if (p.kind == core::kRouteSparsemixer && (kth_tie(l, nullptr, 1, eps) || kth_tie(l, nullptr, 2, eps))) return true;
    if (p.kind == core::kRouteSparsemixer) {
        // The weights count the logits inside each chosen expert's band (m - l) / max(|l|, m) <= 2 jitter: a
        // logit on the band's edge may fall on either side (the "tie" of this routing).
        float best[2];
        int ids[2];
        core::topk_row(l.data(), E, 2, nullptr, best, ids);
        for (int j = 0; j < 2; ++j)
            for (int i = 0; i < E; ++i) {
                if (i == ids[0] && j == 1) continue;
                const double band = (best[j] - l[i]) / std::max(std::fabs(double(l[i])), double(best[j]));
                if (std::isfinite(band) && near(band, 2.0 * p.jitter_eps, eps)) return true;
            }
        return false;
    }
    // softmax_topk, topk_softmax, topk_sigmoid: the order of the logits is the order of the selection scores.
    return kth_tie(l, nullptr, p.top_k, eps);
}

}  // namespace

namespace {

// The block's tensors, checked against the model's shapes (views: no copies of the expert weights).
struct BlockTensors {
    int64_t T = 0, H = 0, kb = 0;  // tokens, hidden size, the backend's experts per token
    F32View x, router_w, router_b, corr, w_gate, w_up, w_down, b_gate, b_up, b_down, wts_b, out_b;
    std::vector<int32_t> ids_b;
    // Row of expert e in the expert tensors (-1: not sent; the backend sent only its routed experts).
    std::vector<int64_t> expert_row;
};

BlockTensors block_tensors(const ModelConfig& m, const std::vector<NamedTensor>& tensors) {
    BlockTensors b;
    const NamedTensor* in_t = find_tensor(tensors, "moe_in");
    MOEBENCH_CHECK(in_t && in_t->shape.size() == 2, "{}: the backend's MoE block has no [T, H] tensor 'moe_in'",
                   flag_of("check"));
    const int64_t T = in_t->shape[0], H = in_t->shape[1];
    const int64_t E = m.moe.num_experts, I = m.moe.expert_intermediate_size;
    MOEBENCH_CHECK(H == m.hidden_size, "{}: moe_in has hidden size {}, the model {}", flag_of("check"), H,
                   m.hidden_size);
    const NamedTensor* ids_t = find_tensor(tensors, "topk_ids");
    MOEBENCH_CHECK(ids_t && ids_t->shape.size() == 2 && ids_t->shape[0] == T,
                   "{}: the backend's MoE block has no [T, k] tensor 'topk_ids'", flag_of("check"));
    b.T = T;
    b.H = H;
    b.kb = ids_t->shape[1];
    b.x = get_f32(tensors, "moe_in", {T, H}, true);
    b.router_w = get_f32(tensors, "router_weight", {E, H}, true);
    b.router_b = get_f32(tensors, "router_bias", {E}, false);
    b.corr = get_f32(tensors, "e_score_correction_bias", {E}, false);
    int64_t R = E;  // expert rows in the expert tensors
    b.expert_row.resize(static_cast<size_t>(E));
    if (const NamedTensor* routed = find_tensor(tensors, "routed_experts")) {
        const std::vector<int32_t> list = routed->as_i32();
        R = static_cast<int64_t>(list.size());
        std::fill(b.expert_row.begin(), b.expert_row.end(), -1);
        for (int64_t r = 0; r < R; ++r) {
            const int32_t e = list[static_cast<size_t>(r)];
            MOEBENCH_CHECK(e >= 0 && e < E, "{}: routed expert {} outside the model's {} experts", flag_of("check"), e,
                           E);
            b.expert_row[static_cast<size_t>(e)] = r;
        }
    } else {
        for (int64_t e = 0; e < E; ++e) b.expert_row[static_cast<size_t>(e)] = e;
    }
    b.w_gate = get_f32(tensors, "w_gate", {R, I, H}, true);
    b.w_up = get_f32(tensors, "w_up", {R, I, H}, true);
    b.w_down = get_f32(tensors, "w_down", {R, H, I}, true);
    b.b_gate = get_f32(tensors, "b_gate", {R, I}, false);
    b.b_up = get_f32(tensors, "b_up", {R, I}, false);
    b.b_down = get_f32(tensors, "b_down", {R, H}, false);
    b.ids_b = ids_t->as_i32();
    b.wts_b = get_f32(tensors, "topk_weights", {T, b.kb}, true);
    b.out_b = get_f32(tensors, "moe_out", {T, H}, true);
    return b;
}

// 1. Router logits in fp32 from the block's input.
std::vector<float> router_logits(const BlockTensors& b, int64_t E) {
    std::vector<float> logits(static_cast<size_t>(b.T * E));
    gemm_xwt(b.T, E, b.H, b.x.data(), b.router_w.data(), logits.data());
    if (!b.router_b.empty())
        for (int64_t t = 0; t < b.T; ++t)
            for (int64_t e = 0; e < E; ++e) logits[t * E + e] += b.router_b[e];
    return logits;
}

// 2. The reference selection before capacity, k per token: the workload's, soft top-N, or the family's routing.
void reference_selection(const core::RouteParams& rp, const RunOptions& opt, const BlockTensors& b,
                         const std::vector<float>& logits, const LayerRouting* imposed, int64_t k,
                         std::vector<int32_t>& ids, std::vector<float>& wts) {
    const int64_t T = b.T, E = rp.num_experts;
    ids.assign(static_cast<size_t>(T * k), 0);
    wts.assign(static_cast<size_t>(T * k), 0.0f);
    if (imposed) {
        MOEBENCH_CHECK(imposed->num_tokens == T && static_cast<int64_t>(imposed->ids.size()) == T * k,
                       "{}: the workload's routing has {} tokens, the block {}", flag_of("check"), imposed->num_tokens,
                       T);
        std::copy(imposed->ids.begin(), imposed->ids.end(), ids.begin());
        if (static_cast<int64_t>(imposed->weights.size()) == T * k)
            std::copy(imposed->weights.begin(), imposed->weights.end(), wts.begin());
        else
            std::fill(wts.begin(), wts.end(), 1.0f / static_cast<float>(k));  // as both backends do
        return;
    }
    std::vector<float> scratch(static_cast<size_t>(core::route_scratch_floats(rp.num_experts, rp.num_groups)));
    std::vector<int> row(static_cast<size_t>(k));
    for (int64_t t = 0; t < T; ++t) {
        if (opt.soft_topn > 0)
            core::soft_topn_row(&logits[t * E], rp.num_experts, static_cast<int>(k), scratch.data(), row.data(),
                                &wts[t * k]);
        else
            core::route_row(rp, &logits[t * E], b.corr.empty() ? nullptr : b.corr.data(), scratch.data(), row.data(),
                            &wts[t * k]);
        for (int64_t j = 0; j < k; ++j) ids[t * k + j] = row[static_cast<size_t>(j)];
    }
}

// 3. Near-ties: where the backend chose an expert the reference did not and the scores tie, take the backend's
//    row (its ids after capacity: -1 stays -1), so that the drops that follow agree. sparsemixer: also where the
//    slot order or a weight differs (beyond the tolerance) and a logit sits on a band's edge. Returns, per token,
//    whether it was excused.
std::vector<unsigned char> excuse_near_ties(const core::RouteParams& rp, const RunOptions& opt, const BlockTensors& b,
                                            const std::vector<float>& logits, int64_t k, const CheckOptions& o,
                                            std::vector<int32_t>& ids, std::vector<float>& wts, CheckResult& res) {
    const int64_t T = b.T, E = rp.num_experts;
    const bool banded = rp.kind == core::kRouteSparsemixer && opt.soft_topn <= 0;
    std::vector<unsigned char> near_tie(static_cast<size_t>(T), 0);
    for (int64_t t = 0; t < T; ++t) {
        bool differs = false;
        for (int64_t j = 0; j < k; ++j) {
            const int32_t e = b.ids_b[t * k + j];
            if (e >= 0 && std::find(&ids[t * k], &ids[t * k] + k, e) == &ids[t * k] + k) differs = true;
            if (banded && e >= 0 &&
                (e != ids[t * k + j] || std::fabs(b.wts_b[t * k + j] - wts[t * k + j]) > o.tolerance))
                differs = true;
        }
        if (!differs || !selection_near_tie(rp, opt.soft_topn, &logits[t * E], b.corr.empty() ? nullptr : b.corr.data(),
                                            o.tie_epsilon))
            continue;
        near_tie[t] = 1;
        ++res.ids_near_tie;
        for (int64_t j = 0; j < k; ++j) {
            ids[t * k + j] = b.ids_b[t * k + j];
            wts[t * k + j] = b.wts_b[t * k + j];
        }
    }
    return near_tie;
}

// 5. The expert sets (-1 = dropped) and, where they agree, the combine weights.
void compare_selection(const BlockTensors& b, const std::vector<int32_t>& ids, const std::vector<float>& wts, int64_t k,
                       const std::vector<unsigned char>& near_tie, CheckResult& res) {
    for (int64_t t = 0; t < b.T; ++t) {
        std::vector<int32_t> x(&ids[t * k], &ids[t * k] + k), y(&b.ids_b[t * k], &b.ids_b[t * k] + k);
        std::sort(x.begin(), x.end());
        std::sort(y.begin(), y.end());
        if (x != y) {
            if (!near_tie[t]) ++res.ids_mismatched;
            continue;
        }
        for (int64_t j = 0; j < k; ++j) {
            const int32_t e = ids[t * k + j];
            if (e < 0) continue;
            for (int64_t jb = 0; jb < k; ++jb)
                if (b.ids_b[t * k + jb] == e)
                    res.weights_max_abs_error =
                        std::max(res.weights_max_abs_error,
                                 static_cast<double>(std::fabs(wts[t * k + j] - b.wts_b[t * k + jb])));
        }
    }
}

// 6a. The routed experts: per expert, its tokens' rows through gate/up, the activation and down; the weighted sum.
std::vector<double> routed_output(const ModelConfig& m, const BlockTensors& b, const std::vector<int32_t>& ids,
                                  const std::vector<float>& wts, int64_t k) {
    const int64_t T = b.T, H = b.H, E = m.moe.num_experts, I = m.moe.expert_intermediate_size;
    const int act_kind = static_cast<int>(m.activation);
    const float limit = activation_limit(m);
    const bool scale_in = core::route_scales_input(static_cast<int>(m.moe.routing));
    std::vector<double> out(static_cast<size_t>(T * H), 0.0);
    std::vector<std::vector<int64_t>> assign(static_cast<size_t>(E));  // (t * k + j) per expert, arrival order
    for (int64_t a = 0; a < T * k; ++a)
        if (ids[a] >= 0) {
            MOEBENCH_CHECK(ids[a] < E, "{}: expert id {} outside the model's {} experts", flag_of("check"), ids[a], E);
            assign[static_cast<size_t>(ids[a])].push_back(a);
        }
    std::vector<float> xe, ge, ue, ye;
    for (int64_t e = 0; e < E; ++e) {
        const std::vector<int64_t>& as = assign[static_cast<size_t>(e)];
        const int64_t n = static_cast<int64_t>(as.size());
        if (n == 0) continue;
        // An expert the reference routes to but the backend did not send can only follow a selection mismatch,
        // which compare_selection already counts as a failure: its rows are left out here.
        const int64_t x = b.expert_row[static_cast<size_t>(e)];
        if (x < 0) continue;
        xe.assign(static_cast<size_t>(n * H), 0.0f);
        for (int64_t r = 0; r < n; ++r) {
            const float s = scale_in ? wts[as[r]] : 1.0f;  // Llama-4: routed_in = x * router score
            for (int64_t i = 0; i < H; ++i) xe[r * H + i] = b.x[(as[r] / k) * H + i] * s;
        }
        ge.resize(static_cast<size_t>(n * I));
        ue.resize(static_cast<size_t>(n * I));
        gemm_xwt(n, I, H, xe.data(), &b.w_gate[x * I * H], ge.data());
        gemm_xwt(n, I, H, xe.data(), &b.w_up[x * I * H], ue.data());
        for (int64_t r = 0; r < n; ++r)
            for (int64_t i = 0; i < I; ++i) {
                const float g = ge[r * I + i] + (b.b_gate.empty() ? 0.0f : b.b_gate[x * I + i]);
                const float u = ue[r * I + i] + (b.b_up.empty() ? 0.0f : b.b_up[x * I + i]);
                ge[r * I + i] = core::activate(act_kind, g, u, limit);
            }
        ye.resize(static_cast<size_t>(n * H));
        gemm_xwt(n, H, I, ge.data(), &b.w_down[x * H * I], ye.data());
        for (int64_t r = 0; r < n; ++r) {
            const double s = scale_in ? 1.0 : wts[as[r]];
            for (int64_t i = 0; i < H; ++i)
                out[(as[r] / k) * H + i] += s * (ye[r * H + i] + (b.b_down.empty() ? 0.0f : b.b_down[x * H + i]));
        }
    }
    return out;
}

// 6b. The shared experts on every token (Qwen2-MoE: scaled by sigmoid(x . gate)), added to `out`.
void add_shared_output(const ModelConfig& m, const std::vector<NamedTensor>& tensors, const BlockTensors& b,
                       std::vector<double>& out) {
    const int64_t T = b.T, H = b.H, SI = m.moe.num_shared_experts * m.moe.shared_intermediate_size;
    if (SI <= 0) return;
    const int act_kind = static_cast<int>(m.activation);
    const float limit = activation_limit(m);
    const F32View sg = get_f32(tensors, "shared_w_gate", {SI, H}, true);
    const F32View su = get_f32(tensors, "shared_w_up", {SI, H}, true);
    const F32View sd = get_f32(tensors, "shared_w_down", {H, SI}, true);
    const F32View gate_w = get_f32(tensors, "shared_gate_weight", {1, H}, m.moe.shared_expert_gate);
    std::vector<float> g(static_cast<size_t>(T * SI)), u(static_cast<size_t>(T * SI)), y(static_cast<size_t>(T * H));
    gemm_xwt(T, SI, H, b.x.data(), sg.data(), g.data());
    gemm_xwt(T, SI, H, b.x.data(), su.data(), u.data());
    for (int64_t i = 0; i < T * SI; ++i) g[i] = core::activate(act_kind, g[i], u[i], limit);
    gemm_xwt(T, H, SI, g.data(), sd.data(), y.data());
    for (int64_t t = 0; t < T; ++t) {
        double gate = 1.0;
        if (!gate_w.empty()) {
            double z = 0;
            for (int64_t i = 0; i < H; ++i) z += static_cast<double>(b.x[t * H + i]) * gate_w[i];
            gate = 1.0 / (1.0 + std::exp(-z));
        }
        for (int64_t i = 0; i < H; ++i) out[t * H + i] += gate * y[t * H + i];
    }
}

// 7. Relative L2 error of the backend's output against the reference, and the verdict.
void compare_output(const BlockTensors& b, const std::vector<double>& out, const CheckOptions& o, CheckResult& res) {
    double diff2 = 0, ref2 = 0;
    for (int64_t i = 0; i < b.T * b.H; ++i) {
        const double d = static_cast<double>(b.out_b[i]) - out[i];
        diff2 += d * d;
        ref2 += out[i] * out[i];
        res.max_abs_error = std::max(res.max_abs_error, std::fabs(d));
    }
    res.ref_l2_norm = std::sqrt(ref2);
    res.rel_l2_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    if (!std::isfinite(res.rel_l2_error)) res.rel_l2_error = std::numeric_limits<double>::infinity();
    const bool out_ok = res.rel_l2_error <= o.tolerance;
    res.passed = out_ok && res.ids_mismatched == 0;
    if (!out_ok)
        res.failure =
            fmt::format("moe_out relative L2 error {:.3g} exceeds the tolerance {:.3g}", res.rel_l2_error, o.tolerance);
    if (res.ids_mismatched > 0)
        res.failure += fmt::format("{}{} of {} tokens selected other experts than the reference (not near-ties)",
                                   res.failure.empty() ? "" : "; ", res.ids_mismatched, b.T);
}

}  // namespace

CheckResult check_moe_block(const ModelConfig& m, const RunOptions& opt, const std::vector<NamedTensor>& tensors,
                            const LayerRouting* override_routing, const CheckOptions& o) {
    CheckResult res;
    res.tolerance = o.tolerance;
    res.tie_epsilon = o.tie_epsilon;
    const BlockTensors b = block_tensors(m, tensors);
    res.tokens = b.T;
    const std::vector<float> logits = router_logits(b, m.moe.num_experts);

    const core::RouteParams rp = route_params(m);
    const LayerRouting* imposed = override_routing && override_routing->k > 0 ? override_routing : nullptr;
    const int64_t k = imposed ? imposed->k : (opt.soft_topn > 0 ? opt.soft_topn : m.moe.top_k);
    res.k = k;
    res.routing_from = imposed             ? "the workload's routing of the step (as imposed on the backend)"
                       : opt.soft_topn > 0 ? "soft top-N (moe_core soft_topn_row) on fp32 router logits"
                                           : "the family's routing (moe_core route_row) on fp32 router logits";
    if (b.kb != k) {
        res.ids_mismatched = b.T;
        res.failure = fmt::format("the backend selected k = {} experts per token, the reference {}", b.kb, k);
        return res;
    }
    std::vector<int32_t> ids;
    std::vector<float> wts;
    reference_selection(rp, opt, b, logits, imposed, k, ids, wts);
    std::vector<unsigned char> near_tie(static_cast<size_t>(b.T), 0);
    if (!imposed) near_tie = excuse_near_ties(rp, opt, b, logits, k, o, ids, wts, res);
    // 4. Capacity drops in arrival order, as both backends apply them.
    const int64_t E = m.moe.num_experts;
    std::vector<int64_t> counts(static_cast<size_t>(E));
    const int64_t cap = core::expert_capacity(opt.capacity_factor, b.T, static_cast<int>(k), static_cast<int>(E));
    core::apply_capacity(ids.data(), wts.data(), b.T, static_cast<int>(k), static_cast<int>(E), cap, counts.data());
    compare_selection(b, ids, wts, k, near_tie, res);
    std::vector<double> out = routed_output(m, b, ids, wts, k);
    add_shared_output(m, tensors, b, out);
    compare_output(b, out, o, res);
    return res;
}

bool routing_near_tie(const ModelConfig& m, const RunOptions& opt, const float* logits, const float* corr, double eps) {
    return selection_near_tie(route_params(m), opt.soft_topn, logits, corr, eps);
}

json to_json(const CheckResult& r) {
    json j = {{"source", "measured"},
              {"layer", r.layer},
              {"tokens", r.tokens},
              {"k", r.k},
              {"rel_l2_error", std::isfinite(r.rel_l2_error) ? json(r.rel_l2_error) : json(nullptr)},
              {"max_abs_error", r.max_abs_error},
              {"tolerance", r.tolerance},
              {"ids_mismatched", r.ids_mismatched},
              {"ids_near_tie", r.ids_near_tie},
              {"tie_epsilon", r.tie_epsilon},
              {"weights_max_abs_error", r.weights_max_abs_error},
              {"routing_from", r.routing_from},
              {"reference", "host fp32: OpenBLAS sgemm per expert, moe_core routing/capacity/activation"},
              {"passed", r.passed}};
    if (!r.passed) j["failure"] = r.failure;
    return j;
}

}  // namespace moebench
