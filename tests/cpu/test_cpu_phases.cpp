// SPDX-License-Identifier: Apache-2.0
// CPU backend phases against plainly written reference loops (no BLAS): GEMM, norms, RoPE, prefill and decode
// attention (GQA, sinks, sliding window), and the whole attention block (GQA decode over the cache, MLA prefill).
#include "backends/cpu/cpu_backend_impl.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "common/error.hpp"
#include "core/moe_core.cuh"
#include "test_models.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace moebench;
using namespace moebench::cpu;

namespace {

std::vector<float> randv(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-scale, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

double rel_err(const float* a, const std::vector<double>& ref) {
    double e = 0, r = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        e += (a[i] - ref[i]) * (a[i] - ref[i]);
        r += ref[i] * ref[i];
    }
    return std::sqrt(e / std::max(r, 1e-30));
}

// y[m, n] = x[m, k] . w[n, k]^T
std::vector<double> linear_ref(const float* x, const float* w, int64_t m, int64_t n, int64_t k,
                               const float* b = nullptr) {
    std::vector<double> y(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double s = b ? b[j] : 0.0;
            for (int64_t l = 0; l < k; ++l) s += static_cast<double>(x[i * k + l]) * w[j * k + l];
            y[i * n + j] = s;
        }
    return y;
}
std::vector<float> to_f(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

void rms_ref(std::vector<float>& x, int64_t rows, int64_t n, const float* w, double eps, int64_t ld = 0) {
    if (!ld) ld = n;
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += x[r * ld + i] * x[r * ld + i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int64_t i = 0; i < n; ++i) x[r * ld + i] = static_cast<float>(x[r * ld + i] * inv * w[i]);
    }
}

// rotate-half RoPE of v[0..d) at position pos.
void rope_ref(float* v, int64_t d, int64_t pos, double theta) {
    std::vector<float> o(v, v + d);
    for (int64_t i = 0; i < d / 2; ++i) {
        const double a = pos * std::pow(theta, -2.0 * i / d);
        o[i] = static_cast<float>(v[i] * std::cos(a) - v[i + d / 2] * std::sin(a));
        o[i + d / 2] = static_cast<float>(v[i + d / 2] * std::cos(a) + v[i] * std::sin(a));
    }
    std::copy(o.begin(), o.end(), v);
}

// out[h] for one query against keys[n][dq], values[n][dv] with optional sink.
void attend_ref(const float* q, const std::vector<const float*>& ks, const std::vector<const float*>& vs, int64_t dq,
                int64_t dv, double scale, const float* sink, double* out) {
    std::vector<double> s(ks.size());
    double mx = sink ? *sink : -1e300;
    for (size_t j = 0; j < ks.size(); ++j) {
        double d = 0;
        for (int64_t i = 0; i < dq; ++i) d += static_cast<double>(q[i]) * ks[j][i];
        s[j] = d * scale;
        mx = std::max(mx, s[j]);
    }
    double sum = sink ? std::exp(*sink - mx) : 0.0;
    for (auto& x : s) sum += (x = std::exp(x - mx));
    for (int64_t i = 0; i < dv; ++i) out[i] = 0;
    for (size_t j = 0; j < ks.size(); ++j)
        for (int64_t i = 0; i < dv; ++i) out[i] += s[j] / sum * vs[j][i];
}

}  // namespace

TEST_CASE("gemm_xwt equals the naive product, including beta = 1 accumulation", "[cpu_phases]") {
    const int64_t m = 7, n = 13, k = 29;
    auto x = randv(m * k, 1), w = randv(n * k, 2), y = randv(m * n, 3);
    auto y0 = y;
    gemm_xwt(m, n, k, x.data(), w.data(), y.data());
    CHECK(rel_err(y.data(), linear_ref(x.data(), w.data(), m, n, k)) < 1e-6);
    auto ref = linear_ref(x.data(), w.data(), m, n, k);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += y0[i];
    gemm_xwt(m, n, k, x.data(), w.data(), y0.data(), 1.0f);
    CHECK(rel_err(y0.data(), ref) < 1e-6);
}

