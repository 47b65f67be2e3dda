// SPDX-License-Identifier: Apache-2.0
// The MoE kernels at real model shapes, each against an independent host reference:
//  - router top-k at DeepSeek-V3, Mixtral, Qwen3, Qwen3-Next-like and gpt-oss shapes (and one past the warp kernel's
//    limits), T up to 16384: moe_core's route_row per token on the host; ids equal except at near ties;
//  - the permutation at T = 16384, k = 8, E = 256 with skewed ids, dropless and with capacity: moe_core's maps;
//  - the decode expert GEMV at Mixtral-8x7B and DeepSeek-V3 expert shapes (weights filled on the device, re-generated
//    row by row on the host) and at small shapes that reach its multi-pass, tail and partial-block paths: a
//    double-precision loop over the same bf16 values;
//  - the tiled tensor-core expert GEMM over the same products (every gemv check without slot weights runs it too),
//    with several 64-row tiles per expert;
//  - the four expert GEMM variants (cuBLAS loop, cuBLAS grouped, gemv, tiled) on the same rows at both expert shapes;
//  - prefill attention (flash and split-context) at Mixtral, DeepSeek-V3 expanded-MLA and gpt-oss shapes: sampled
//    rows against a double-precision softmax attention.
#include "backends/cuda/gemm.hpp"
#include "common/error.hpp"
#include "core/moe_core.cuh"
#include "gpu_test_util.hpp"
#include "kernels/launch.hpp"
#include "permute_check.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace moebench;
using namespace moebench::test;

namespace {

cudaStream_t kStream = nullptr;  // legacy default stream: every helper syncs the device

/// scale * uniform_pm1 from a seed: fp32 values (not bf16-rounded), reproducible on any host.
std::vector<float> pm1_vec(size_t n, uint64_t seed, float scale) {
    const uint64_t base = core::rng_base(seed, 7);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = scale * core::uniform_pm1(base, i);
    return v;
}

/// f(i, buf) for i < n over the host's cores; buf: `buf_floats` floats of per-thread scratch. f must not use Catch.
void parallel_for(int64_t n, int64_t buf_floats, const std::function<void(int64_t, float*)>& f) {
    const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            std::vector<float> buf(static_cast<size_t>(std::max<int64_t>(buf_floats, 1)));
            for (int64_t i = t; i < n; i += threads) f(i, buf.data());
        });
    for (auto& th : pool) th.join();
}

bool rel_close(double a, double b, double rel) {
    return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

// ---- routing ----------------------------------------------------------------------------------------------------

/// Whether a token's routing has a near tie (1e-6 relative, in double) that fp32 rounding on the device (expf, the
/// softmax sum) may resolve the other way: between the topk_groups-th and the next group score, or between adjacent
/// keys among the best k+1 kept experts (the k-th and (k+1)-th decide the set, the others the order). Computed from
/// the family's definition, not with moe_core.
bool near_tie(const core::RouteParams& p, const float* logits, const float* correction) {
    const int E = p.num_experts;
    std::vector<double> key(E);
    if (p.kind == core::kRouteSigmoidGroupTopk) {
        for (int e = 0; e < E; ++e)
            key[e] = 1.0 / (1.0 + std::exp(-double(logits[e]))) + (correction ? correction[e] : 0.0);
    } else if (p.kind == core::kRouteTopkSoftmax) {
        for (int e = 0; e < E; ++e) key[e] = logits[e];
    } else {  // softmax, then top-k (+ the correction on the selection when given)
        double mx = logits[0], sum = 0;
        for (int e = 0; e < E; ++e) mx = std::max(mx, double(logits[e]));
        for (int e = 0; e < E; ++e) sum += (key[e] = std::exp(double(logits[e]) - mx));
        for (int e = 0; e < E; ++e) key[e] = key[e] / sum + (correction ? correction[e] : 0.0);
    }
    std::vector<double> kept;
    if (p.kind == core::kRouteSigmoidGroupTopk && p.num_groups > 1 && p.topk_groups < p.num_groups) {
        const int G = p.num_groups, gs = E / G;
        std::vector<std::pair<double, int>> groups(G);
        for (int g = 0; g < G; ++g) {
            std::vector<double> v(key.begin() + g * gs, key.begin() + (g + 1) * gs);
            std::sort(v.rbegin(), v.rend());
            groups[g] = {v[0] + (gs > 1 ? v[1] : 0.0), g};
        }
        std::sort(groups.rbegin(), groups.rend());
        if (rel_close(groups[p.topk_groups - 1].first, groups[p.topk_groups].first, 1e-6)) return true;
        for (int i = 0; i < p.topk_groups; ++i)
            kept.insert(kept.end(), key.begin() + groups[i].second * gs, key.begin() + (groups[i].second + 1) * gs);
    } else {
        kept = key;
    }
    std::sort(kept.rbegin(), kept.rend());
    for (int j = 0; j < p.top_k && j + 1 < int(kept.size()); ++j)
        if (rel_close(kept[j], kept[j + 1], 1e-6)) return true;
    return false;
}

struct RoutingCase {
    const char* name;
    int kind, E, k, groups, topk_groups, norm;
    float scale;
    bool correction, router_bias;
    const char* variant;
};

}  // namespace

