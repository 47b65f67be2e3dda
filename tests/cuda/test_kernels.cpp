// SPDX-License-Identifier: Apache-2.0
// Each own kernel against a plainly written host loop on small shapes (bf16 tolerance), top-k and permutation against
// moe_core run on the host (exact ids), and cuBLAS GEMMs: row-major wrapper vs a loop, grouped vs per-expert loop.
#include "backends/cuda/gemm.hpp"
#include "core/moe_core.cuh"
#include "gpu_test_util.hpp"
#include "kernels/launch.hpp"
#include "permute_check.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

using namespace moebench;
using namespace moebench::test;

namespace {
cudaStream_t kStream = nullptr;  // legacy default stream: every helper syncs the device
}

TEST_CASE("rmsnorm and layernorm match a host loop, including per-head rows", "[gpu][kernels][sanitize]") {
    const int64_t rows = 6, cols = 320;
    auto x = random_vec(rows * cols, 1, -2, 2);
    auto w = random_vec(cols, 2, 0.5f, 1.5f);
    auto dx = upload_bf16(x), dw = upload_bf16(w);
    DeviceBuffer<bf16> dy(rows * cols);
    for (bool ln : {false, true}) {
        kernels::launch_norm(dx.get(), cols, dw.get(), nullptr, dy.get(), cols, rows, cols, 1, 1e-6f, ln, kStream);
        auto y = download_bf16(dy.get(), rows * cols);
        std::vector<float> ref(rows * cols);
        for (int64_t r = 0; r < rows; ++r) {
            double mean = 0, sq = 0;
            if (ln)
                for (int64_t c = 0; c < cols; ++c) mean += x[r * cols + c] / double(cols);
            for (int64_t c = 0; c < cols; ++c) sq += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
            const double inv = 1.0 / std::sqrt(sq / cols + 1e-6);
            for (int64_t c = 0; c < cols; ++c) ref[r * cols + c] = float((x[r * cols + c] - mean) * inv * w[c]);
        }
        CHECK(rel_l2(y, ref) < 1e-2);
    }
    // Per-head: 3 heads of 64 in rows of width 200 (stride), heads_per_row = 3.
    const int64_t hd = 64, heads = 3, ld = 200, toks = 4;
    auto q = random_vec(toks * ld, 3);
    auto qn = random_vec(hd, 4, 0.5f, 1.5f);
    auto dq = upload_bf16(q), dqn = upload_bf16(qn);
    kernels::launch_norm(dq.get(), ld, dqn.get(), nullptr, dq.get(), ld, toks * heads, hd, heads, 1e-6f, false,
                         kStream);
    auto got = download_bf16(dq.get(), toks * ld);
    std::vector<float> ref = q;
    for (int64_t t = 0; t < toks; ++t)
        for (int64_t h = 0; h < heads; ++h) {
            double sq = 0;
            for (int64_t d = 0; d < hd; ++d) sq += double(q[t * ld + h * hd + d]) * q[t * ld + h * hd + d];
            const double inv = 1.0 / std::sqrt(sq / hd + 1e-6);
            for (int64_t d = 0; d < hd; ++d) ref[t * ld + h * hd + d] = float(q[t * ld + h * hd + d] * inv * qn[d]);
        }
    CHECK(rel_l2(got, ref) < 1e-2);
    // Columns past the heads are untouched.
    for (int64_t t = 0; t < toks; ++t)
        for (int64_t c = heads * hd; c < ld; ++c) CHECK(got[t * ld + c] == q[t * ld + c]);
}