TEST_CASE("skinny GEMM (decode rows) equals the naive product for m = 1..8, odd k, beta 0 and 1", "[cpu_phases]") {
    ThreadPool pool(2);
    for (int64_t m = 1; m <= kSkinnyRows; ++m) {
        const int64_t n = 37, k = 1037;  // k spans several 512-chunks and a tail
        auto x = randv(m * k, 40 + m), w = randv(n * k, 50 + m), y = randv(m * n, 60 + m);
        auto y0 = y;
        gemm_auto(pool, m, n, k, x.data(), w.data(), y.data());
        CHECK(rel_err(y.data(), linear_ref(x.data(), w.data(), m, n, k)) < 1e-6);
        auto ref = linear_ref(x.data(), w.data(), m, n, k);
        for (size_t i = 0; i < ref.size(); ++i) ref[i] += y0[i];
        gemm_auto(pool, m, n, k, x.data(), w.data(), y0.data(), 1.0f);
        CHECK(rel_err(y0.data(), ref) < 1e-6);
    }
}

TEST_CASE("panel layout: pack and unpack round-trip, including a narrower last panel", "[cpu_phases]") {
    ThreadPool pool(2);
    for (int64_t n : {kPanelCols, 3 * kPanelCols, 2 * kPanelCols + 5, int64_t(7)}) {
        const int64_t k = 29;
        auto w = randv(n * k, 70 + n);
        std::vector<float> packed(w.size(), 0.0f), back(w.size(), 0.0f);
        pack_panels(pool, w.data(), n, k, packed.data());
        // Panel p holds outputs [16p, 16p + nr) k-major: element (row j0 + j, column c) at j0 * k + c * nr + j.
        for (int64_t j = 0; j < n; ++j)
            for (int64_t c = 0; c < k; ++c) {
                const int64_t j0 = j / kPanelCols * kPanelCols, nr = std::min(kPanelCols, n - j0);
                REQUIRE(packed[static_cast<size_t>(j0 * k + c * nr + (j - j0))] == w[static_cast<size_t>(j * k + c)]);
            }
        unpack_panels(pool, packed.data(), n, k, back.data());
        CHECK(back == w);
    }
}

TEST_CASE("panel kernel equals the naive product: one or several row groups, k chunks, tail panel, beta 0 and 1",
          "[cpu_phases]") {
    ThreadPool pool(2);
    // m = 1-6 run four adjacent panels at once, then a pair, then one; 7-15 pairs (an odd panel alone); 16-24 one
    // register group, 25 two, 60 three. k = 600 spans several k chunks; n = 37 has a 5-wide last panel, 48 three
    // full panels, 112 seven (4 + 2 + 1), 144 an item of 8 + 1.
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 25, 60})
        for (int64_t n : {int64_t(37), 3 * kPanelCols, 7 * kPanelCols, 8 * kPanelCols + kPanelCols})
            for (int64_t k : {int64_t(7), int64_t(600)}) {
                auto x = randv(m * k, 80 + m), w = randv(n * k, 90 + n), y = randv(m * n, 100 + k);
                std::vector<float> wp(w.size());
                pack_panels(pool, w.data(), n, k, wp.data());
                auto y1 = y;
                XwtProblem q{.m = m, .n = n, .k = k, .x = x.data(), .w = wp.data(), .y = y.data(), .w_panels = true};
                double us = -1.0;
                gemm_xwt_many(pool, &q, 1, 0.0f, &us);
                INFO("m " << m << " n " << n << " k " << k);
                CHECK(rel_err(y.data(), linear_ref(x.data(), w.data(), m, n, k)) < 1e-6);
                CHECK(us >= 0.0);
                auto ref = linear_ref(x.data(), w.data(), m, n, k);
                for (size_t i = 0; i < ref.size(); ++i) ref[i] += y1[i];
                q.y = y1.data();
                gemm_xwt_many(pool, &q, 1, 1.0f);
                CHECK(rel_err(y1.data(), ref) < 1e-6);
            }
}