TEST_CASE("router top-k at real shapes equals route_row on the host, near ties excepted", "[gpu][real_shapes_topk]") {
    const RoutingCase cases[] = {
        {"DeepSeek-V3", core::kRouteSigmoidGroupTopk, 256, 8, 8, 4, 1, 2.5f, true, false, "topk_warp_per_token"},
        {"Mixtral-8x7B", core::kRouteTopkSoftmax, 8, 2, 1, 1, 0, 1.0f, false, false, "topk_warp_per_token"},
        {"Qwen3-MoE", core::kRouteSoftmaxTopk, 128, 8, 1, 1, 1, 1.0f, false, false, "topk_warp_per_token"},
        {"Qwen3-Next-like E=512 k=10", core::kRouteSoftmaxTopk, 512, 10, 1, 1, 1, 1.0f, false, false,
         "topk_warp_per_token"},
        {"gpt-oss-120b (router bias)", core::kRouteTopkSoftmax, 128, 4, 1, 1, 0, 1.0f, false, true,
         "topk_warp_per_token"},
        {"E=1024 (past the warp kernel)", core::kRouteSoftmaxTopk, 1024, 8, 1, 1, 1, 1.0f, false, false,
         "topk_thread_per_token"},
    };
    uint64_t seed = 100;
    for (const RoutingCase& cs : cases) {
        core::RouteParams rp;
        rp.kind = cs.kind;
        rp.num_experts = cs.E;
        rp.top_k = cs.k;
        rp.num_groups = cs.groups;
        rp.topk_groups = cs.topk_groups;
        rp.norm_topk_prob = cs.norm;
        rp.routed_scaling_factor = cs.scale;
        const kernels::RoutingParams p{.route = rp, .soft_topn = 0};
        const int E = cs.E, k = cs.k;
        for (int64_t T : {int64_t(1), int64_t(64), int64_t(4096), int64_t(16384)}) {
            ++seed;
            INFO(cs.name << ", T = " << T);
            const auto logits = pm1_vec(size_t(T) * E, seed, 3.0f);
            const auto corr = pm1_vec(E, seed + 1000, 0.05f);
            const auto rbias = pm1_vec(E, seed + 2000, 0.5f);
            auto dl = upload(logits), dc = upload(corr), db = upload(rbias);
            DeviceBuffer<int32_t> ids(T * k);
            DeviceBuffer<float> w(T * k), scratch(T * kernels::topk_scratch_floats(E, cs.groups));
            const float* dcorr = cs.correction ? dc.get() : nullptr;
            const std::string variant = kernels::launch_topk(dl.get(), cs.router_bias ? db.get() : nullptr, dcorr, p, T,
                                                             ids.get(), w.get(), scratch.get(), kStream);
            CHECK(variant == cs.variant);
            const auto gi = download(ids.get(), size_t(T) * k);
            const auto gw = download(w.get(), size_t(T) * k);

            std::vector<float> row(E), hs(core::route_scratch_floats(E, cs.groups));
            std::vector<int> ri(k);
            std::vector<float> rw(k);
            const float* hcorr = cs.correction ? corr.data() : nullptr;
            int64_t mismatched = 0, unexplained = 0, bad_weights = 0;
            std::string first_unexplained, first_bad_weight;
            for (int64_t t = 0; t < T; ++t) {
                for (int e = 0; e < E; ++e) row[e] = logits[t * E + e] + (cs.router_bias ? rbias[e] : 0.0f);
                core::route_row(rp, row.data(), hcorr, hs.data(), ri.data(), rw.data());
                const int32_t* di = &gi[t * k];
                if (!std::equal(ri.begin(), ri.end(), di)) {
                    ++mismatched;
                    // Acceptable only at a near tie, and still k distinct experts.
                    std::vector<int32_t> s(di, di + k);
                    std::sort(s.begin(), s.end());
                    const bool valid =
                        s.front() >= 0 && s.back() < E && std::adjacent_find(s.begin(), s.end()) == s.end();
                    if (!valid || !near_tie(rp, row.data(), hcorr)) {
                        if (unexplained++ == 0) {
                            std::ostringstream os;
                            os << "token " << t << ": device";
                            for (int j = 0; j < k; ++j) os << ' ' << di[j];
                            os << ", host";
                            for (int j = 0; j < k; ++j) os << ' ' << ri[j];
                            first_unexplained = os.str();
                        }
                    }
                    continue;
                }
                for (int j = 0; j < k; ++j) {
                    const float d = gw[t * k + j], r = rw[j];
                    if (!(std::fabs(d - r) <= 1e-5f * std::fabs(r))) {
                        if (bad_weights++ == 0) {
                            std::ostringstream os;
                            os << "token " << t << " slot " << j << ": device " << d << ", host " << r;
                            first_bad_weight = os.str();
                        }
                    }
                }
            }
            INFO("first unexplained id mismatch: " << first_unexplained);
            INFO("first weight beyond 1e-5 relative: " << first_bad_weight);
            INFO(mismatched << " tokens differ at near ties");
            CHECK(unexplained == 0);
            CHECK(bad_weights == 0);
            CHECK(mismatched * 1000 < T);  // < 0.1% of the tokens
        }
    }
}

// ---- permutation ------------------------------------------------------------------------------------------------