TEST_CASE("embedding gather, RoPE and KV append match host loops", "[gpu][kernels][sanitize]") {
    const int64_t V = 50, H = 40, T = 6;
    auto table = random_vec(V * H, 5);
    std::vector<int32_t> ids = {3, 0, 49, 7, 7, 21};
    auto dt = upload_bf16(table);
    auto di = upload(ids);
    DeviceBuffer<bf16> out(T * H);
    kernels::launch_embed(di.get(), dt.get(), out.get(), T, H, kStream);
    auto e = download_bf16(out.get(), T * H);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < H; ++c) REQUIRE(e[t * H + c] == table[ids[t] * H + c]);

    // RoPE on dims [8, 8+16) of 2 heads of 32, 3 tokens per sequence starting at position 100.
    const int64_t heads = 2, hs = 32, off = 8, rot = 16, tps = 3, pos0 = 100;
    auto x = random_vec(T * heads * hs, 6);
    auto dx = upload_bf16(x);
    DeviceBuffer<float> cs(tps * rot);
    kernels::launch_rope_table(cs.get(), pos0, tps, rot, 10000.0, kStream);
    kernels::launch_rope(dx.get(), T, heads, heads * hs, hs, off, rot, tps, cs.get(), kStream);
    auto y = download_bf16(dx.get(), x.size());
    std::vector<float> ref = x;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t i = 0; i < rot / 2; ++i) {
                const double ang = double(pos0 + t % tps) * std::pow(10000.0, -2.0 * i / rot);
                const int64_t b = t * heads * hs + h * hs + off;
                const double x1 = x[b + i], x2 = x[b + i + rot / 2];
                ref[b + i] = float(x1 * std::cos(ang) - x2 * std::sin(ang));
                ref[b + i + rot / 2] = float(x2 * std::cos(ang) + x1 * std::sin(ang));
            }
    CHECK(rel_l2(y, ref) < 1e-2);

    // KV append: 2 sequences x 3 tokens into a cache of 10 rows per sequence at position 4.
    const int64_t row = 12, cache_len = 10;
    auto src = random_vec(T * 20, 7);
    auto ds = upload_bf16(src);
    DeviceBuffer<bf16> cache(2 * cache_len * row);
    MOEBENCH_CUDA_CHECK(cudaMemset(cache.get(), 0, cache.bytes()));
    kernels::launch_kv_append(ds.get(), 20, cache.get(), row, T, 3, cache_len, 4, kStream);
    auto c = download_bf16(cache.get(), 2 * cache_len * row);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < row; ++j) REQUIRE(c[((t / 3) * cache_len + 4 + t % 3) * row + j] == src[t * 20 + j]);
    REQUIRE(c[0] == 0.0f);

    // 2-D copy with a broadcast (MLA's rope key to every head): cols 12..16 of each source row (ld 20) into 3 head
    // slots 10 apart at offset 2 of destination rows of 32; the rest of the destination stays untouched.
    DeviceBuffer<bf16> dst(T * 32);
    MOEBENCH_CUDA_CHECK(cudaMemset(dst.get(), 0, dst.bytes()));
    kernels::launch_copy_2d(ds.get() + 12, 20, dst.get() + 2, 32, T, 4, kStream, 3, 10);
    auto d = download_bf16(dst.get(), T * 32);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < 32; ++i) {
            const int64_t rel = i - 2, h = rel / 10, col = rel % 10;
            const bool written = rel >= 0 && h < 3 && col < 4;
            REQUIRE(d[t * 32 + i] == (written ? src[t * 20 + 12 + col] : 0.0f));
        }
}

namespace {
// Reference attention for one query: softmax over keys [lo, pos] (+ sink) of q.k * scale, times v.
std::vector<float> ref_attention(const kernels::AttentionArgs& a, const std::vector<float>& q,
                                 const std::vector<float>& k, const std::vector<float>& v,
                                 const std::vector<float>* sinks) {
    std::vector<float> out(a.num_tokens * a.num_heads * a.dv);
    for (int64_t t = 0; t < a.num_tokens; ++t)
        for (int64_t h = 0; h < a.num_heads; ++h) {
            const int64_t b = t / a.tokens_per_seq, pos = a.pos_base + t % a.tokens_per_seq;
            int64_t lo = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
            if (a.local_chunk > 0) lo = std::max(lo, (pos / a.local_chunk) * a.local_chunk);
            const int64_t g = h / (a.num_heads / a.num_kv_heads);
            std::vector<double> s;
            double mx = sinks ? (*sinks)[h] : -1e300;
            for (int64_t j = lo; j <= pos; ++j) {
                double d = 0;
                for (int64_t i = 0; i < a.dk; ++i)
                    d += double(q[t * a.q_token_stride + h * a.q_head_stride + i]) *
                         k[(b * a.cache_len + j) * a.kv_row_stride + g * a.kv_head_stride + i];
                s.push_back(d * a.scale);
                mx = std::max(mx, s.back());
            }
            double l = sinks ? std::exp((*sinks)[h] - mx) : 0.0;
            for (auto& x : s) l += (x = std::exp(x - mx));
            for (int64_t i = 0; i < a.dv; ++i) {
                double acc = 0;
                for (size_t j = 0; j < s.size(); ++j)
                    acc += s[j] * v[(b * a.cache_len + lo + int64_t(j)) * a.kv_row_stride + g * a.kv_head_stride + i];
                out[(t * a.num_heads + h) * a.dv + i] = float(acc / l);
            }
        }
    return out;
}
}  // namespace