TEST_CASE("gemm_xwt_many over experts with uneven rows in panel layout: each product equals the naive product",
          "[cpu_phases]") {
    // The items of all products run in one pass, claimed from both ends of a list sorted by rows; every product
    // must still get exactly its own result and a time (0 rows: nothing written, no time).
    for (int64_t threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        const int64_t n = 7 * kPanelCols + 5, k = 300;
        const std::vector<int64_t> ms = {1, 9, 0, 24, 3, 6, 15, 40, 2};
        std::vector<std::vector<float>> xs, ws, wps, ys;
        std::vector<XwtProblem> probs;
        for (size_t p = 0; p < ms.size(); ++p) {
            const int64_t rows = std::max<int64_t>(1, ms[p]);
            xs.push_back(randv(static_cast<size_t>(rows * k), 300 + static_cast<uint32_t>(p)));
            ws.push_back(randv(static_cast<size_t>(n * k), 400 + static_cast<uint32_t>(p)));
            wps.emplace_back(ws.back().size());
            pack_panels(pool, ws.back().data(), n, k, wps.back().data());
            ys.emplace_back(static_cast<size_t>(rows * n), 7.0f);
        }
        for (size_t p = 0; p < ms.size(); ++p)
            probs.push_back(XwtProblem{.m = ms[p],
                                       .n = n,
                                       .k = k,
                                       .x = xs[p].data(),
                                       .w = wps[p].data(),
                                       .y = ys[p].data(),
                                       .w_panels = true});
        std::vector<double> us(ms.size(), -1.0);
        gemm_xwt_many(pool, probs.data(), static_cast<int64_t>(probs.size()), 0.0f, us.data());
        for (size_t p = 0; p < ms.size(); ++p) {
            INFO("threads " << threads << " product " << p << " rows " << ms[p]);
            if (ms[p] == 0) {
                CHECK(us[p] == 0.0);
                CHECK(ys[p][0] == 7.0f);
                continue;
            }
            CHECK(rel_err(ys[p].data(), linear_ref(xs[p].data(), ws[p].data(), ms[p], n, k)) < 1e-6);
            CHECK(us[p] > 0.0);
        }
    }
}

TEST_CASE("thread pool: every index once, back to back and after idling, and exceptions rethrown", "[cpu_phases]") {
    ThreadPool pool(3);
    std::vector<int> hits(1000);
    // Back-to-back jobs (workers still spinning), then jobs after sleeps longer than the spin (workers asleep).
    for (int round = 0; round < 40; ++round) {
        if (round % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const int64_t n = 1 + (round * 37) % 1000;
        std::fill(hits.begin(), hits.end(), 0);
        pool.parallel_for(
            n,
            [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
            },
            1 + round % 3);
        for (int64_t i = 0; i < 1000; ++i) REQUIRE(hits[static_cast<size_t>(i)] == (i < n ? 1 : 0));
    }
    CHECK_THROWS_WITH(pool.parallel_for(64,
                                        [](int64_t b, int64_t) {
                                            if (b >= 32) throw std::runtime_error("chunk failed");
                                        }),
                      "chunk failed");
    std::atomic<int64_t> sum{0};
    pool.parallel_for(100, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) sum += i;
    });
    CHECK(sum == 4950);
}

TEST_CASE("RMSNorm and LayerNorm rows equal the naive formulas", "[cpu_phases]") {
    ThreadPool pool(2);
    const int64_t rows = 9, n = 33;
    auto x = randv(rows * n, 4, 3.0f), w = randv(n, 5), b = randv(n, 6);
    std::vector<float> out(x.size());
    rmsnorm_rows(pool, x.data(), w.data(), out.data(), rows, n, 1e-5f);
    auto ref = x;
    rms_ref(ref, rows, n, w.data(), 1e-5);
    CHECK(rel_err(out.data(), std::vector<double>(ref.begin(), ref.end())) < 1e-6);
    layernorm_rows(pool, x.data(), w.data(), b.data(), out.data(), rows, n, 1e-5f);
    std::vector<double> lref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < n; ++i) mean += x[r * n + i] / static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean) / n;
        for (int64_t i = 0; i < n; ++i) lref[r * n + i] = (x[r * n + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    }
    CHECK(rel_err(out.data(), lref) < 1e-6);
}