TEST_CASE("permutation at T = 16384, k = 8, E = 256 equals moe_core's maps, dropless and with capacity",
          "[gpu][real_shapes_permute]") {
    const int64_t T = 16384, k = 8, E = 256, A = T * k;
    // Skewed: expert floor(E u^3) (low ids hot), k distinct per token; experts e % 37 == 11 never routed (no rows);
    // about 1/64 of the assignments already removed (-1).
    std::mt19937 g(4242);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    std::vector<int32_t> ids(A);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < k; ++j) {
            int32_t e;
            do {
                e = static_cast<int32_t>(std::min<double>(E - 1, std::floor(E * std::pow(u01(g), 3.0))));
            } while (e % 37 == 11 || std::find(&ids[t * k], &ids[t * k + j], e) != &ids[t * k + j]);
            ids[t * k + j] = e;
        }
    for (int64_t a = 0; a < A; ++a)
        if (g() % 64 == 0) ids[a] = -1;
    const std::vector<float> w = random_vec(A, 4243, 0.0f, 1.0f);
    const int64_t capacity = core::expert_capacity(1.0, T, int(k), int(E));
    REQUIRE(capacity == 512);
    for (int64_t cap : {int64_t(-1), capacity}) {
        const PermuteReference r = check_permutation(ids, w, T, k, E, cap, kStream);
        // The data is what the test claims: idle experts, and with capacity drops and experts under the cap too.
        REQUIRE(std::count(r.counts.begin(), r.counts.end(), 0) > 0);
        if (cap > 0) {
            REQUIRE(r.dropped > 0);
            REQUIRE(std::count(r.counts.begin(), r.counts.end(), cap) > 0);
            REQUIRE(std::count_if(r.counts.begin(), r.counts.end(), [&](int64_t c) { return c > 0 && c < cap; }) > 0);
        }
    }
}