TEST_CASE("split-context, flash and latent attention match a reference: decode, prefill, GQA, window, sinks, MLA",
          "[gpu][attention][sanitize]") {
    struct Case {
        int64_t tokens, tps, pos_base, heads, kv_heads, dk, dv, window;
        bool sinks;
        int64_t chunk, local_chunk;
        int64_t tile_tokens = 0;  // > 0: a workspace of that many query tokens, so the launch runs in query tiles
        bool shared_kv = false;   // values = the first dv columns of the key rows (MLA's latent cache)
    };
    const Case cases[] = {
        {3, 1, 600, 4, 2, 64, 64, 0, false, 256, 0},    // decode: 3 sequences, 601 keys, 3 splits
        {3, 1, 600, 4, 2, 64, 64, 100, true, 64, 0},    // sliding window + sinks
        {10, 5, 0, 4, 4, 32, 32, 0, false, 2, 0},       // prefill: 2 sequences x 5 tokens, causal, tiny chunks
        {2, 1, 40, 8, 1, 80, 64, 0, false, 16, 0},      // MLA-like: one shared kv head, dv < dk
        {2, 1, 700, 4, 4, 64, 64, 0, false, 64, 256},   // Llama-4 chunked local attention: keys [512, 700]
        {12, 6, 0, 2, 1, 32, 32, 0, false, 4, 4},       // prefill + local chunks of 4 (queries restart per chunk)
        {2, 1, 300, 2, 2, 576, 512, 0, true, 128, 0},   // DeepSeek MLA sizes: dk = 576, dv = 512 (the limits)
        {2, 1, 300, 16, 1, 576, 512, 0, true, 128, 0},  // MLA as DeepSeek runs it: 8 heads per block on one latent head
        {3, 1, 600, 8, 2, 64, 64, 0, false, 256, 0},    // GQA groups of 4: 4 heads per block
        {10, 5, 0, 4, 4, 32, 32, 0, false, 2, 0, 2},    // prefill in query tiles of 2 tokens (5 launches)
        {3, 1, 600, 8, 2, 64, 64, 0, true, 256, 0, 1},  // decode, one query token per launch, 4 heads per block
        // Prefills the flash kernel takes (16+ queries per sequence, dims multiples of 16):
        {200, 100, 0, 4, 2, 64, 64, 0, false, 512, 0},    // 2 sequences, a short second query tile (36 rows)
        {130, 130, 0, 8, 2, 64, 64, 20, true, 512, 0},    // gpt-oss-like: window 20 (key tiles skipped), sinks
        {150, 75, 0, 4, 1, 32, 32, 0, false, 512, 32},    // local chunks of 32 inside a query tile
        {140, 70, 57, 4, 4, 128, 128, 0, false, 512, 0},  // chunked prefill: 57 cached keys before the queries
        {64, 64, 0, 32, 8, 128, 128, 0, false, 512, 0},   // Mixtral's heads (32 / 8, hd 128), one full tile
        {48, 16, 0, 2, 2, 256, 256, 0, true, 512, 0},     // hd 256 (Qwen3-Next): opt-in shared memory; 16 queries
        {33, 33, 5, 2, 1, 48, 16, 7, false, 512, 0},      // dv < dk, window 7, 33 queries
        // Latent rows (one kv head, values = the keys' first dv columns), which the latent kernel takes:
        {2, 1, 300, 16, 1, 576, 512, 0, true, 128, 0, 0, true},    // DeepSeek-V2-Lite decode: 16 heads, 2 slices
        {3, 1, 600, 128, 1, 576, 512, 0, false, 256, 0, 0, true},  // DeepSeek-V3 decode: 2 head tiles x 2 slices
        {10, 5, 40, 20, 1, 64, 48, 7, false, 16, 0, 0, true},      // 20 heads (a partial tile), window, 5 per seq
        {4, 1, 70, 64, 1, 64, 64, 0, false, 32, 0, 2, true},       // query tiles of 2 tokens, chunks of 32
    };
    for (const Case& cs : cases) {
        kernels::AttentionArgs a;
        a.num_tokens = cs.tokens;
        a.tokens_per_seq = cs.tps;
        a.pos_base = cs.pos_base;
        a.cache_len = cs.pos_base + cs.tps;
        a.num_heads = cs.heads;
        a.num_kv_heads = cs.kv_heads;
        a.dk = cs.dk;
        a.dv = cs.dv;
        a.window = cs.window;
        a.chunk = cs.chunk;
        a.local_chunk = cs.local_chunk;
        a.scale = 1.0f / std::sqrt(float(cs.dk));
        a.q_head_stride = cs.dk;
        a.q_token_stride = cs.heads * cs.dk;
        a.kv_head_stride = cs.dk;
        a.kv_row_stride = cs.kv_heads * cs.dk;
        const int64_t seqs = cs.tokens / cs.tps;
        auto q = random_vec(cs.tokens * a.q_token_stride, 11);
        auto k = random_vec(seqs * a.cache_len * a.kv_row_stride, 12);
        auto v = random_vec(seqs * a.cache_len * a.kv_row_stride, 13);
        std::vector<float> sinks = random_vec(cs.heads, 14, 0, 2);
        auto dq = upload_bf16(q), dk = upload_bf16(k), dv = upload_bf16(v);
        auto ds = upload(sinks);
        DeviceBuffer<bf16> out(cs.tokens * cs.heads * cs.dv);
        a.q = dq.get();
        a.k = dk.get();
        a.v = cs.shared_kv ? dk.get() : dv.get();
        a.values_in_keys = cs.shared_kv;
        a.out = out.get();
        a.sinks = cs.sinks ? ds.get() : nullptr;
        if (cs.tile_tokens > 0) {
            kernels::AttentionArgs one = a;  // one token's workspace: its heads x splits partials
            one.num_tokens = 1;
            a.workspace_bytes = cs.tile_tokens * static_cast<int64_t>(kernels::attention_workspace_bytes(one));
        }
        auto ref = ref_attention(a, q, k, cs.shared_kv ? k : v, cs.sinks ? &sinks : nullptr);
        const bool flash_fits = kernels::flash_attention_fits(a), latent_fits = kernels::latent_attention_fits(a);
        CHECK(latent_fits == cs.shared_kv);
        // The automatic choice: flash for 16+ queries per sequence that fit it, else latent for 16+ heads.
        const auto chosen = kernels::attention_kernel_of(a);
        CHECK((chosen == kernels::AttentionKernel::flash) == (flash_fits && cs.tps >= 16));
        CHECK((chosen == kernels::AttentionKernel::latent) ==
              (!(flash_fits && cs.tps >= 16) && latent_fits && cs.heads >= kernels::kLatentMinHeads));
        for (kernels::AttentionKernel kernel : {kernels::AttentionKernel::automatic, kernels::AttentionKernel::split,
                                                kernels::AttentionKernel::flash, kernels::AttentionKernel::latent}) {
            if (kernel == kernels::AttentionKernel::flash && !flash_fits) continue;
            if (kernel == kernels::AttentionKernel::latent && !latent_fits) continue;
            kernels::AttentionArgs run = a;
            run.kernel = kernel;
            DeviceBuffer<uint8_t> ws(run.workspace_bytes >= 0
                                         ? run.workspace_bytes
                                         : static_cast<int64_t>(kernels::attention_workspace_bytes(run)));
            MOEBENCH_CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));  // NaN: a row left unwritten fails
            kernels::launch_attention(run, ws.get(), kStream);
            auto got = download_bf16(out.get(), cs.tokens * cs.heads * cs.dv);
            INFO("case tokens=" << cs.tokens << " tps=" << cs.tps << " window=" << cs.window << " sinks=" << cs.sinks
                                << " dk=" << cs.dk << " local_chunk=" << cs.local_chunk << " heads=" << cs.heads
                                << " kv_heads=" << cs.kv_heads << " tile_tokens=" << cs.tile_tokens
                                << " kernel=" << static_cast<int>(kernel));
            CHECK(rel_l2(got, ref) < 1e-2);
        }
    }
}