TEST_CASE("RoPE (rotate-half) on a sub-range of each head", "[cpu_phases]") {
    ThreadPool pool(2);
    const int64_t rows = 3, heads = 2, hs = 10, off = 4, rot = 6;
    auto x = randv(rows * heads * hs, 7);
    std::vector<int64_t> pos = {0, 5, 17};
    std::vector<float> cs(18 * rot);
    rope_table(cs.data(), 18, rot, 10000.0);
    auto ref = x;
    rope_rows(pool, x.data(), rows, heads * hs, heads, hs, off, rot, cs.data(), pos.data());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < heads; ++h) rope_ref(ref.data() + r * heads * hs + h * hs + off, rot, pos[r], 10000.0);
    for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(ref[i]).margin(1e-5));
}

TEST_CASE("prefill attention: causal GQA, with sinks and a sliding window", "[cpu_phases]") {
    ThreadPool pool(2);
    for (int variant = 0; variant < 3; ++variant) {
        AttnParams p;
        p.num_heads = 4;
        p.num_kv_heads = 2;
        p.qk_dim = 8;
        p.v_dim = 6;
        p.scale = 0.35f;
        const int64_t B = 2, S = 300, T = B * S;  // S > 256 exercises two query blocks
        auto q = randv(T * 4 * 8, 10), k = randv(T * 2 * 8, 11), v = randv(T * 2 * 6, 12), sinks = randv(4, 13);
        if (variant >= 1) p.sinks = sinks.data();
        if (variant == 2) p.window = 37;
        std::vector<float> out(T * 4 * 6);
        attention_prefill(pool, p, B, S, q.data(), k.data(), v.data(), out.data());
        std::vector<double> ref(out.size());
        for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < S; ++i)
                for (int64_t h = 0; h < 4; ++h) {
                    std::vector<const float*> ks, vs;
                    for (int64_t j = 0; j <= i; ++j) {
                        if (p.window && i - j >= p.window) continue;
                        ks.push_back(k.data() + ((b * S + j) * 2 + h / 2) * 8);
                        vs.push_back(v.data() + ((b * S + j) * 2 + h / 2) * 6);
                    }
                    attend_ref(q.data() + ((b * S + i) * 4 + h) * 8, ks, vs, 8, 6, p.scale,
                               p.sinks ? p.sinks + h : nullptr, ref.data() + ((b * S + i) * 4 + h) * 6);
                }
        CHECK(rel_err(out.data(), ref) < 1e-5);
    }
}

TEST_CASE("decode attention over the cache plus the token itself, GQA, sinks, window, odd head size", "[cpu_phases]") {
    ThreadPool pool(2);
    for (int variant = 0; variant < 3; ++variant) {
        const int64_t D = variant == 2 ? 40 : 16;  // 40: head size not a multiple of 16 (scalar tails)
        AttnParams p;
        p.num_heads = 6;
        p.num_kv_heads = 2;
        p.qk_dim = D;
        p.v_dim = D;
        p.scale = 0.25f;
        const int64_t B = 3, L = 50;
        auto q = randv(B * 6 * D, 20), k = randv(B * 2 * D, 21), v = randv(B * 2 * D, 22);
        auto kc = randv(B * 2 * L * D, 23), vc = randv(B * 2 * L * D, 24), sinks = randv(6, 25);
        if (variant >= 1) {
            p.sinks = sinks.data();
            p.window = 20;
        }
        std::vector<float> out(B * 6 * D);
        attention_decode(pool, p, B, L, q.data(), k.data(), v.data(), kc.data(), vc.data(), out.data());
        std::vector<double> ref(out.size());
        for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < 6; ++h) {
                const int64_t g = h / 3;
                std::vector<const float*> ks, vs;
                for (int64_t j = 0; j < L; ++j) {
                    if (p.window && L - j >= p.window) continue;
                    ks.push_back(kc.data() + ((b * 2 + g) * L + j) * D);
                    vs.push_back(vc.data() + ((b * 2 + g) * L + j) * D);
                }
                ks.push_back(k.data() + (b * 2 + g) * D);
                vs.push_back(v.data() + (b * 2 + g) * D);
                attend_ref(q.data() + (b * 6 + h) * D, ks, vs, D, D, p.scale, p.sinks ? p.sinks + h : nullptr,
                           ref.data() + (b * 6 + h) * D);
            }
        CHECK(rel_err(out.data(), ref) < 1e-5);
    }
}

