// SPDX-License-Identifier: Apache-2.0
// The CPU backend's GEMMs: OpenBLAS sgemm, the small-row (skinny) kernel, the column-panel layout and its kernel,
// and the batch of per-expert products.
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/cpu_simd.hpp"

#include <cblas.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace moebench::cpu {

using namespace simd;  // NOLINT: the 16-lane helpers (cpu_simd.hpp)

void gemm_xwt(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y, float beta, int64_t ldx,
              int64_t ldw, int64_t ldy) {
    if (m <= 0 || n <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                1.0f, x, static_cast<int>(ldx ? ldx : k), w, static_cast<int>(ldw ? ldw : k), beta, y,
                static_cast<int>(ldy ? ldy : n));
}

namespace {

// Software prefetch distance on the weight streams (2 KiB ahead per row).
constexpr int64_t kPrefetchFloats = 512;

// RI rows of X against RJ rows of W: RI * RJ vector accumulators, every W vector loaded once and used RI times.
// The k tail (k % 16) is summed in scalar.
template <int RI, int RJ>
inline __attribute__((always_inline)) void tile(int64_t h, int64_t k, const float* x, int64_t ldx, const float* w,
                                                int64_t ldw, float* y, int64_t ldy, float beta) {
    v16f acc[RI][RJ];
    for (int i = 0; i < RI; ++i)
        for (int j = 0; j < RJ; ++j) acc[i][j] = v16f{};
    const int64_t kv = h + ((k - h) & ~int64_t(15));
    for (int64_t c = h; c < kv; c += 16) {
        v16f wv[RJ];
        for (int j = 0; j < RJ; ++j) {
            __builtin_prefetch(w + j * ldw + c + kPrefetchFloats, 0, 3);  // hide DRAM latency behind the FMAs
            wv[j] = load16(w + j * ldw + c);
        }
        for (int i = 0; i < RI; ++i) {
            const v16f xv = load16(x + i * ldx + c);
            for (int j = 0; j < RJ; ++j) acc[i][j] += xv * wv[j];
        }
    }
    for (int i = 0; i < RI; ++i)
        for (int j = 0; j < RJ; ++j) {
            float s = hsum16(acc[i][j]);
            for (int64_t c = 0; c < h; ++c) s += x[i * ldx + c] * w[j * ldw + c];
            for (int64_t c = kv; c < k; ++c) s += x[i * ldx + c] * w[j * ldw + c];
            float* yo = y + i * ldy + j;
            *yo = beta == 0.0f ? s : s + beta * *yo;
        }
}

template <int RJ>
inline __attribute__((always_inline)) void tile_rows(int64_t m, int64_t h, int64_t k, const float* x, int64_t ldx,
                                                     const float* w, int64_t ldw, float* y, int64_t ldy, float beta) {
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) tile<4, RJ>(h, k, x + i * ldx, ldx, w, ldw, y + i * ldy, ldy, beta);
    switch (m - i) {
        case 3: tile<3, RJ>(h, k, x + i * ldx, ldx, w, ldw, y + i * ldy, ldy, beta); break;
        case 2: tile<2, RJ>(h, k, x + i * ldx, ldx, w, ldw, y + i * ldy, ldy, beta); break;
        case 1: tile<1, RJ>(h, k, x + i * ldx, ldx, w, ldw, y + i * ldy, ldy, beta); break;
        default: break;
    }
}

// X rows per register tile of the chunked skinny path (RI x 4 vector sums, RI <= kGroupRows).
constexpr int64_t kGroupRows = 6;

// RI X rows against 4 W rows over k in [c0, c1): the sums start from and return to part[0..RI). Group gi of
// `groups` issues the L2 prefetches of W rows gi, gi + groups, ... (pf[r] + c, see skinny_rows).
template <int RI>
inline __attribute__((always_inline)) void group_chunk(const float* xi, int64_t ldx, const float* wj, int64_t ldw,
                                                       int64_t c0, int64_t c1, const float* const* pf, int64_t gi,
                                                       int64_t groups, v16f (*part)[4]) {
    v16f acc[RI][4];
    for (int a = 0; a < RI; ++a)
        for (int r = 0; r < 4; ++r) acc[a][r] = part[a][r];
    for (int64_t c = c0; c < c1; c += 16) {
        for (int64_t r = gi; r < 4; r += groups) __builtin_prefetch(pf[r] + c, 0, 2);
        const v16f w0 = load16(wj + c), w1 = load16(wj + ldw + c), w2 = load16(wj + 2 * ldw + c),
                   w3 = load16(wj + 3 * ldw + c);
        for (int a = 0; a < RI; ++a) {
            const v16f xv = load16(xi + a * ldx + c);
            acc[a][0] += xv * w0;
            acc[a][1] += xv * w1;
            acc[a][2] += xv * w2;
            acc[a][3] += xv * w3;
        }
    }
    for (int a = 0; a < RI; ++a)
        for (int r = 0; r < 4; ++r) part[a][r] = acc[a][r];
}