// ---- expert GEMV ------------------------------------------------------------------------------------------------
namespace {

/// The maps launch_permute_index makes from routing ids (dropless), built on the host by plain loops.
struct HostMaps {
    std::vector<int32_t> offsets;    // [E+1]
    std::vector<int32_t> tiles;      // [E+1]: the tile map (exclusive sum of ceil(rows / kExpertTileRows))
    std::vector<int32_t> active;     // [E+1]: count, then the experts with rows ascending; -1 past them (poison)
    std::vector<int32_t> perm_slot;  // [N]: assignment of each row
    int64_t rows = 0;
};
HostMaps host_maps(const std::vector<int32_t>& ids, int64_t E) {
    HostMaps m;
    m.offsets.assign(E + 1, 0);
    m.active.assign(E + 1, -1);
    m.active[0] = 0;
    for (int64_t e = 0; e < E; ++e) {
        m.offsets[e] = int32_t(m.perm_slot.size());
        for (size_t a = 0; a < ids.size(); ++a)
            if (ids[a] == e) m.perm_slot.push_back(int32_t(a));
        if (int64_t(m.perm_slot.size()) > m.offsets[e]) m.active[1 + m.active[0]++] = int32_t(e);
    }
    m.rows = int64_t(m.perm_slot.size());
    m.offsets[E] = int32_t(m.rows);
    m.tiles.assign(E + 1, 0);
    for (int64_t e = 0; e < E; ++e)
        m.tiles[e + 1] = m.tiles[e] + int32_t((m.offsets[e + 1] - m.offsets[e] + kernels::kExpertTileRows - 1) /
                                              kernels::kExpertTileRows);
    return m;
}

struct DeviceMaps {
    HostMaps host;
    DeviceBuffer<int32_t> offsets, active, tiles, perm_slot;
    explicit DeviceMaps(HostMaps m)
        : host(std::move(m)),
          offsets(upload(host.offsets)),
          active(upload(host.active)),
          tiles(upload(host.tiles)),
          perm_slot(upload(host.perm_slot.empty() ? std::vector<int32_t>{0} : host.perm_slot)) {}
};

/// The own expert kernels' arguments over the maps m (y and the per-direction fields left to the caller).
kernels::ExpertKernelArgs kernel_args(const DeviceMaps& m, const bf16* x, const bf16* w, int64_t E, int64_t n_cols,
                                      int64_t k) {
    kernels::ExpertKernelArgs a;
    a.x = x;
    a.w = w;
    a.offsets = m.offsets.get();
    a.active = m.active.get();
    a.tile_offsets = m.tiles.get();
    a.num_experts = E;
    a.n_cols = n_cols;
    a.k = k;
    return a;
}

/// Weight row j (of the expert's rows) of expert e, k floats, exactly as the device holds it.
using WeightRow = std::function<void(int64_t e, int64_t j, float* out)>;

/// Rows filled on the device by launch_fill_bf16(w, n, base, 0, scale, 0): bf16(scale * uniform_pm1(base, i)).
WeightRow filled_rows(uint64_t base, float scale, int64_t rows_per_expert, int64_t k) {
    return [=](int64_t e, int64_t j, float* out) {
        const uint64_t first = static_cast<uint64_t>((e * rows_per_expert + j) * k);
        for (int64_t i = 0; i < k; ++i) out[i] = round_bf(scale * core::uniform_pm1(base, first + uint64_t(i)));
    };
}
/// Rows of a host array [E, rows_per_expert, k] (uploaded as is).
WeightRow host_rows(const std::vector<float>& w, int64_t rows_per_expert, int64_t k) {
    return [&w, rows_per_expert, k](int64_t e, int64_t j, float* out) {
        std::copy_n(w.begin() + (e * rows_per_expert + j) * k, k, out);
    };
}

/// dots[r * n_cols + c] = x_r . W_e[j0 + c] in double for every row r of every expert e (from the offsets alone).
std::vector<double> ref_dots(const HostMaps& m, const std::vector<float>& x, int64_t E, int64_t n_cols, int64_t k,
                             const WeightRow& wrow, int64_t j0) {
    std::vector<double> out(size_t(m.rows * n_cols), 0.0);
    parallel_for(E * n_cols, k, [&](int64_t item, float* wbuf) {
        const int64_t e = item / n_cols, c = item % n_cols;
        const int64_t r0 = m.offsets[e], r1 = m.offsets[e + 1];
        if (r0 == r1) return;
        wrow(e, j0 + c, wbuf);
        for (int64_t r = r0; r < r1; ++r) {
            double s = 0;
            const float* xr = &x[r * k];
            for (int64_t i = 0; i < k; ++i) s += double(xr[i]) * wbuf[i];
            out[r * n_cols + c] = s;
        }
    });
    return out;
}

double ref_act(int act, double g, double u, double limit) {
    if (act == core::kActSwigluOai) {
        g = std::min(g, limit);
        u = std::clamp(u, -limit, limit);
        return g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
    }
    if (act == core::kActGeglu) {
        const double c = 0.7978845608028654;  // sqrt(2 / pi)
        return 0.5 * g * (1.0 + std::tanh(c * (g + 0.044715 * g * g * g))) * u;
    }
    return g / (1.0 + std::exp(-g)) * u;  // swiglu
}

int num_sms() {
    int dev = 0, sms = 0;
    MOEBENCH_CUDA_CHECK(cudaGetDevice(&dev));
    MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

constexpr float kSentinel = -321.0f;  // exact in bf16; rows past N must keep it

/// Runs the launch into y = [N + 2, n_cols] pre-filled with the sentinel; checks rows < N against ref (relative L2
/// over all and per row < 1e-2) and that the two rows past N are untouched. Without slot weights (which only the gemv
/// kernel applies) the tiled kernel runs the same product over the tile map and is checked the same way.
void run_and_check(const std::string& what, const kernels::ExpertKernelArgs& a, int64_t N,
                   const std::vector<float>& ref, const std::vector<int>& grids) {
    const int64_t n = a.n_cols;
    auto check = [&](const std::string& kernel, int grid, const std::function<void(bf16*)>& launch) {
        INFO(what << ", " << kernel << ", grid " << grid << " blocks");
        auto y = upload_bf16(std::vector<float>(size_t((N + 2) * n), kSentinel));
        launch(y.get());
        const auto got = download_bf16(y.get(), size_t((N + 2) * n));
        const std::vector<float> head(got.begin(), got.begin() + N * n);
        CHECK(rel_l2(head, ref) < 1e-2);
        double worst = 0;
        int64_t worst_row = -1;
        for (int64_t r = 0; r < N; ++r) {
            const std::vector<float> gr(got.begin() + r * n, got.begin() + (r + 1) * n);
            const std::vector<float> rr(ref.begin() + r * n, ref.begin() + (r + 1) * n);
            const double e = rel_l2(gr, rr);
            if (e > worst) {
                worst = e;
                worst_row = r;
            }
        }
        INFO("worst row " << worst_row << ": relative L2 " << worst);
        CHECK(worst < 1e-2);
        CHECK(std::count(got.begin() + N * n, got.end(), kSentinel) == 2 * n);
    };
    auto run = [&](bool tiled, int grid) {
        return [&, tiled, grid](bf16* y) {
            kernels::ExpertKernelArgs g = a;
            g.y = y;
            g.grid_blocks = grid;
            tiled ? kernels::launch_expert_tiled(g, kStream) : kernels::launch_expert_gemv(g, kStream);
        };
    };
    for (int grid : grids) check("gemv", grid, run(false, grid));
    if (a.slot_weights) return;
    for (int grid : {kernels::tiled_grid_blocks(num_sms()), 1, 5}) check("tiled", grid, run(true, grid));
}

/// Fused gate/up: a[r, c] = act(x_r . Wg_c (+ bg), x_r . Wu_c (+ bu)), W = dw [E, 2 n_cols, k]; swiglu and geglu
/// without bias, swiglu_oai with a bias and a clamp limit that bites.
void check_fused(const std::string& name, const DeviceMaps& m, int64_t E, int64_t n_cols, int64_t k, const bf16* dw,
                 const WeightRow& wrow, uint32_t seed, const std::vector<int>& grids) {
    const int64_t N = m.host.rows;
    const auto x = random_vec(size_t(N * k), seed);
    const auto bias = random_vec(size_t(E * 2 * n_cols), seed + 1, -0.5f, 0.5f);
    auto dx = upload_bf16(x.empty() ? std::vector<float>(8, 0.0f) : x);
    auto db = upload_bf16(bias);
    const auto G = ref_dots(m.host, x, E, n_cols, k, wrow, 0);
    const auto U = ref_dots(m.host, x, E, n_cols, k, wrow, n_cols);
    std::vector<int32_t> row_expert(N);
    for (int64_t e = 0; e < E; ++e)
        for (int64_t r = m.host.offsets[e]; r < m.host.offsets[e + 1]; ++r) row_expert[r] = int32_t(e);
    const float limit = 0.75f;
    for (int act : {int(core::kActSwiglu), int(core::kActGeglu), int(core::kActSwigluOai)}) {
        const bool with_bias = act == core::kActSwigluOai;
        std::vector<float> ref(size_t(N * n_cols));
        for (int64_t r = 0; r < N; ++r)
            for (int64_t c = 0; c < n_cols; ++c) {
                double g = G[r * n_cols + c], u = U[r * n_cols + c];
                if (with_bias) {
                    g += bias[row_expert[r] * 2 * n_cols + c];
                    u += bias[row_expert[r] * 2 * n_cols + n_cols + c];
                }
                ref[r * n_cols + c] = float(ref_act(act, g, u, limit));
            }
        kernels::ExpertKernelArgs a = kernel_args(m, dx.get(), dw, E, n_cols, k);
        a.fused_up = true;
        a.act = act;
        a.limit = limit;
        a.bias = with_bias ? db.get() : nullptr;
        run_and_check(name + ": fused gate/up, act " + std::to_string(act), a, N, ref, grids);
    }
}

/// Down: y[r, c] = s_r * (x_r . Wd_c), W = dw [E, n_cols, k]; s_r = 1, then slot_weights[perm_slot[r]].
void check_down(const std::string& name, const DeviceMaps& m, int64_t E, int64_t n_cols, int64_t k, const bf16* dw,
                const WeightRow& wrow, int64_t num_slots, uint32_t seed, const std::vector<int>& grids) {
    const int64_t N = m.host.rows;
    const auto x = random_vec(size_t(N * k), seed);
    const auto sw = random_vec(size_t(num_slots), seed + 1, 0.05f, 1.0f);
    auto dx = upload_bf16(x.empty() ? std::vector<float>(8, 0.0f) : x);
    auto dsw = upload(sw);
    const auto D = ref_dots(m.host, x, E, n_cols, k, wrow, 0);
    for (bool weighted : {false, true}) {
        std::vector<float> ref(size_t(N * n_cols));
        for (int64_t r = 0; r < N; ++r)
            for (int64_t c = 0; c < n_cols; ++c)
                ref[r * n_cols + c] = float((weighted ? double(sw[m.host.perm_slot[r]]) : 1.0) * D[r * n_cols + c]);
        kernels::ExpertKernelArgs a = kernel_args(m, dx.get(), dw, E, n_cols, k);
        a.slot_weights = weighted ? dsw.get() : nullptr;
        a.perm_slot = weighted ? m.perm_slot.get() : nullptr;
        run_and_check(name + (weighted ? ": down, slot weights" : ": down"), a, N, ref, grids);
    }
}

/// A real expert layer (E experts, hidden H, expert intermediate I) for the routing `ids` of T tokens x k slots:
/// full [E, ...] weights filled on the device, the host re-generating only the rows of routed experts.
void check_expert_layer(const std::string& name, int64_t E, int64_t H, int64_t I, const std::vector<int32_t>& ids) {
    DeviceMaps m(host_maps(ids, E));
    const std::vector<int> grids = {kernels::gemv_grid_blocks(num_sms())};
    {
        const uint64_t base = core::rng_base(77, core::weight_stream(0, core::kWGate));
        const float scale = core::linear_init_scale(H);
        DeviceBuffer<bf16> w(E * 2 * I * H);
        kernels::launch_fill_bf16(w.get(), w.size(), base, 0, scale, 0.0f, kStream);
        check_fused(name, m, E, I, H, w.get(), filled_rows(base, scale, 2 * I, H), 11, grids);
    }
    {
        const uint64_t base = core::rng_base(77, core::weight_stream(0, core::kWDown));
        const float scale = core::linear_init_scale(I);
        DeviceBuffer<bf16> w(E * H * I);
        kernels::launch_fill_bf16(w.get(), w.size(), base, 0, scale, 0.0f, kStream);
        check_down(name, m, E, H, I, w.get(), filled_rows(base, scale, H, I), int64_t(ids.size()), 13, grids);
    }
}

/// Both products at a small shape with host-made weights (uniform in +-sqrt(3 / k)); seeds from seed_base + k.
void check_small_shape(const std::string& name, const DeviceMaps& m, int64_t E, int64_t n_cols, int64_t k,
                       int64_t num_slots, uint32_t seed_base, const std::vector<int>& grids) {
    const float scale = std::sqrt(3.0f / float(k));
    const uint32_t s = seed_base + uint32_t(k);
    const auto wf = random_vec(size_t(E * 2 * n_cols * k), s, -scale, scale);
    auto dwf = upload_bf16(wf);
    check_fused(name, m, E, n_cols, k, dwf.get(), host_rows(wf, 2 * n_cols, k), s + 100, grids);
    const auto wd = random_vec(size_t(E * n_cols * k), s + 200, -scale, scale);
    auto dwd = upload_bf16(wd);
    check_down(name, m, E, n_cols, k, dwd.get(), host_rows(wd, n_cols, k), num_slots, s + 300, grids);
}

}  // namespace

TEST_CASE("expert gemv at Mixtral-8x7B expert shapes (H 4096, I 14336, E 8) matches a double reference",
          "[gpu][real_shapes_gemv]") {
    // 8 tokens x 2 slots: experts 3 and 6 idle, expert 1 six rows, expert 5 one.
    const std::vector<int32_t> ids = {0, 1, 1, 2, 1, 4, 0, 7, 2, 1, 5, 1, 4, 7, 1, 0};
    const HostMaps m = host_maps(ids, 8);
    REQUIRE(m.active == std::vector<int32_t>{6, 0, 1, 2, 4, 5, 7, -1, -1});
    REQUIRE(m.offsets == std::vector<int32_t>{0, 3, 9, 11, 11, 13, 14, 14, 16});
    check_expert_layer("Mixtral-8x7B", 8, 4096, 14336, ids);
}

TEST_CASE("expert gemv at DeepSeek-V3 expert shapes (H 7168, I 2048, E 256) matches a double reference",
          "[gpu][real_shapes_gemv]") {
    // 8 tokens x 8 distinct experts: four from a hot set of ten (several rows each), four anywhere (mostly one row);
    // the first and last experts routed so the weight buffer's ends are read.
    const int64_t E = 256, T = 8, k = 8;
    std::mt19937 g(777);
    std::vector<int32_t> ids(T * k);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < k; ++j) {
            int32_t e;
            do {
                e = j < 4 ? int32_t(40 + g() % 10) : int32_t(g() % E);
            } while (std::find(&ids[t * k], &ids[t * k + j], e) != &ids[t * k + j]);
            ids[t * k + j] = e;
        }
    auto route_to = [&](int64_t t, int32_t e) {  // token t takes expert e in its last slot unless it has it already
        const int32_t* row = ids.data() + t * k;
        if (std::find(row, row + k, e) == row + k) ids[t * k + k - 1] = e;
    };
    route_to(3, 0);
    route_to(5, int32_t(E - 1));
    const HostMaps m = host_maps(ids, E);
    REQUIRE(m.active[0] < E);
    REQUIRE(m.active[1] == 0);
    REQUIRE(m.active[m.active[0]] == E - 1);
    int64_t most = 0;
    for (int64_t e = 0; e < E; ++e) most = std::max<int64_t>(most, m.offsets[e + 1] - m.offsets[e]);
    REQUIRE(most >= 3);
    check_expert_layer("DeepSeek-V3", E, 7168, 2048, ids);
}