namespace {
ModelConfig attn_model(bool mla) {
    ModelConfig m;
    m.name = "tiny-attn";
    m.vocab_size = 40;
    m.hidden_size = 24;
    m.num_layers = 1;
    m.layer_is_moe = {0};
    m.dense_intermediate_size = 20;
    if (mla) {
        m.attn = test::tiny_mla_attention({.num_heads = 3,
                                           .q_lora_rank = 10,
                                           .kv_lora_rank = 12,
                                           .qk_nope_head_dim = 8,
                                           .qk_rope_head_dim = 4,
                                           .v_head_dim = 6});
    } else {
        m.attn.kind = AttentionKind::gqa;
        m.attn.num_heads = 4;
        m.attn.num_kv_heads = 2;
        m.attn.head_dim = 8;
        m.attn.qkv_bias = true;
        m.attn.qk_norm = true;
    }
    m.attn.rope_theta = 10000.0;
    return m;
}

// Runs embed .. o_proj (the attention block of layer 0) on `be`.
void run_attention_block(CpuBackend& be, const ModelConfig& m, const StepShape& s, uint64_t seed) {
    RunOptions opt;
    opt.seed = seed;
    be.prepare(m, {0}, s, opt);
    be.begin_step();
    for (Phase p : {Phase::embed, Phase::attn_norm, Phase::qkv_proj, Phase::attention, Phase::o_proj})
        be.run_phase(p, p == Phase::embed ? -1 : 0);
}

// A linear weight [n, k] of the backend as the reference reads it: row-major, whatever layout the backend chose
// (small steps store weights with a multiple of 16 outputs in panels).
std::vector<float> rows_of(const FBuf& w, int64_t n, int64_t k) {
    ThreadPool pool(1);
    REQUIRE(w.n == n * k);
    return row_major(pool, w.data(), w.panels, n, k);
}

// The block's input as the reference recomputes it: row t = embedding row of token t.
std::vector<float> embedded_input(const CpuBackend& be, int64_t T, int64_t H) {
    std::vector<float> x(T * H);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < H; ++i) x[t * H + i] = be.weights().embed.data()[be.token_ids()[t] * H + i];
    return x;
}
}  // namespace

TEST_CASE("attention block via the backend: GQA decode over the KV cache (q/k norm, biases)", "[cpu_phases]") {
    const auto m = attn_model(false);
    CpuBackend be;
    run_attention_block(be, m, test::decode(3, 9), 31);
    const auto& W = be.weights();
    const auto& lw = W.layers[0];
    const int64_t T = 3, H = 24, nh = 4, nkv = 2, hd = 8, QW = (nh + 2 * nkv) * hd, L = 9;
    CHECK(lw.w_qkv.panels);  // 3 tokens: the fused projection (64 outputs) runs on the panel kernel
    std::vector<float> x = embedded_input(be, T, H);
    auto xn = x;
    rms_ref(xn, T, H, lw.attn_norm_w.data(), m.norm_eps);
    auto qkv = to_f(linear_ref(xn.data(), rows_of(lw.w_qkv, QW, H).data(), T, QW, H, lw.b_qkv.data()));
    std::vector<double> attn(T * nh * hd);
    for (int64_t t = 0; t < T; ++t) {
        float* row = qkv.data() + t * QW;
        for (int64_t h = 0; h < nh + nkv; ++h) {  // q heads then k heads: per-head RMSNorm, then RoPE at `context`
            std::vector<float> hv(row + h * hd, row + (h + 1) * hd);
            rms_ref(hv, 1, hd, (h < nh ? lw.q_norm : lw.k_norm).data(), m.norm_eps);
            rope_ref(hv.data(), hd, L, 10000.0);
            std::copy(hv.begin(), hv.end(), row + h * hd);
        }
        for (int64_t h = 0; h < nh; ++h) {
            const int64_t g = h / 2;
            std::vector<const float*> ks, vs;
            for (int64_t j = 0; j < L; ++j) {
                ks.push_back(lw.k_cache.data() + ((t * nkv + g) * L + j) * hd);
                vs.push_back(lw.v_cache.data() + ((t * nkv + g) * L + j) * hd);
            }
            ks.push_back(row + (nh + g) * hd);
            vs.push_back(row + (nh + nkv + g) * hd);
            attend_ref(row + h * hd, ks, vs, hd, hd, 1.0 / std::sqrt(8.0), nullptr, attn.data() + (t * nh + h) * hd);
        }
    }
    const auto attnf = to_f(attn);
    auto o = linear_ref(attnf.data(), rows_of(lw.w_o, H, nh * hd).data(), T, H, nh * hd);
    for (size_t i = 0; i < o.size(); ++i) o[i] += x[i];
    CHECK(rel_err(be.hidden(), o) < 1e-5);
}