// Which X a thread's aligned copy holds: a product of one gemm call (call_id > 0; 0 = do not reuse).
struct XCopyKey {
    uint64_t call_id = 0;
    const float* x = nullptr;
    int64_t ldx = 0, m = 0, k = 0, mis = -1;
    bool operator==(const XCopyKey&) const = default;
};
std::atomic<uint64_t> g_gemm_calls{0};

// Rows [jb, je) of W against all m rows of X, 4 W rows at a time: the 4 rows stream from memory once. With more
// than 4 X rows, k is cut into chunks so that the W chunk and the X chunk stay in L1 while every group of up to
// kGroupRows X rows uses them; the vector partial sums wait in `part` between chunks. Cloned per ISA and picked at
// load time (the build targets baseline x86-64). One function on purpose (~90 lines): the chunk loop, its tile
// dispatch and the tails share registers and prefetch distances that a split across calls would not keep.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void skinny_rows(int64_t m, int64_t jb, int64_t je, int64_t k, const float* x, int64_t ldx, const float* w,
                 int64_t ldw, float* y, int64_t ldy, float beta, uint64_t call_id) {
    if (m > kSkinnyRows) {  // callers outside gemm_auto may pass more rows: take them kSkinnyRows at a time
        for (int64_t i = 0; i < m; i += kSkinnyRows)
            skinny_rows(std::min(kSkinnyRows, m - i), jb, je, k, x + i * ldx, ldx, w, ldw, y + i * ldy, ldy, beta, 0);
        return;
    }
    // Alignment: a 64-byte load that straddles two cache lines costs two. When every W row has the same alignment,
    // the first h columns are summed in scalar so that the vector loads of W are aligned, and X is copied to a
    // buffer with W's alignment, so its loads are aligned too. (Weights come from new float[], 16-byte aligned.)
    int64_t h = 0;
    if ((ldw * 4) % 64 == 0 && (reinterpret_cast<uintptr_t>(w) & 3) == 0) {
        const int64_t mis = static_cast<int64_t>((reinterpret_cast<uintptr_t>(w + jb * ldw) & 63) / 4);
        h = (16 - mis) & 15;
        if (k < h + 16) h = 0;
        thread_local std::vector<float> xbuf;
        thread_local XCopyKey xkey;
        const int64_t ldp = (k + 15) / 16 * 16 + 16;
        if (static_cast<int64_t>(xbuf.size()) < m * ldp + 32) {
            xbuf.resize(static_cast<size_t>(m * ldp + 32));
            xkey = XCopyKey{};
        }
        float* xb = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(xbuf.data()) + 63) & ~uintptr_t(63)) + mis;
        const XCopyKey key{call_id, x, ldx, m, k, mis};
        if (call_id == 0 || !(key == xkey)) {  // the next block of the same product on this thread reuses the copy
            for (int64_t i = 0; i < m; ++i)
                for (int64_t c = 0; c < k; ++c) xb[i * ldp + c] = x[i * ldx + c];
            xkey = key;
        }
        x = xb;
        ldx = ldp;
    }
    if (m <= 4) {
        int64_t j = jb;
        for (; j + 4 <= je; j += 4) tile_rows<4>(m, h, k, x, ldx, w + j * ldw, ldw, y + j, ldy, beta);
        for (; j < je; ++j) tile_rows<1>(m, h, k, x, ldx, w + j * ldw, ldw, y + j, ldy, beta);
        return;
    }
    // X chunk (m rows x kc floats) + W chunk (4 x kc) within ~32 KiB of L1.
    const int64_t kc = std::clamp<int64_t>(((int64_t(8192) / (m + 4)) & ~int64_t(15)), 64, 1024);
    const int64_t kv = h + ((k - h) & ~int64_t(15));
    v16f part[kSkinnyRows][4];
    const int64_t groups = (m + kGroupRows - 1) / kGroupRows;
    int64_t j = jb;
    for (; j + 4 <= je; j += 4) {
        const float* wj = w + j * ldw;
        for (int64_t i = 0; i < m; ++i)
            for (int r = 0; r < 4; ++r) part[i][r] = v16f{};
        for (int64_t c0 = h; c0 < kv; c0 += kc) {
            const int64_t c1 = std::min(kv, c0 + kc);
            // Software prefetch of the NEXT W chunk (the same 4 rows further on, or the next 4 rows' first chunk)
            // into L2 while this one is computed from L1, so that the DRAM stream overlaps the FMAs instead of
            // adding to them (measured on the 2-core Xeon at 8-16 rows: -10 to -15% per expert GEMM; prefetching
            // into L1 or two chunks ahead was no better). The 4 rows' lines are spread over the row groups so the
            // requests do not come in one burst. pf[r] + c is the line of the next chunk at offset c - c0 of this
            // one; after the block's last chunk it re-touches the current chunk (already cached, harmless).
            const float* pf[4];
            for (int r = 0; r < 4; ++r) {
                if (c1 < kv)
                    pf[r] = wj + r * ldw + kc;
                else if (j + 8 <= je)
                    pf[r] = wj + (4 + r) * ldw + h - c0;
                else
                    pf[r] = wj + r * ldw;
            }
            // X rows in groups of up to 6 (balanced: 16 rows -> 6+5+5, 8 -> 4+4): a 6 x 4 tile keeps 24 sums in
            // registers and needs 10 loads per 24 FMAs instead of 8 per 16.
            for (int64_t gi = 0, i = 0; gi < groups; ++gi) {
                const int64_t ri = (m - i + (groups - gi) - 1) / (groups - gi);
                const float* xi = x + i * ldx;
                switch (ri) {
                    case 6: group_chunk<6>(xi, ldx, wj, ldw, c0, c1, pf, gi, groups, part + i); break;
                    case 5: group_chunk<5>(xi, ldx, wj, ldw, c0, c1, pf, gi, groups, part + i); break;
                    case 4: group_chunk<4>(xi, ldx, wj, ldw, c0, c1, pf, gi, groups, part + i); break;
                    case 3: group_chunk<3>(xi, ldx, wj, ldw, c0, c1, pf, gi, groups, part + i); break;
                    case 2: group_chunk<2>(xi, ldx, wj, ldw, c0, c1, pf, gi, groups, part + i); break;
                    default: group_chunk<1>(xi, ldx, wj, ldw, c0, c1, pf, gi, groups, part + i); break;
                }
                i += ri;
            }
        }
        for (int64_t i = 0; i < m; ++i) {
            float sums[4];
            hsum16x4(part[i][0], part[i][1], part[i][2], part[i][3], sums);
            for (int r = 0; r < 4; ++r) {
                float s = sums[r];
                for (int64_t c = 0; c < h; ++c) s += x[i * ldx + c] * wj[r * ldw + c];
                for (int64_t c = kv; c < k; ++c) s += x[i * ldx + c] * wj[r * ldw + c];
                float* yo = y + i * ldy + j + r;
                *yo = beta == 0.0f ? s : s + beta * *yo;
            }
        }
    }
    for (; j < je; ++j) tile_rows<1>(m, h, k, x, ldx, w + j * ldw, ldw, y + j, ldy, beta);
}