TEST_CASE("expert gemv: more than 8 rows per expert, k tails, partial column blocks, small grids, no rows",
          "[gpu][real_shapes_gemv][sanitize]") {
    CHECK(kernels::gemv_supported(8));
    CHECK(kernels::gemv_supported(72));
    CHECK(kernels::gemv_supported(7168));
    CHECK_FALSE(kernels::gemv_supported(0));
    CHECK_FALSE(kernels::gemv_supported(100));
    CHECK(kernels::gemv_grid_blocks(0) >= 1);
    CHECK(kernels::gemv_grid_blocks(132) >= 132);

    // 16 tokens x 2 slots, shuffled: expert 0 has 21 rows (passes of 8, 8, 5), expert 2 nine (8 + 1), expert 3 one,
    // experts 1 and 4 none; one assignment already removed.
    const int64_t E = 5, T = 16, k = 2;
    std::vector<int32_t> ids;
    ids.insert(ids.end(), 21, 0);
    ids.insert(ids.end(), 9, 2);
    ids.push_back(3);
    ids.push_back(-1);
    std::mt19937 g(99);
    std::shuffle(ids.begin(), ids.end(), g);
    REQUIRE(int64_t(ids.size()) == T * k);
    DeviceMaps m(host_maps(ids, E));
    REQUIRE(m.host.active == std::vector<int32_t>{3, 0, 2, 3, -1, -1});
    REQUIRE(m.host.rows == 31);
    // grid 1 and 3: each block walks many (expert, column block) items.
    const std::vector<int> grids = {kernels::gemv_grid_blocks(num_sms()), 1, 3};
    struct Shape {
        int64_t n_cols, k;
    };
    // k = 72: lanes 9..31 idle; k = 520 and 1032: full 512-wide steps, then a tail on lane 0; n_cols not a multiple
    // of the 8 columns a block takes: a partial last column block.
    for (Shape s : {Shape{20, 72}, Shape{13, 520}, Shape{33, 1032}})
        check_small_shape("n_cols " + std::to_string(s.n_cols) + ", k " + std::to_string(s.k), m, E, s.n_cols, s.k,
                          T * k, 500, grids);

    // No expert has rows (every assignment dropped): nothing is written.
    {
        DeviceMaps none(host_maps(std::vector<int32_t>(T * k, -1), E));
        REQUIRE(none.host.active[0] == 0);
        const int64_t n_cols = 16, kk = 64;
        auto dw = upload_bf16(random_vec(size_t(E * 2 * n_cols * kk), 900));
        auto dx = upload_bf16(random_vec(size_t(4 * kk), 901));
        auto y = upload_bf16(std::vector<float>(size_t(4 * n_cols), kSentinel));
        kernels::ExpertKernelArgs a = kernel_args(none, dx.get(), dw.get(), E, n_cols, kk);
        a.y = y.get();
        a.fused_up = true;
        a.grid_blocks = kernels::gemv_grid_blocks(num_sms());
        kernels::launch_expert_gemv(a, kStream);
        const auto got = download_bf16(y.get(), size_t(4 * n_cols));
        CHECK(std::count(got.begin(), got.end(), kSentinel) == 4 * n_cols);
        // The tiled kernel over an empty tile map: nothing either.
        REQUIRE(none.host.tiles.back() == 0);
        kernels::ExpertKernelArgs t = a;
        t.grid_blocks = kernels::tiled_grid_blocks(num_sms());
        kernels::launch_expert_tiled(t, kStream);
        const auto got_t = download_bf16(y.get(), size_t(4 * n_cols));
        CHECK(std::count(got_t.begin(), got_t.end(), kSentinel) == 4 * n_cols);
        // k not a multiple of 8 is refused before any launch.
        a.k = 100;
        CHECK_THROWS_AS(kernels::launch_expert_gemv(a, kStream), moebench::Error);
    }
}