TEST_CASE("attention block via the backend: MLA (non-absorbed) prefill, then dense MLP", "[cpu_phases]") {
    const auto m = attn_model(true);
    CpuBackend be;
    run_attention_block(be, m, test::prefill(2, 5), 32);
    const auto& W = be.weights();
    const auto& lw = W.layers[0];
    const int64_t T = 10, S = 5, H = 24, nh = 3, nope = 8, R = 4, dq = 12, dv = 6, QL = 10, C = 12;
    std::vector<float> x = embedded_input(be, T, H);
    auto xn = x;
    rms_ref(xn, T, H, lw.attn_norm_w.data(), m.norm_eps);
    auto qa = to_f(linear_ref(xn.data(), rows_of(lw.w_q_a, QL, H).data(), T, QL, H));
    rms_ref(qa, T, QL, lw.q_a_norm.data(), m.norm_eps);
    auto q = to_f(linear_ref(qa.data(), rows_of(lw.w_q_b, nh * dq, QL).data(), T, nh * dq, QL));
    auto kva = to_f(linear_ref(xn.data(), rows_of(lw.w_kv_a, C + R, H).data(), T, C + R, H));
    auto lat = kva;
    rms_ref(lat, T, C, lw.kv_a_norm.data(), m.norm_eps, C + R);
    std::vector<float> latc(T * C);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < C; ++i) latc[t * C + i] = lat[t * (C + R) + i];
    auto kvb = to_f(linear_ref(latc.data(), rows_of(lw.w_kv_b, nh * (nope + dv), C).data(), T, nh * (nope + dv), C));
    std::vector<float> K(T * nh * dq), V(T * nh * dv);
    for (int64_t t = 0; t < T; ++t) {
        const int64_t pos = t % S;
        rope_ref(kva.data() + t * (C + R) + C, R, pos, 10000.0);
        for (int64_t h = 0; h < nh; ++h) {
            rope_ref(q.data() + (t * nh + h) * dq + nope, R, pos, 10000.0);
            for (int64_t i = 0; i < nope; ++i)
                K[(t * nh + h) * dq + i] = kvb[t * nh * (nope + dv) + h * (nope + dv) + i];
            for (int64_t i = 0; i < R; ++i) K[(t * nh + h) * dq + nope + i] = kva[t * (C + R) + C + i];
            for (int64_t i = 0; i < dv; ++i)
                V[(t * nh + h) * dv + i] = kvb[t * nh * (nope + dv) + h * (nope + dv) + nope + i];
        }
    }
    std::vector<double> attn(T * nh * dv);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < nh; ++h) {
            std::vector<const float*> ks, vs;
            for (int64_t j = (t / S) * S; j <= t; ++j) {
                ks.push_back(K.data() + (j * nh + h) * dq);
                vs.push_back(V.data() + (j * nh + h) * dv);
            }
            attend_ref(q.data() + (t * nh + h) * dq, ks, vs, dq, dv, 1.0 / std::sqrt(12.0), nullptr,
                       attn.data() + (t * nh + h) * dv);
        }
    const auto attnf = to_f(attn);
    auto o = linear_ref(attnf.data(), rows_of(lw.w_o, H, nh * dv).data(), T, H, nh * dv);
    for (size_t i = 0; i < o.size(); ++i) o[i] += x[i];
    CHECK(rel_err(be.hidden(), o) < 1e-5);

    // Dense MLP: x += down(silu(gate(xn)) * up(xn)), xn = ffn_norm(x).
    std::vector<float> x1(be.hidden(), be.hidden() + T * H);
    be.run_phase(Phase::ffn_norm, 0);
    be.run_phase(Phase::dense_mlp, 0);
    auto xf = x1;
    rms_ref(xf, T, H, lw.ffn_norm_w.data(), m.norm_eps);
    auto gu = linear_ref(xf.data(), rows_of(lw.dense_gu, 40, H).data(), T, 40, H);
    std::vector<float> a(T * 20);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < 20; ++i) {
            const double g = gu[t * 40 + i], u = gu[t * 40 + 20 + i];
            a[t * 20 + i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
        }
    auto y = linear_ref(a.data(), rows_of(lw.dense_down, H, 20).data(), T, H, 20);
    for (size_t i = 0; i < y.size(); ++i) y[i] += x1[i];
    CHECK(rel_err(be.hidden(), y) < 1e-5);

    // final_norm + lm_head on the last token of each sequence (prefill).
    be.run_phase(Phase::final_norm, -1);
    be.run_phase(Phase::lm_head, -1);
    REQUIRE(be.lm_rows() == 2);
    std::vector<float> fin(be.hidden(), be.hidden() + T * H);
    rms_ref(fin, T, H, W.final_norm_w.data(), m.norm_eps);
    for (int64_t b = 0; b < 2; ++b) {
        auto lg = linear_ref(fin.data() + ((b + 1) * S - 1) * H, W.lm_head.data(), 1, 40, H);
        CHECK(rel_err(be.lm_logits() + b * 40, lg) < 1e-5);
    }
}