TEST_CASE("router top-k equals moe_core route_row on the host for every routing kind", "[gpu][topk][sanitize]") {
    const int E = 64, T = 37;
    auto logits = random_vec(T * E, 21, -3, 3);
    auto corr = random_vec(E, 22, -0.2f, 0.2f);
    auto dl = upload(logits), dc = upload(corr);
    for (int kind = 0; kind <= core::kRouteSparsemixer; ++kind) {
        for (int soft : {0, 5}) {
            core::RouteParams rp;
            rp.kind = kind;
            rp.num_experts = E;
            rp.top_k = kind == core::kRouteTopkSigmoid ? 1 : kind == core::kRouteSparsemixer ? 2 : 6;
            rp.num_groups = (kind == 2 || kind == 3) ? 8 : 1;
            rp.topk_groups = (kind == 2 || kind == 3) ? 3 : 1;
            rp.norm_topk_prob = kind != 3;
            rp.routed_scaling_factor = kind >= 2 ? 2.5f : 1.0f;
            rp.jitter_eps = 0.05f;  // a wide band: several logits inside it on these random rows
            const kernels::RoutingParams p{.route = rp, .soft_topn = soft};
            const int k = soft > 0 ? soft : rp.top_k;
            DeviceBuffer<int32_t> ids(T * k);
            DeviceBuffer<float> w(T * k), scratch(T * kernels::topk_scratch_floats(E, rp.num_groups));
            const std::string variant = kernels::launch_topk(dl.get(), nullptr, kind == 2 ? dc.get() : nullptr, p, T,
                                                             ids.get(), w.get(), scratch.get(), kStream);
            // E = 64, k <= 6, 8 groups: within the one-warp-per-token kernel's limits.
            CHECK(variant == (soft > 0 ? "soft_topn_warp_per_token" : "topk_warp_per_token"));
            auto gi = download(ids.get(), T * k);
            auto gw = download(w.get(), T * k);
            std::vector<float> scratch_h(core::route_scratch_floats(E, rp.num_groups) + E);
            for (int t = 0; t < T; ++t) {
                std::vector<int> ri(k);
                std::vector<float> rw(k);
                if (soft > 0)
                    core::soft_topn_row(&logits[t * E], E, soft, scratch_h.data(), ri.data(), rw.data());
                else
                    core::route_row(rp, &logits[t * E], kind == 2 ? corr.data() : nullptr, scratch_h.data(), ri.data(),
                                    rw.data());
                for (int j = 0; j < k; ++j) {
                    INFO("kind " << kind << " soft " << soft << " token " << t << " slot " << j);
                    REQUIRE(gi[t * k + j] == ri[j]);
                    REQUIRE(gw[t * k + j] == Approx(rw[j]).epsilon(1e-5));
                }
            }
        }
    }
}