TEST_CASE("tiled expert GEMM: several 64-row tiles per expert, k tails, partial column tiles",
          "[gpu][real_shapes_gemv][sanitize]") {
    // 100 tokens x 2 slots: expert 1 has 150 rows (tiles of 64, 64, 22), expert 3 forty-nine, expert 4 one; experts 0
    // and 2 none. (check_fused / check_down run the gemv kernel too, over 19 passes of 8 rows for expert 1.)
    const int64_t E = 5, T = 100, k = 2;
    std::vector<int32_t> ids;
    ids.insert(ids.end(), 150, 1);
    ids.insert(ids.end(), 49, 3);
    ids.push_back(4);
    std::mt19937 g(123);
    std::shuffle(ids.begin(), ids.end(), g);
    REQUIRE(int64_t(ids.size()) == T * k);
    DeviceMaps m(host_maps(ids, E));
    REQUIRE(m.host.tiles == std::vector<int32_t>{0, 0, 3, 3, 4, 5});
    const std::vector<int> grids = {kernels::gemv_grid_blocks(num_sms())};
    struct Shape {
        int64_t n_cols, k;
    };
    // k = 72: a 32-wide stage and a partial one (8 of 32); n_cols 40: a partial column tile (32 fused, 64 down).
    for (Shape sh : {Shape{40, 72}, Shape{96, 200}})
        check_small_shape("tiled, n_cols " + std::to_string(sh.n_cols) + ", k " + std::to_string(sh.k), m, E, sh.n_cols,
                          sh.k, T * k, 1500, grids);
}