TEST_CASE("memory preflight refuses a model that cannot fit, naming the fix", "[cpu_phases]") {
    ModelConfig m = attn_model(false);
    m.vocab_size = int64_t(1) << 40;  // a 4 TiB embedding
    StepShape s;
    RunOptions opt;
    CpuBackend be;
    try {
        be.prepare(m, {0}, s, opt);
        FAIL("expected UnsupportedError");
    } catch (const UnsupportedError& e) {
        CHECK(std::string(e.what()).find("--layers") != std::string::npos);
        CHECK(std::string(e.what()).find("MemAvailable") != std::string::npos);
    }
}

TEST_CASE("activation phase: the vectorised rows equal the scalar core activations, clamp included", "[cpu_phases]") {
    // Values to +-12: past gpt-oss's clamp (7), where sigmoid saturates, and across a tail that is not a whole
    // vector (n = 37). Random model weights rarely reach the clamp, so it is exercised here.
    ThreadPool pool(2);
    const int64_t rows = 5, n = 37;
    const auto gu = randv(static_cast<size_t>(rows * 2 * n), 77, 12.0f);
    for (int kind : {core::kActSwiglu, core::kActGeglu, core::kActSwigluOai}) {
        INFO("kind " << kind);
        std::vector<float> act(static_cast<size_t>(rows * n));
        activate_rows(pool, kind, gu.data(), act.data(), rows, n, 7.0f);
        int clamped = 0;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < n; ++i) {
                const float g = gu[static_cast<size_t>(r * 2 * n + i)], u = gu[static_cast<size_t>(r * 2 * n + n + i)];
                const float ref = core::activate(kind, g, u, 7.0f);
                clamped += g > 7.0f || std::fabs(u) > 7.0f;
                // 8 ulp of the result, plus GeGLU's cancellation in 1 + tanh near -1 (scaled by |u|).
                const float tol = 8 * std::numeric_limits<float>::epsilon() * std::fabs(ref) +
                                  (kind == core::kActGeglu ? 1e-6f * std::fabs(u) : 1e-30f);
                INFO("g " << g << " u " << u);
                CHECK(std::fabs(act[static_cast<size_t>(r * n + i)] - ref) <= tol);
            }
        CHECK(clamped > 20);  // the clamp region was reached
    }
}