TEST_CASE("permutation equals moe_core's maps, with and without capacity drops", "[gpu][permute][sanitize]") {
    const int E = 8, k = 2;
    const int64_t T = 300;
    std::mt19937 g(31);
    std::vector<int32_t> ids(T * k);
    for (int64_t t = 0; t < T; ++t) {
        // Skewed: expert 0 is hot, so capacity drops happen there.
        const int a = (g() % 3 == 0) ? 0 : int(g() % E);
        int b = int(g() % E);
        if (b == a) b = (a + 1) % E;
        ids[t * k] = a;
        ids[t * k + 1] = b;
    }
    ids[5] = -1;  // an assignment already removed (override) is neither routed nor counted as a drop
    std::vector<float> w(T * k, 0.5f);
    for (int64_t cap : {int64_t(-1), core::expert_capacity(1.0, T, k, E)}) {
        const PermuteReference r = check_permutation(ids, w, T, k, E, cap, kStream);
        if (cap > 0) CHECK(r.dropped > 0);
    }
}

TEST_CASE("gather, activation and weighted combine match host loops", "[gpu][moe][sanitize]") {
    const int64_t T = 5, k = 2, H = 24, I = 16, E = 3;
    auto x = random_vec(T * H, 41);
    // Routing: token t -> experts (t % E, (t + 1) % E); build the maps on the host with moe_core.
    std::vector<int32_t> ids(T * k);
    std::vector<float> w = random_vec(T * k, 42, 0, 1);
    for (int64_t t = 0; t < T; ++t) {
        ids[t * k] = int32_t(t % E);
        ids[t * k + 1] = int32_t((t + 1) % E);
    }
    std::vector<int64_t> counts(E), offsets(E + 1), cursor(E), slot64(T * k);
    std::vector<int32_t> tok(T * k);
    std::vector<float> wcopy = w;
    std::vector<int32_t> idcopy = ids;
    core::apply_capacity(idcopy.data(), wcopy.data(), T, int(k), int(E), -1, counts.data());
    core::exclusive_offsets(counts.data(), int(E), offsets.data());
    core::permutation_map(ids.data(), T, int(k), int(E), offsets.data(), cursor.data(), slot64.data(), tok.data());
    const int64_t N = offsets[E];
    std::vector<int32_t> pslot(N), pexp(N), spos(T * k);
    for (int64_t a = 0; a < T * k; ++a) {
        spos[a] = int32_t(slot64[a]);
        pslot[slot64[a]] = int32_t(a);
        pexp[slot64[a]] = ids[a];
    }
    auto dx = upload_bf16(x);
    auto dps = upload(pslot), dpe = upload(pexp), dsp = upload(spos), did = upload(ids);
    auto dw = upload(w);
    // The row count lives on the device; max_rows only bounds the launch: rows past the count stay untouched.
    auto dn = upload(std::vector<int32_t>{int32_t(N)});
    const int64_t max_rows = N + 3;
    const float sentinel = -77.0f;  // exact in bf16
    auto xp = upload_bf16(std::vector<float>(max_rows * H, sentinel));
    kernels::launch_gather_rows(dx.get(), dps.get(), dw.get(), false, xp.get(), dn.get(), max_rows, k, H, kStream);
    auto gx = download_bf16(xp.get(), max_rows * H);
    for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < H; ++c) REQUIRE(gx[r * H + c] == x[(pslot[r] / k) * H + c]);
    for (int64_t i = N * H; i < max_rows * H; ++i) REQUIRE(gx[i] == sentinel);
    {
        // A hidden size that is not a multiple of 8 takes the element-wise path (scaled by the weight here).
        const int64_t H2 = 20;
        auto x2 = random_vec(T * H2, 40);
        auto dx2 = upload_bf16(x2);
        auto xp2 = upload_bf16(std::vector<float>(max_rows * H2, sentinel));
        kernels::launch_gather_rows(dx2.get(), dps.get(), dw.get(), true, xp2.get(), dn.get(), max_rows, k, H2,
                                    kStream);
        auto gx2 = download_bf16(xp2.get(), max_rows * H2);
        for (int64_t r = 0; r < N; ++r)
            for (int64_t c = 0; c < H2; ++c)
                REQUIRE(gx2[r * H2 + c] == round_bf(x2[(pslot[r] / k) * H2 + c] * w[pslot[r]]));
        for (int64_t i = N * H2; i < max_rows * H2; ++i) REQUIRE(gx2[i] == sentinel);
    }

    for (int act = 0; act <= 2; ++act) {
        auto h = random_vec(N * 2 * I, 43, -3, 3);
        auto bias = random_vec(E * 2 * I, 44);
        auto dh = upload_bf16(h), db = upload_bf16(bias);
        DeviceBuffer<bf16> da(N * I);
        kernels::launch_activation(dh.get(), da.get(), N, I, act, 7.0f, db.get(), dpe.get(), kStream);
        auto ga = download_bf16(da.get(), N * I);
        std::vector<float> ref(N * I);
        for (int64_t r = 0; r < N; ++r)
            for (int64_t c = 0; c < I; ++c)
                ref[r * I + c] = core::activate(act, h[r * 2 * I + c] + bias[pexp[r] * 2 * I + c],
                                                h[r * 2 * I + I + c] + bias[pexp[r] * 2 * I + I + c], 7.0f);
        INFO("activation " << act);
        CHECK(rel_l2(ga, ref) < 1e-2);
    }

    auto y = random_vec(N * H, 45);
    auto shared = random_vec(T * H, 46);
    std::vector<float> sg = random_vec(T, 47, -2, 2);
    auto resid = random_vec(T * H, 48);
    auto dy = upload_bf16(y), dsh = upload_bf16(shared), dr = upload_bf16(resid);
    auto dsg = upload(sg);
    DeviceBuffer<bf16> mo(T * H);
    kernels::launch_combine(dy.get(), dsp.get(), did.get(), dw.get(), false, nullptr, dsh.get(), dsg.get(), mo.get(),
                            dr.get(), T, k, H, kStream);
    auto gm = download_bf16(mo.get(), T * H);
    auto gr = download_bf16(dr.get(), T * H);
    std::vector<float> ref(T * H), rref(T * H);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < H; ++c) {
            double acc = 0;
            for (int64_t j = 0; j < k; ++j) acc += w[t * k + j] * y[spos[t * k + j] * H + c];
            acc += core::sigmoidf_(sg[t]) * shared[t * H + c];
            ref[t * H + c] = float(acc);
            rref[t * H + c] = float(resid[t * H + c] + round_bf(float(acc)));
        }
    CHECK(rel_l2(gm, ref) < 1e-2);
    CHECK(rel_l2(gr, rref) < 1e-2);

    // Llama-4 form: the gather scales the input by the weight, the combine then uses unit weights; expert down
    // biases are added per chosen expert; a dropped assignment (slot -1) contributes nothing.
    DeviceBuffer<bf16> xs(N * H);
    kernels::launch_gather_rows(dx.get(), dps.get(), dw.get(), true, xs.get(), dn.get(), N, k, H, kStream);
    auto gxs = download_bf16(xs.get(), N * H);
    std::vector<float> xs_ref(N * H);
    for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < H; ++c) xs_ref[r * H + c] = x[(pslot[r] / k) * H + c] * w[pslot[r]];
    CHECK(rel_l2(gxs, xs_ref) < 1e-2);
    std::vector<int32_t> spos_drop = spos;
    spos_drop[1] = -1;  // token 0, slot 1 dropped
    auto dsp2 = upload(spos_drop);
    auto dbias = random_vec(E * H, 50);
    auto ddb = upload_bf16(dbias);
    DeviceBuffer<bf16> mo2(T * H);
    kernels::launch_combine(dy.get(), dsp2.get(), did.get(), dw.get(), true, ddb.get(), nullptr, nullptr, mo2.get(),
                            nullptr, T, k, H, kStream);
    auto gm2 = download_bf16(mo2.get(), T * H);
    std::vector<float> ref2(T * H);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < H; ++c) {
            double acc = 0;
            for (int64_t j = 0; j < k; ++j)
                if (spos_drop[t * k + j] >= 0) acc += y[spos_drop[t * k + j] * H + c] + dbias[ids[t * k + j] * H + c];
            ref2[t * H + c] = float(acc);
        }
    CHECK(rel_l2(gm2, ref2) < 1e-2);

    // Router bias on fp32 logits.
    std::vector<float> lg = random_vec(T * E, 51), lb = random_vec(E, 52);
    auto dlg = upload(lg), dlb = upload(lb);
    kernels::launch_add_bias_f32(dlg.get(), dlb.get(), T, E, kStream);
    auto glg = download(dlg.get(), T * E);
    for (int64_t i = 0; i < T * E; ++i) REQUIRE(glg[i] == lg[i] + lb[i % E]);

    // Shared-expert gate logit: dot per token.
    auto gw = random_vec(H, 49);
    auto dgw = upload_bf16(gw);
    DeviceBuffer<float> logit(T);
    kernels::launch_row_dot(dx.get(), dgw.get(), logit.get(), T, H, kStream);
    auto gl = download(logit.get(), T);
    for (int64_t t = 0; t < T; ++t) {
        double d = 0;
        for (int64_t c = 0; c < H; ++c) d += double(x[t * H + c]) * gw[c];
        CHECK(gl[t] == Approx(d).margin(1e-4));
    }
}