// W rows per work item of the skinny path: a multiple of 4, big enough to amortise scheduling, small enough to
// balance the threads (64 rows x 2048 floats = 512 KiB of weights).
int64_t skinny_block_rows(int64_t k) {
    const int64_t target_floats = int64_t(1) << 17;
    return std::clamp<int64_t>((target_floats / std::max<int64_t>(1, k)) & ~int64_t(3), 16, 256);
}

// ---- Weights in column panels (see pack_panels): the small-row expert kernel ----

// Prefetch distances on a panel stream (contiguous): from memory 4 KiB ahead, and into L1 512 bytes ahead (the
// second took Mixtral-8x7B decode batch 64 from ~1.38x to ~1.31x of its floor in back-to-back runs).
constexpr int64_t kPanelPrefetchFloats = 1024;
constexpr int64_t kPanelPrefetchL1Floats = 128;
// How a panel stream is prefetched from memory. A line that one register group uses once is fetched
// non-temporally (kOnce): on AMD's victim L3 this spares the write of every streamed line into L3 on its way out of
// L2 (2-vCPU EPYC guest, 2 x OLMoE-sized weights per thread at 1-8 rows: 0.72-0.90 -> 0.89-1.07 of a plain
// streaming read in alternating runs). A line that later row groups re-read goes to L2 (kShared), and those later
// groups prefetch nothing (kNone).
enum class PanelPrefetch { kNone, kShared, kOnce };
// X rows per register group: 24 sums (one zmm each) of the 32 zmm registers. Up to 24 rows, each panel streams
// from memory in ONE pass with the prefetch running ahead; a second group re-reads the panel from L2 while
// memory idles (measured with 32-column panels and 12-row groups, 2 x Mixtral gate-up [28672, 4096]: 12 rows as
// one group 34.6 ms, 16 rows as 8 + 8 43 ms, pure streaming ~30 ms).
constexpr int64_t kPanelGroupRows = 24;
// Panels per work item of the shared pass (8 x 16 outputs).
constexpr int64_t kPanelsPerItem = 8;
// k per chunk when X has several register groups: the chunk of a 24-row group's transposed X takes 24 KiB of L1
// and is used by all the panels of a work item; each panel's chunk (16 KiB) is read from memory once, and from L2
// by the later row groups.
constexpr int64_t kPanelChunk = 256;