TEST_CASE("expert GEMM variants at real shapes: cuBLAS loop, cuBLAS grouped, gemv and tiled equal a double reference",
          "[gpu][real_shapes_gemm]") {
    // The down projection (n = H, k = I) of 64 decode tokens: Mixtral-8x7B ~16 rows per expert, DeepSeek-V3 ~2 rows
    // over ~200 experts; each variant's output against the same double-precision reference.
    struct Case {
        const char* name;
        int64_t E, H, I, T, k;
    };
    CudaStream stream;
    CublasHandle h(stream.get());
    for (const Case c : {Case{"Mixtral-8x7B", 8, 4096, 14336, 64, 2}, Case{"DeepSeek-V3", 256, 7168, 2048, 64, 8}}) {
        INFO(c.name);
        std::mt19937 g(99);
        std::vector<int32_t> ids(size_t(c.T * c.k));
        for (int64_t t = 0; t < c.T; ++t)
            for (int64_t j = 0; j < c.k; ++j) {
                int32_t e;
                do {
                    e = int32_t((g() % 3 == 0) ? g() % std::max<int64_t>(1, c.E / 8) : g() % c.E);  // a hot eighth
                } while (std::find(&ids[t * c.k], &ids[t * c.k + j], e) != &ids[t * c.k + j]);
                ids[t * c.k + j] = e;
            }
        DeviceMaps m(host_maps(ids, c.E));
        const int64_t N = m.host.rows;
        REQUIRE(N == c.T * c.k);
        const uint64_t base = core::rng_base(91, core::weight_stream(0, core::kWDown));
        const float scale = core::linear_init_scale(c.I);
        DeviceBuffer<bf16> w(c.E * c.H * c.I);
        kernels::launch_fill_bf16(w.get(), w.size(), base, 0, scale, 0.0f, kStream);
        const auto x = random_vec(size_t(N * c.I), 92);
        auto dx = upload_bf16(x);
        const auto D = ref_dots(m.host, x, c.E, c.H, c.I, filled_rows(base, scale, c.H, c.I), 0);
        const std::vector<float> ref(D.begin(), D.end());
        std::vector<int32_t> counts(size_t(c.E));
        for (int64_t e = 0; e < c.E; ++e) counts[e] = m.host.offsets[e + 1] - m.host.offsets[e];
        ExpertGemmArgs a;
        a.counts_host = counts.data();
        a.offsets_host = m.host.offsets.data();
        a.num_experts = c.E;
        a.n = c.H;
        a.k = c.I;
        a.x = dx.get();
        a.w = w.get();
        DeviceBuffer<bf16> y_loop(N * c.H), y_grouped(N * c.H), y_gemv(N * c.H), y_tiled(N * c.H);
        a.y = y_loop.get();
        MOEBENCH_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads ran on the legacy stream; cuBLAS on its own
        expert_gemm_loop(h.get(), stream.get(), a, nullptr, nullptr, false);
        PinnedBuffer<const void*> ph(3 * c.E);
        DeviceBuffer<const void*> pd(3 * c.E);
        a.y = y_grouped.get();
        expert_gemm_grouped(h.get(), stream.get(), a, ph.get(), pd.get());
        MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
        kernels::ExpertKernelArgs v = kernel_args(m, dx.get(), w.get(), c.E, c.H, c.I);
        v.y = y_gemv.get();
        v.grid_blocks = kernels::gemv_grid_blocks(num_sms());
        kernels::launch_expert_gemv(v, kStream);
        kernels::ExpertKernelArgs t = v;
        t.y = y_tiled.get();
        t.grid_blocks = kernels::tiled_grid_blocks(num_sms());
        kernels::launch_expert_tiled(t, kStream);
        CHECK(rel_l2(download_bf16(y_tiled.get(), size_t(N * c.H)), ref) < 1e-2);
        CHECK(rel_l2(download_bf16(y_loop.get(), size_t(N * c.H)), ref) < 1e-2);
        CHECK(rel_l2(download_bf16(y_grouped.get(), size_t(N * c.H)), ref) < 1e-2);
        CHECK(rel_l2(download_bf16(y_gemv.get(), size_t(N * c.H)), ref) < 1e-2);
    }
}

// ---- attention at real prefill shapes ----------------------------------------------------------------------------