TEST_CASE("cuBLAS row-major GEMM, batched GEMM, and grouped vs per-expert loop", "[gpu][gemm]") {
    CudaStream stream;
    CublasHandle h(stream.get());
    const int64_t m = 7, n = 24, kk = 40;
    auto x = random_vec(m * kk, 51), w = random_vec(n * kk, 52);
    auto dx = upload_bf16(x), dw = upload_bf16(w);
    DeviceBuffer<float> y(m * n);
    gemm_xwt(h.get(), m, n, kk, dx.get(), kk, dw.get(), kk, y.get(), CUDA_R_32F, n);
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    auto gy = download(y.get(), m * n);
    std::vector<float> ref(m * n);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double d = 0;
            for (int64_t c = 0; c < kk; ++c) d += double(x[i * kk + c]) * w[j * kk + c];
            ref[i * n + j] = float(d);
        }
    CHECK(rel_l2(gy, ref) < 1e-5);  // fp32 output, fp32 accumulation of exact bf16 products

    // Batched, W not transposed: Y_b = X_b . W_b with W_b [k, n]; 3 batches with strides.
    const int64_t nb = 3;
    auto xb = random_vec(nb * m * kk, 53), wb = random_vec(nb * kk * n, 54);
    auto dxb = upload_bf16(xb), dwb = upload_bf16(wb);
    DeviceBuffer<bf16> yb(m * nb * n);  // [m, nb, n]
    gemm_batched(h.get(), false, m, n, kk, dxb.get(), nb * kk, kk, dwb.get(), n, kk * n, yb.get(), nb * n, n, nb);
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    auto gyb = download_bf16(yb.get(), m * nb * n);
    std::vector<float> refb(m * nb * n);
    for (int64_t b = 0; b < nb; ++b)
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double d = 0;
                for (int64_t c = 0; c < kk; ++c) d += double(xb[i * nb * kk + b * kk + c]) * wb[b * kk * n + c * n + j];
                refb[i * nb * n + b * n + j] = float(d);
            }
    CHECK(rel_l2(gyb, refb) < 1e-2);

    // Expert GEMMs: 5 experts, one idle, uneven counts; grouped and loop both equal the reference.
    const int64_t E = 5, N_out = 32, K = 48;
    std::vector<int32_t> counts = {3, 0, 9, 1, 4}, offsets = {0, 3, 3, 12, 13, 17};
    const int64_t rows = offsets[E];
    auto xe = random_vec(rows * K, 55), we = random_vec(E * N_out * K, 56);
    auto dxe = upload_bf16(xe), dwe = upload_bf16(we);
    DeviceBuffer<bf16> y_loop(rows * N_out), y_grp(rows * N_out);
    ExpertGemmArgs a;
    a.counts_host = counts.data();
    a.offsets_host = offsets.data();
    a.num_experts = E;
    a.n = N_out;
    a.k = K;
    a.x = dxe.get();
    a.w = dwe.get();
    a.y = y_loop.get();
    std::vector<CudaEvent> ev(E + 1);
    std::vector<int> ev_experts;
    expert_gemm_loop(h.get(), stream.get(), a, &ev, &ev_experts, false);
    PinnedBuffer<const void*> ph(3 * E);
    DeviceBuffer<const void*> pd(3 * E);
    a.y = y_grp.get();
    expert_gemm_grouped(h.get(), stream.get(), a, ph.get(), pd.get());
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    CHECK(ev_experts == std::vector<int>{0, 2, 3, 4});
    auto gl = download_bf16(y_loop.get(), rows * N_out);
    auto gg = download_bf16(y_grp.get(), rows * N_out);
    std::vector<float> refe(rows * N_out);
    for (int64_t e = 0; e < E; ++e)
        for (int64_t r = offsets[e]; r < offsets[e] + counts[e]; ++r)
            for (int64_t j = 0; j < N_out; ++j) {
                double d = 0;
                for (int64_t c = 0; c < K; ++c) d += double(xe[r * K + c]) * we[(e * N_out + j) * K + c];
                refe[r * N_out + j] = float(d);
            }
    CHECK(rel_l2(gl, refe) < 1e-2);
    CHECK(rel_l2(gg, refe) < 1e-2);
    CHECK(rel_l2(gg, gl) < 1e-2);
}