#if defined(__x86_64__) && defined(__GNUC__)
#define MOEBENCH_PANEL_AVX512 1
#define MOEBENCH_AVX512 __attribute__((target("avx512f")))

// The prefetches of one k step of a panel stream whose current row is wr.
template <PanelPrefetch Hint>
MOEBENCH_AVX512 inline __attribute__((always_inline)) void prefetch_panel_row(const float* wr) {
    if constexpr (Hint == PanelPrefetch::kOnce)
        _mm_prefetch(reinterpret_cast<const char*>(wr + kPanelPrefetchFloats), _MM_HINT_NTA);
    else if constexpr (Hint == PanelPrefetch::kShared)
        _mm_prefetch(reinterpret_cast<const char*>(wr + kPanelPrefetchFloats), _MM_HINT_T1);
    if constexpr (Hint != PanelPrefetch::kNone)
        _mm_prefetch(reinterpret_cast<const char*>(wr + kPanelPrefetchL1Floats), _MM_HINT_T0);
}

// RI rows of X against NP adjacent full panels (kPanelCols = 16 = one zmm of W columns each) over k in [c0, c1):
// the outer product of each X element (broadcast, folded into the FMA) with each panel's row of 16 weights. xt
// holds the group's X transposed, [k][RI], so that one pointer serves all rows (RI row pointers would spill). Panel
// q starts panel_floats after panel q - 1; its sums start from and return to part + q * part_floats, [RI][16].
// Prefetch per step and panel: one line from memory and one into L1, as Hint says (see above). Intrinsics, not GCC
// vector extensions: GCC turned a vector-extension broadcast into masked lane inserts.
// NP > 1 (NP * RI sums + NP weight vectors in the 32 registers) gives NP independent weight streams per k step,
// so a late line of one stream stalls only its share of the FMAs, and more streams are in flight; used when all m
// rows fit one such group. Measured on the 2-core Xeon of results/, 2 x Mixtral gate-up [28672, 4096], two panels
// against one: 8 rows 36.8 -> 33.4 ms, 15 rows 38.0 -> 37.1 ms; splitting 16-21 rows into paired groups of <= 15
// was slower than one 24-row single-panel group (16 rows 40 -> 43-53 ms). Four panels against two at 1-6 rows, on
// the 2-vCPU EPYC guest in alternating `bench moe` runs: OLMoE decode 1 -4 to -13% per block, decode 8 -3 to -8%.
template <int RI, int NP, PanelPrefetch Hint>
MOEBENCH_AVX512 void panel_group_n(int64_t c0, int64_t c1, const float* xt, const float* wp, int64_t panel_floats,
                                   float* part, int64_t part_floats) {
    static_assert(kPanelCols == 16, "one 16-lane vector per panel row");
    // Full unrolling keeps acc[][] in registers (GCC peels at most 16 iterations by itself).
    __m512 acc[NP][RI];
#pragma GCC unroll 32
    for (int q = 0; q < NP; ++q)
#pragma GCC unroll 32
        for (int i = 0; i < RI; ++i) acc[q][i] = _mm512_loadu_ps(part + q * part_floats + i * 16);
    for (int64_t c = c0; c < c1; ++c) {
        __m512 w[NP];
#pragma GCC unroll 32
        for (int q = 0; q < NP; ++q) {
            const float* wr = wp + q * panel_floats + c * 16;
            prefetch_panel_row<Hint>(wr);
            w[q] = _mm512_loadu_ps(wr);
        }
        const float* xc = xt + c * RI;
#pragma GCC unroll 32
        for (int i = 0; i < RI; ++i) {
            const __m512 xb = _mm512_set1_ps(xc[i]);
#pragma GCC unroll 32
            for (int q = 0; q < NP; ++q) acc[q][i] = _mm512_fmadd_ps(xb, w[q], acc[q][i]);
        }
    }
#pragma GCC unroll 32
    for (int q = 0; q < NP; ++q)
#pragma GCC unroll 32
        for (int i = 0; i < RI; ++i) _mm512_storeu_ps(part + q * part_floats + i * 16, acc[q][i]);
}
using PanelGroupFn = void (*)(int64_t, int64_t, const float*, const float*, int64_t, float*, int64_t);
template <int NP, PanelPrefetch Hint, int... Is>
constexpr std::array<PanelGroupFn, sizeof...(Is)> panel_group_table(std::integer_sequence<int, Is...>) {
    return {&panel_group_n<Is + 1, NP, Hint>...};
}
// Rows that fit a group of four panels (4 x 6 sums) and of two (2 x 15); tables by [rows - 1].
constexpr int64_t kPanelQuadRows = 6;
constexpr int64_t kPanelPairRows = 15;
const std::array<PanelGroupFn, kPanelQuadRows> kPanelQuad =
    panel_group_table<4, PanelPrefetch::kOnce>(std::make_integer_sequence<int, kPanelQuadRows>{});