namespace {

struct PrefillAttnCase {
    const char* name;
    int64_t seqs, seq_len, heads, kv_heads, dk, dv, window;
    bool sinks;
};

/// One (token, head) row of softmax attention in double over the bf16-rounded inputs: keys [first, pos] of its
/// sequence (+ the sink), the layout launch_attention reads (q rows of q_token_stride, k/v rows of kv_row_stride).
std::vector<double> attention_row(const kernels::AttentionArgs& a, const std::vector<float>& q,
                                  const std::vector<float>& kv, int64_t v_offset, const std::vector<float>& sinks,
                                  int64_t t, int64_t h) {
    const int64_t b = t / a.tokens_per_seq, pos = a.pos_base + t % a.tokens_per_seq;
    const int64_t lo = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
    const int64_t g = h / (a.num_heads / a.num_kv_heads);
    std::vector<double> s;
    double mx = a.sinks ? double(sinks[h]) : -1e300;
    for (int64_t j = lo; j <= pos; ++j) {
        const float* kr = &kv[(b * a.cache_len + j) * a.kv_row_stride + g * a.kv_head_stride];
        const float* qr = &q[t * a.q_token_stride + h * a.q_head_stride];
        double d = 0;
        for (int64_t i = 0; i < a.dk; ++i) d += double(qr[i]) * kr[i];
        s.push_back(d * a.scale);
        mx = std::max(mx, s.back());
    }
    double l = a.sinks ? std::exp(double(sinks[h]) - mx) : 0.0;
    for (double& x : s) l += (x = std::exp(x - mx));
    std::vector<double> out(a.dv, 0.0);
    for (size_t j = 0; j < s.size(); ++j) {
        const float* vr = &kv[(b * a.cache_len + lo + int64_t(j)) * a.kv_row_stride + g * a.kv_head_stride + v_offset];
        for (int64_t i = 0; i < a.dv; ++i) out[i] += s[j] * vr[i];
    }
    for (double& x : out) x /= l;
    return out;
}

}  // namespace

TEST_CASE("prefill attention at real shapes: flash and split-context equal a double reference on sampled rows",
          "[gpu][real_shapes_attention]") {
    // Mixtral (32 / 8 heads, hd 128), DeepSeek-V3's MLA in the expanded form the backend runs in prefill (128 heads,
    // k = nope + rope = 192, v = 128, k and v in one row per head as mla_kv_), gpt-oss (64 / 8, hd 64, window 128,
    // sinks). Sampled rows: the first, the last of each 64-query tile edge, random ones.
    const PrefillAttnCase cases[] = {
        {"mixtral-8x7b", 1, 2048, 32, 8, 128, 128, 0, false},
        {"deepseek-v3 (expanded MLA)", 1, 1024, 128, 128, 192, 128, 0, false},
        {"gpt-oss", 2, 700, 64, 8, 64, 64, 128, true},
    };
    for (const PrefillAttnCase& cs : cases) {
        INFO(cs.name);
        kernels::AttentionArgs a;
        a.num_tokens = cs.seqs * cs.seq_len;
        a.tokens_per_seq = cs.seq_len;
        a.cache_len = cs.seq_len;
        a.num_heads = cs.heads;
        a.num_kv_heads = cs.kv_heads;
        a.dk = cs.dk;
        a.dv = cs.dv;
        a.window = cs.window;
        a.chunk = 512;
        a.scale = 1.0f / std::sqrt(float(cs.dk));
        a.q_head_stride = cs.dk;
        a.q_token_stride = cs.heads * cs.dk;
        // k and v in one row per kv head (the expanded MLA layout): [k (dk) | v (dv)].
        a.kv_head_stride = cs.dk + cs.dv;
        a.kv_row_stride = cs.kv_heads * a.kv_head_stride;
        std::vector<float> q = pm1_vec(static_cast<size_t>(a.num_tokens * a.q_token_stride), 21, 1.0f);
        std::vector<float> kv = pm1_vec(static_cast<size_t>(cs.seqs * a.cache_len * a.kv_row_stride), 22, 1.0f);
        std::vector<float> sinks = pm1_vec(static_cast<size_t>(cs.heads), 23, 2.0f);
        for (float& x : q) x = round_bf(x);
        for (float& x : kv) x = round_bf(x);
        auto dq = upload_bf16(q), dkv = upload_bf16(kv);
        auto ds = upload(sinks);
        DeviceBuffer<bf16> out(a.num_tokens * cs.heads * cs.dv);
        a.q = dq.get();
        a.k = dkv.get();
        a.v = dkv.get() + cs.dk;
        a.out = out.get();
        a.sinks = cs.sinks ? ds.get() : nullptr;
        REQUIRE(kernels::attention_kernel_of(a) == kernels::AttentionKernel::flash);
        std::mt19937 g(31);
        std::vector<std::pair<int64_t, int64_t>> rows = {{0, 0}, {a.num_tokens - 1, cs.heads - 1}};
        for (int64_t t : {63, 64, 127, 128}) rows.push_back({t, (t * 7) % cs.heads});
        for (int i = 0; i < 48; ++i) rows.push_back({int64_t(g() % a.num_tokens), int64_t(g() % cs.heads)});
        std::vector<float> ref;
        for (const auto& [t, h] : rows)
            for (double x : attention_row(a, q, kv, cs.dk, sinks, t, h)) ref.push_back(float(x));
        for (kernels::AttentionKernel kernel : {kernels::AttentionKernel::flash, kernels::AttentionKernel::split}) {
            kernels::AttentionArgs run = a;
            run.kernel = kernel;
            DeviceBuffer<uint8_t> ws(static_cast<int64_t>(kernels::attention_workspace_bytes(run)));
            MOEBENCH_CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));
            kernels::launch_attention(run, ws.get(), kStream);
            const auto got_all = download_bf16(out.get(), static_cast<size_t>(a.num_tokens * cs.heads * cs.dv));
            std::vector<float> got;
            for (const auto& [t, h] : rows)
                got.insert(got.end(), got_all.begin() + (t * cs.heads + h) * cs.dv,
                           got_all.begin() + (t * cs.heads + h + 1) * cs.dv);
            INFO("kernel " << (kernel == kernels::AttentionKernel::flash ? "flash" : "split"));
            CHECK(rel_l2(got, ref) < 1e-2);
        }
    }
}