TEST_CASE("device weight fill equals the CPU backend's fp32 fill rounded to bf16", "[gpu][rng][sanitize]") {
    // --check relies on both backends holding the same weights: the GPU stores bf16(offset + scale * uniform_pm1).
    const int64_t n = 100000;
    const uint64_t base = core::rng_base(1234, core::weight_stream(3, core::kWGate));
    const float scale = core::linear_init_scale(4096);
    DeviceBuffer<bf16> d(n);
    DeviceBuffer<float> f(n);
    kernels::launch_fill_bf16(d.get(), n, base, 777, scale, 0.0f, kStream);
    kernels::launch_fill_f32(f.get(), n, base, 777, 0.1f, 1.0f, kStream);
    auto got = download_bf16(d.get(), n);
    auto gotf = download(f.get(), n);
    int64_t off_by_rounding = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float ref = scale * core::uniform_pm1(base, 777 + static_cast<uint64_t>(i));
        if (got[i] != round_bf(ref)) {
            ++off_by_rounding;  // a product rounded one fp32 ulp apart may land on the other side of a bf16 tie
            REQUIRE(std::fabs(got[i] - ref) <= std::fabs(ref) * (1.0f / 128.0f));
        }
        REQUIRE(gotf[i] == Approx(1.0f + 0.1f * core::uniform_pm1(base, 777 + static_cast<uint64_t>(i))).epsilon(1e-6));
    }
    CHECK(off_by_rounding < n / 1000);
    // Token ids: the same hash modulo the vocabulary.
    DeviceBuffer<int32_t> tok(1000);
    kernels::launch_fill_token_ids(tok.get(), 1000, 129280, base, kStream);
    auto gt = download(tok.get(), 1000);
    for (int64_t i = 0; i < 1000; ++i)
        REQUIRE(gt[i] == static_cast<int32_t>(core::mix64(base + static_cast<uint64_t>(i)) % 129280u));
}