const std::array<PanelGroupFn, kPanelPairRows> kPanelPair =
    panel_group_table<2, PanelPrefetch::kOnce>(std::make_integer_sequence<int, kPanelPairRows>{});
// One panel, any register group: [PanelPrefetch][rows - 1].
const std::array<PanelGroupFn, kPanelGroupRows> kPanelGroup[3] = {
    panel_group_table<1, PanelPrefetch::kNone>(std::make_integer_sequence<int, kPanelGroupRows>{}),
    panel_group_table<1, PanelPrefetch::kShared>(std::make_integer_sequence<int, kPanelGroupRows>{}),
    panel_group_table<1, PanelPrefetch::kOnce>(std::make_integer_sequence<int, kPanelGroupRows>{})};

bool have_avx512() {
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
}
#endif

// Panel columns [0, nr) of rows [0, m) without AVX-512 (or for the narrower last panel): per X row, the sums of
// the nr columns in a local array, k-outer so that the inner loop runs along the panel's contiguous row.
void panel_plain(int64_t m, int64_t nr, int64_t k, const float* x, int64_t ldx, const float* w, float* part) {
    for (int64_t i = 0; i < m; ++i) {
        float s[kPanelCols] = {};
        for (int64_t c = 0; c < k; ++c) {
            const float xv = x[i * ldx + c];
            for (int64_t j = 0; j < nr; ++j) s[j] += xv * w[c * nr + j];
        }
        std::memcpy(part + i * kPanelCols, s, sizeof(float) * static_cast<size_t>(nr));
    }
}

// Row groups of m rows: as few as kPanelGroupRows allows, balanced (30 rows -> 15 + 15).
int64_t panel_groups(int64_t m) { return (m + kPanelGroupRows - 1) / kPanelGroupRows; }
int64_t panel_group_first_row(int64_t m, int64_t g) {
    const int64_t groups = panel_groups(m);
    return g * (m / groups) + std::min(g, m % groups);
}

// X rows [0, m) as the panel kernel reads them: row group g (rows [i0, i1)) transposed to [k][i1 - i0] at
// out + i0 * k.
void transpose_groups(int64_t m, int64_t k, const float* x, int64_t ldx, float* out) {
    const int64_t groups = panel_groups(m);
    for (int64_t g = 0; g < groups; ++g) {
        const int64_t i0 = panel_group_first_row(m, g), i1 = panel_group_first_row(m, g + 1), ri = i1 - i0;
        float* t = out + i0 * k;
        for (int64_t c0 = 0; c0 < k; c0 += 256)  // 256-column blocks: the written lines stay in L1
            for (int64_t i = i0; i < i1; ++i)
                for (int64_t c = c0; c < std::min(k, c0 + 256); ++c) t[c * ri + (i - i0)] = x[i * ldx + c];
    }
}

// Panels [pb, pe) of one [n, k] weight in panel layout (wp = its first element) against all m rows of X; xt is X
// after transpose_groups (used with AVX-512; the plain path reads x). With several row groups k runs in chunks
// over all the panels of the item, so that a panel's chunk streams from memory once and the later groups find it
// in L2; with one group each panel streams whole.
void panel_rows(int64_t m, int64_t pb, int64_t pe, int64_t n, int64_t k, const float* x, int64_t ldx, const float* xt,
                const float* wp, float* y, int64_t ldy, float beta) {
    const int64_t per_panel = m * kPanelCols;
    thread_local std::vector<float> part;  // [pe - pb][m][kPanelCols] sums
    if (static_cast<int64_t>(part.size()) < (pe - pb) * per_panel)
        part.resize(static_cast<size_t>((pe - pb) * per_panel));
    const auto width = [&](int64_t p) { return std::min(kPanelCols, n - p * kPanelCols); };
    bool vec = false;
#ifdef MOEBENCH_PANEL_AVX512
    vec = have_avx512();
    if (vec) {
        const int64_t groups = panel_groups(m);
        std::fill(part.begin(), part.begin() + (pe - pb) * per_panel, 0.0f);
        // One register group (m <= 24): no later group re-reads a chunk from L2, so k runs whole and each panel
        // streams as one run (a new run every 16 KiB cost the hardware prefetchers their ramp: on the AMD guest
        // 2 x Mixtral gate-up streamed 54-58 against 46-49 GB/s at 8-12 rows, 39 against 32 at 16).
        const int64_t chunk = groups == 1 ? k : kPanelChunk;
        for (int64_t c0 = 0; c0 < k; c0 += chunk) {
            const int64_t c1 = std::min(k, c0 + chunk);
            for (int64_t p = pb; p < pe; ++p) {
                if (width(p) < kPanelCols) continue;
                const float* w = wp + p * kPanelCols * k;  // panel p: [k][16]
                float* pp = part.data() + (p - pb) * per_panel;
                // Several panels at once when all rows fit one such group (see panel_group_n).
                const auto full = [&](int64_t np) { return p + np <= pe && width(p + np - 1) == kPanelCols; };
                if (m <= kPanelQuadRows && full(4)) {
                    kPanelQuad[static_cast<size_t>(m - 1)](c0, c1, xt, w, kPanelCols * k, pp, per_panel);
                    p += 3;
                    continue;
                }
                if (m <= kPanelPairRows && full(2)) {
                    kPanelPair[static_cast<size_t>(m - 1)](c0, c1, xt, w, kPanelCols * k, pp, per_panel);
                    ++p;
                    continue;
                }
                for (int64_t g = 0; g < groups; ++g) {
                    const int64_t i0 = panel_group_first_row(m, g), ri = panel_group_first_row(m, g + 1) - i0;
                    const PanelPrefetch hint = groups == 1 ? PanelPrefetch::kOnce
                                               : g == 0    ? PanelPrefetch::kShared
                                                           : PanelPrefetch::kNone;
                    kPanelGroup[static_cast<size_t>(hint)][static_cast<size_t>(ri - 1)](
                        c0, c1, xt + i0 * k, w, kPanelCols * k, pp + i0 * kPanelCols, per_panel);
                }
            }
        }
    }
#endif
    for (int64_t p = pb; p < pe; ++p) {
        const int64_t j0 = p * kPanelCols, nr = width(p);
        float* pp = part.data() + (p - pb) * per_panel;
        if (!vec || nr < kPanelCols) panel_plain(m, nr, k, x, ldx, wp + j0 * k, pp);
        for (int64_t i = 0; i < m; ++i) {
            float* yo = y + i * ldy + j0;
            const float* pi = pp + i * kPanelCols;
            if (beta == 0.0f)
                std::memcpy(yo, pi, sizeof(float) * static_cast<size_t>(nr));
            else
                for (int64_t j = 0; j < nr; ++j) yo[j] = pi[j] + beta * yo[j];
        }
    }
}

}  // namespace

void pack_panels(ThreadPool& pool, const float* w, int64_t n, int64_t k, float* out) {
    const int64_t panels = (n + kPanelCols - 1) / kPanelCols;
    // Panel p takes the same floats [16p k, (16p + nr) k) as its rows did, so each panel is copied out first and
    // the transform works in place (out == w) without a copy of the whole matrix.
    pool.parallel_for(panels, [&](int64_t pb, int64_t pe) {
        std::vector<float> rows(static_cast<size_t>(kPanelCols * k));
        for (int64_t p = pb; p < pe; ++p) {
            const int64_t j0 = p * kPanelCols, nr = std::min(kPanelCols, n - j0);
            std::memcpy(rows.data(), w + j0 * k, sizeof(float) * static_cast<size_t>(nr * k));
            float* o = out + j0 * k;
            for (int64_t c0 = 0; c0 < k; c0 += 64)  // 64-column blocks: the nr source rows stay in L1
                for (int64_t j = 0; j < nr; ++j)
                    for (int64_t c = c0; c < std::min(k, c0 + 64); ++c) o[c * nr + j] = rows[j * k + c];
        }
    });
}