TEST_CASE("expert counts stay exact beyond 2^24 assignments", "[gpu][permute]") {
    // 2^24 + 3 assignments, all but 5 to expert 1: a float reduction would round the count.
    const int64_t T = (int64_t(1) << 24) + 3, k = 1, E = 4;
    std::vector<int32_t> ids(T, 1);
    ids[0] = 0;
    ids[7] = 2;
    ids[T - 1] = 3;
    ids[T - 2] = 3;
    ids[100] = -1;
    auto di = upload(ids);
    DeviceBuffer<float> w(T);
    DeviceBuffer<int32_t> counts(E), offsets(E + 1), pslot(T), pexp(T), spos(T), dropped(1), active(E + 1),
        ws(kernels::permute_workspace_ints(T * k, E));
    const kernels::PermuteMaps maps{.counts = counts.get(),
                                    .offsets = offsets.get(),
                                    .perm_slot = pslot.get(),
                                    .perm_expert = pexp.get(),
                                    .slot_pos = spos.get(),
                                    .dropped = dropped.get(),
                                    .active = active.get()};
    kernels::launch_permute_index(di.get(), w.get(), T, k, E, -1, maps, ws.get(), kStream);
    auto gc = download(counts.get(), E);
    CHECK(gc[0] == 1);
    CHECK(gc[1] == T - 5);
    CHECK(gc[2] == 1);
    CHECK(gc[3] == 2);
    auto go = download(offsets.get(), E + 1);
    CHECK(go[0] == 0);
    CHECK(go[1] == 1);
    CHECK(go[2] == T - 4);
    CHECK(go[3] == T - 3);
    CHECK(go[E] == T - 1);
    auto ga = download(active.get(), E + 1);
    CHECK(ga == std::vector<int32_t>{4, 0, 1, 2, 3});
    auto gd = download(dropped.get(), 1);
    CHECK(gd[0] == 0);
    // The hot expert's rows keep arrival order: its first row is assignment 1, its last T - 3.
    auto gp = download(pslot.get(), T - 1);
    CHECK(gp[1] == 1);
    CHECK(gp[T - 5] == T - 3);
}

TEST_CASE("decode attention splits the context finer when the batch cannot fill the GPU", "[gpu][attention]") {
    // 132 SMs (an H200): the launch must have >= 264 blocks, or the chunk is the smallest, 32 keys.
    kernels::AttentionArgs mla;  // DeepSeek-V3 absorbed: 128 heads on one latent row, dk 576, dv 512 (latent kernel)
    mla.tokens_per_seq = 1;
    mla.pos_base = 1023;
    mla.cache_len = 1024;
    mla.num_heads = 128;
    mla.num_kv_heads = 1;
    mla.dk = 576;
    mla.dv = 512;
    mla.q_head_stride = 576;
    mla.q_token_stride = 128 * 576;
    mla.kv_row_stride = 576;
    mla.values_in_keys = true;
    mla.chunk = 256;
    mla.num_tokens = 1;
    REQUIRE(kernels::attention_kernel_of(mla) == kernels::AttentionKernel::latent);
    CHECK(kernels::attention_decode_chunk(mla, 132) == 32);  // 2 head tiles x 2 slices x 32 splits = 128 blocks
    mla.num_tokens = 8;
    CHECK(kernels::attention_decode_chunk(mla, 132) == 64);  // 8 x 4 x 16 = 512 blocks (128 keys: 256)
    mla.num_tokens = 64;
    CHECK(kernels::attention_decode_chunk(mla, 132) == 256);
    kernels::AttentionArgs gqa = mla;  // Mixtral: 32 heads, 8 kv heads of 128 (split kernel, 4 heads per block)
    gqa.num_heads = 32;
    gqa.num_kv_heads = 8;
    gqa.values_in_keys = false;
    gqa.dk = gqa.dv = 128;
    gqa.q_head_stride = 128;
    gqa.q_token_stride = 32 * 128;
    gqa.kv_head_stride = 128;
    gqa.kv_row_stride = 8 * 128;
    gqa.num_tokens = 1;
    REQUIRE(kernels::attention_kernel_of(gqa) == kernels::AttentionKernel::split);
    CHECK(kernels::attention_decode_chunk(gqa, 132) == 32);  // 8 block groups x 32 splits = 256 < 264: the floor
    gqa.num_tokens = 64;
    CHECK(kernels::attention_decode_chunk(gqa, 132) == 256);
}