void unpack_panels(ThreadPool& pool, const float* wp, int64_t n, int64_t k, float* out) {
    const int64_t panels = (n + kPanelCols - 1) / kPanelCols;
    pool.parallel_for(panels, [&](int64_t pb, int64_t pe) {
        for (int64_t p = pb; p < pe; ++p) {
            const int64_t j0 = p * kPanelCols, nr = std::min(kPanelCols, n - j0);
            const float* src = wp + j0 * k;
            for (int64_t c0 = 0; c0 < k; c0 += 64)
                for (int64_t j = 0; j < nr; ++j)
                    for (int64_t c = c0; c < std::min(k, c0 + 64); ++c) out[(j0 + j) * k + c] = src[c * nr + j];
        }
    });
}

void gemm_w(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* x, const float* w, bool w_panels, float* y,
            float beta) {
    if (!w_panels) {
        gemm_auto(pool, m, n, k, x, w, y, beta);
        return;
    }
    const XwtProblem q{.m = m, .n = n, .k = k, .x = x, .w = w, .y = y, .w_panels = true};
    gemm_xwt_many(pool, &q, 1, beta);
}

void gemm_xwt_skinny(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y,
                     float beta, int64_t ldx, int64_t ldw, int64_t ldy) {
    if (m <= 0 || n <= 0) return;
    if (!ldx) ldx = k;
    if (!ldw) ldw = k;
    if (!ldy) ldy = n;
    const int64_t rows = skinny_block_rows(k);
    const uint64_t call_id = ++g_gemm_calls;
    const int64_t blocks = (n + rows - 1) / rows;
    pool.parallel_for(
        blocks,
        [&](int64_t bb, int64_t be) {
            skinny_rows(m, bb * rows, std::min(n, be * rows), k, x, ldx, w, ldw, y, ldy, beta, call_id);
        },
        1);
}

void gemm_auto(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y, float beta,
               int64_t ldx, int64_t ldw, int64_t ldy) {
    if (m <= kSkinnyRows)
        gemm_xwt_skinny(pool, m, n, k, x, w, y, beta, ldx, ldw, ldy);
    else
        gemm_xwt(m, n, k, x, w, y, beta, ldx, ldw, ldy);
}

// Long (~110 lines) on purpose: the work list, the one pool pass over it and the per-product timing share one set of
// scratch and counters; the CPU kernels are at their measured floor and are not reshaped (docs/cpu-backend.md).
void gemm_xwt_many(ThreadPool& pool, const XwtProblem* probs, int64_t num_probs, float beta, double* times_us) {
    using Clock = std::chrono::steady_clock;
    if (times_us)
        for (int64_t p = 0; p < num_probs; ++p) times_us[p] = 0.0;
    // 1. Large products: OpenBLAS, one after another (it threads each one).
    for (int64_t p = 0; p < num_probs; ++p) {
        const XwtProblem& q = probs[p];
        if (q.w_panels || q.m <= kSkinnyRows || q.n <= 0) continue;
        const auto t0 = Clock::now();
        gemm_xwt(q.m, q.n, q.k, q.x, q.w, q.y, beta, q.ldx, q.ldw, q.ldy);
        if (times_us) times_us[p] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    }
    // 2. Small products: every (problem, row block) pair is one work item of a single parallel pass, so products
    //    too small to split well still keep every thread streaming weights.
    const uint64_t call_id = ++g_gemm_calls;
    std::vector<std::pair<int32_t, int64_t>> items;  // (problem, first W row or first panel)
    for (int64_t p = 0; p < num_probs; ++p) {
        const XwtProblem& q = probs[p];
        if (q.m <= 0 || q.n <= 0) continue;
        if (q.w_panels) {
            const int64_t panels = (q.n + kPanelCols - 1) / kPanelCols, per = kPanelsPerItem;
            for (int64_t b = 0; b < panels; b += per) items.emplace_back(static_cast<int32_t>(p), b);
            continue;
        }
        if (q.m > kSkinnyRows) continue;
        const int64_t rows = skinny_block_rows(q.k);
        for (int64_t j = 0; j < q.n; j += rows) items.emplace_back(static_cast<int32_t>(p), j);
    }
    if (items.empty()) return;
    std::vector<double> busy_us(times_us ? static_cast<size_t>(num_probs) : 0, 0.0);
    std::mutex mu;
    // X of the panel products, transposed once (not once per thread) for the AVX-512 panel kernel. The buffer
    // belongs to the calling thread; the workers use it through xt_base (their own thread_local would be empty).
    thread_local std::vector<float> xt_all;
    float* xt_base = nullptr;
    std::vector<int64_t> xt_off(static_cast<size_t>(num_probs), 0);
#ifdef MOEBENCH_PANEL_AVX512
    if (have_avx512()) {
        std::vector<int32_t> panel_probs;
        int64_t xt_floats = 0;
        for (int64_t p = 0; p < num_probs; ++p)
            if (probs[p].w_panels && probs[p].m > 0 && probs[p].n > 0) {
                xt_off[static_cast<size_t>(p)] = xt_floats;
                xt_floats += probs[p].m * probs[p].k;
                panel_probs.push_back(static_cast<int32_t>(p));
            }
        if (static_cast<int64_t>(xt_all.size()) < xt_floats) xt_all.resize(static_cast<size_t>(xt_floats));
        xt_base = xt_all.data();
        pool.parallel_for(
            static_cast<int64_t>(panel_probs.size()),
            [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) {
                    const int32_t p = panel_probs[static_cast<size_t>(i)];
                    const XwtProblem& q = probs[p];
                    const auto t0 = times_us ? Clock::now() : Clock::time_point{};
                    transpose_groups(q.m, q.k, q.x, q.ldx ? q.ldx : q.k, xt_base + xt_off[static_cast<size_t>(p)]);
                    if (times_us) {
                        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
                        std::lock_guard<std::mutex> lk(mu);
                        busy_us[static_cast<size_t>(p)] += us;
                    }
                }
            },
            1);
    }
#endif
    // Items in falling order of rows, claimed one at a time from both ends: even slots take the front (the most
    // rows: compute-heavy), odd slots the back (the fewest: memory-heavy), so that at decode, where experts get
    // uneven rows, compute-bound and memory-bound items run side by side instead of both threads waiting on memory
    // and then both on the FMAs (2-vCPU EPYC guest, OLMoE decode 64 in alternating runs: -2 to -7% per block in 4 of
    // 5 rounds; no change at decode 1, where all rows are equal and the order stays as built).
    std::stable_sort(items.begin(), items.end(),
                     [&](const auto& a, const auto& b) { return probs[a.first].m > probs[b.first].m; });
    int64_t front = 0, back = static_cast<int64_t>(items.size());
    const auto run_item = [&](int64_t it) {
        const auto [p, j] = items[static_cast<size_t>(it)];
        const XwtProblem& q = probs[p];
        const int64_t ldx = q.ldx ? q.ldx : q.k, ldw = q.ldw ? q.ldw : q.k, ldy = q.ldy ? q.ldy : q.n;
        const auto t0 = times_us ? Clock::now() : Clock::time_point{};
        if (q.w_panels) {
            const int64_t pe = std::min((q.n + kPanelCols - 1) / kPanelCols, j + kPanelsPerItem);
            panel_rows(q.m, j, pe, q.n, q.k, q.x, ldx, xt_base + xt_off[static_cast<size_t>(p)], q.w, q.y, ldy, beta);
        } else {
            skinny_rows(q.m, j, std::min(q.n, j + skinny_block_rows(q.k)), q.k, q.x, ldx, q.w, ldw, q.y, ldy, beta,
                        call_id);
        }
        if (times_us) {
            const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
            std::lock_guard<std::mutex> lk(mu);
            busy_us[static_cast<size_t>(p)] += us;
        }
    };
    const int64_t slots = std::min<int64_t>(pool.size(), static_cast<int64_t>(items.size()));
    pool.parallel_for(
        slots,
        [&](int64_t sb, int64_t se) {
            for (int64_t slot = sb; slot < se; ++slot)
                for (;;) {
                    int64_t it;
                    {
                        std::lock_guard<std::mutex> lk(mu);
                        if (front >= back) break;
                        it = slot % 2 == 0 ? front++ : --back;
                    }
                    run_item(it);
                }
        },
        1, 1);
    // Busy time of a product's blocks over all threads, divided by the threads: its share of the pass.
    if (times_us)
        for (int64_t p = 0; p < num_probs; ++p)
            times_us[p] += busy_us[static_cast<size_t>(p)] / static_cast<double>(pool.size());
}

}  // namespace moebench::cpu
