// SPDX-License-Identifier: Apache-2.0
// Expert parallelism over processes on the cpu backend: permute (rows grouped by destination rank, in the dispatch
// dtype), dispatch_a2a (MPI all-to-all-v of rows and their expert ids, then the arrival layout: dequantise and
// group by held expert), the expert GEMMs of cpu_moe.cpp on the held experts, combine_a2a (each arrived row's
// expert outputs back to its token's rank) and unpermute_reduce (the weighted sum per token, shared experts,
// residual). Two dispatch modes, as EP libraries have them:
//   dedup: a token goes once to each rank that holds any of its experts, with its k (local id, weight) pairs; the
//          expert rank weights and sums its experts' outputs, so the combine also sends one row per (token, rank).
//   per-expert: one row per (token, expert) assignment, with the expert's local id; the combine returns each
//          expert's output and the token's rank weights and sums them in slot order (the single-process order).
#include "backends/cpu/cpu_backend_impl.hpp"

#include "backends/cpu/cpu_ops.hpp"
#include "comm/communicator.hpp"
#include "common/error.hpp"
#include "core/moe_core.cuh"
#include "model/phase_work.hpp"

#include <chrono>
#include <cstring>
#include <numeric>

namespace moebench::cpu {

namespace {

using clock_type = std::chrono::steady_clock;

double us_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

std::vector<int64_t> scaled(const std::vector<int64_t>& rows, int64_t bytes_per_row) {
    std::vector<int64_t> out(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) out[i] = rows[i] * bytes_per_row;
    return out;
}

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

}  // namespace

void CpuBackend::ep_setup(const Topology& topo, const RunOptions& opt) {
    MOEBENCH_CHECK(topo.comm && topo.placement, "cpu backend: expert parallelism without a communicator or placement");
    ep_.comm = topo.comm;
    ep_.rank = topo.rank;
    ep_.world = topo.world_size;
    ep_.placement = *topo.placement;
    ep_.experts = ep_.placement.experts_on_rank[static_cast<size_t>(topo.rank)];
    ep_.dedup = opt.layout.a2a == A2aMode::dedup;
    ep_.dtype = core::dispatch_wire(opt.precision.dispatch).value_or(core::DispatchDtype::fp32);
    const size_t held = ep_.experts.size();
    ep_.counts.assign(held, 0);
    ep_.offsets.assign(held + 1, 0);
    ep_.cursor.assign(held, 0);
    ep_.expert_us.assign(held, 0.0);
}

void CpuBackend::ensure_expert_rows(int64_t rows) {
    if (rows * d_.H <= xperm_.n && rows * 2 * d_.I <= gu_.n) return;
    const int64_t n = std::max<int64_t>(rows, 1);
    xperm_.alloc(n * d_.H);
    gu_.alloc(n * 2 * d_.I);
    act_.alloc(n * d_.I);
    yperm_.alloc(n * d_.H);
}

// Source side: which rows go where, in destination order, encoded in the dispatch dtype with their metadata.
void CpuBackend::ep_permute(int64_t slot) {
    if (!lw(slot).is_moe) return;
    MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const int64_t k = st.k, H = d_.H, N = ep_.world;
    const int32_t* ids = ids_.data();
    const float* wts = wts_.data();
    const bool scale_in = core::route_scales_input(static_cast<int>(m_.moe.routing));
    const ExpertPlacement& pl = ep_.placement;
    // Destination of each assignment (-1: dropped).
    std::vector<int64_t> dst(static_cast<size_t>(T_ * k), -1);
    for (int64_t a = 0; a < T_ * k; ++a)
        if (ids[a] >= 0) dst[static_cast<size_t>(a)] = pl.dest_rank(ids[a], ep_.rank, ep_.first_token + a / k);
    ep_.send_rows.assign(static_cast<size_t>(N), 0);
    // Rows in (destination, expert, token) order for per-expert, (destination, token) for dedup: a counting pass,
    // then each row's place. The sort key of a per-expert row within its destination is the expert's local id.
    struct Row {
        int64_t token;
        int64_t assignment;  // per-expert: t * k + j; dedup: -1
    };
    std::vector<std::vector<Row>> by_dst(static_cast<size_t>(N));
    if (ep_.dedup) {
        std::vector<char> seen(static_cast<size_t>(N), 0);
        for (int64_t t = 0; t < T_; ++t) {
            std::fill(seen.begin(), seen.end(), 0);
            for (int64_t j = 0; j < k; ++j) {
                const int64_t r = dst[static_cast<size_t>(t * k + j)];
                if (r >= 0) seen[static_cast<size_t>(r)] = 1;
            }
            for (int64_t r = 0; r < N; ++r)
                if (seen[static_cast<size_t>(r)]) by_dst[static_cast<size_t>(r)].push_back({t, -1});
        }
    } else {
        // Expert-major within each destination: one pass into [destination][held expert] buckets.
        std::vector<std::vector<std::vector<Row>>> buckets(static_cast<size_t>(N));
        for (int64_t r = 0; r < N; ++r)
            buckets[static_cast<size_t>(r)].resize(pl.experts_on_rank[static_cast<size_t>(r)].size());
        for (int64_t a = 0; a < T_ * k; ++a)
            if (const int64_t r = dst[static_cast<size_t>(a)]; r >= 0)
                buckets[static_cast<size_t>(r)][static_cast<size_t>(pl.local_index(r, ids[a]))].push_back({a / k, a});
        for (int64_t r = 0; r < N; ++r)
            for (const auto& rows : buckets[static_cast<size_t>(r)])
                by_dst[static_cast<size_t>(r)].insert(by_dst[static_cast<size_t>(r)].end(), rows.begin(), rows.end());
    }
    int64_t total = 0;
    for (int64_t r = 0; r < N; ++r) {
        ep_.send_rows[static_cast<size_t>(r)] = static_cast<int64_t>(by_dst[static_cast<size_t>(r)].size());
        total += ep_.send_rows[static_cast<size_t>(r)];
    }
    ep_.row_bytes = core::dispatch_row_bytes(ep_.dtype, H);
    ep_.meta_bytes = ep_.dedup ? k * 8 : 4;  // dedup: k x (int32 local id or -1, fp32 weight); per-expert: the id
    // One message per destination: each row's payload, then its metadata (one all-to-all-v, not two).
    ep_.send_payload.resize(static_cast<size_t>(total * (ep_.row_bytes + ep_.meta_bytes)));
    ep_.row_of_slot.assign(static_cast<size_t>(T_ * k), -1);
    ep_.tok_off.assign(static_cast<size_t>(T_ + 1), 0);
    std::vector<Row> rows;
    rows.reserve(static_cast<size_t>(total));
    std::vector<int64_t> row_dst;
    for (int64_t r = 0; r < N; ++r)
        for (const Row& row : by_dst[static_cast<size_t>(r)]) {
            rows.push_back(row);
            row_dst.push_back(r);
        }
    // The source's map back: per-expert by slot; dedup per token, its rows in destination order.
    if (ep_.dedup) {
        for (const Row& row : rows) ++ep_.tok_off[static_cast<size_t>(row.token + 1)];
        for (int64_t t = 0; t < T_; ++t) ep_.tok_off[static_cast<size_t>(t + 1)] += ep_.tok_off[static_cast<size_t>(t)];
        ep_.token_rows.assign(static_cast<size_t>(total), 0);
        std::vector<int64_t> fill(ep_.tok_off.begin(), ep_.tok_off.end() - 1);
        for (int64_t i = 0; i < total; ++i) {  // rows are in destination order: each token's list is too
            const int64_t t = rows[static_cast<size_t>(i)].token;
            ep_.token_rows[static_cast<size_t>(fill[static_cast<size_t>(t)]++)] = i;
        }
    } else {
        for (int64_t i = 0; i < total; ++i)
            ep_.row_of_slot[static_cast<size_t>(rows[static_cast<size_t>(i)].assignment)] = i;
    }
    const float* src = ffn_in(slot);
    uint8_t* wire = ep_.send_payload.data();
    const int64_t row_bytes = ep_.row_bytes, meta_bytes = ep_.meta_bytes, stride = row_bytes + meta_bytes;
    const bool dedup = ep_.dedup;
    pool_->parallel_for(
        total,
        [&](int64_t b, int64_t e) {
            std::vector<float> scaled_row(static_cast<size_t>(H));
            for (int64_t i = b; i < e; ++i) {
                const Row& row = rows[static_cast<size_t>(i)];
                const int64_t r = row_dst[static_cast<size_t>(i)];
                const float* xr = src + row.token * H;
                uint8_t* m = wire + i * stride + row_bytes;
                if (dedup) {
                    for (int64_t j = 0; j < k; ++j) {
                        const int64_t a = row.token * k + j;
                        const int32_t local =
                            dst[static_cast<size_t>(a)] == r ? static_cast<int32_t>(pl.local_index(r, ids[a])) : -1;
                        std::memcpy(m + 8 * j, &local, 4);
                        std::memcpy(m + 8 * j + 4, &wts[a], 4);
                    }
                } else {
                    const int32_t local = static_cast<int32_t>(pl.local_index(r, ids[row.assignment]));
                    std::memcpy(m, &local, 4);
                    if (scale_in) {  // Llama-4: the expert's input is x * score, scaled where the row is made
                        for (int64_t c = 0; c < H; ++c)
                            scaled_row[static_cast<size_t>(c)] = xr[c] * wts[row.assignment];
                        xr = scaled_row.data();
                    }
                }
                core::encode_row(ep_.dtype, xr, H, wire + i * stride);
            }
        },
        16);
}

// The exchange (the row counts, then one all-to-all-v of rows with their metadata), then the arrival layout: rows
// dequantised and laid out expert-major for the expert GEMMs.
void CpuBackend::ep_dispatch(int64_t slot) {
    if (!lw(slot).is_moe) return;
    MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const int64_t k = st.k, H = d_.H, N = ep_.world;
    RankTraffic& tr = st.result.traffic;
    const auto w0 = clock_type::now();
    ep_.comm->barrier();  // the skew apart from the transport (RankTraffic)
    tr.dispatch_wait_us = us_since(w0);
    const auto t0 = clock_type::now();
    ep_.recv_rows = ep_.comm->exchange_counts(ep_.send_rows);
    const int64_t arrived = sum(ep_.recv_rows);
    const int64_t stride = ep_.row_bytes + ep_.meta_bytes;
    ep_.recv_payload.resize(static_cast<size_t>(arrived * stride));
    ep_.comm->alltoallv(ep_.send_payload.data(), scaled(ep_.send_rows, stride), ep_.recv_payload.data(),
                        scaled(ep_.recv_rows, stride));
    tr.dispatch_exchange_us = us_since(t0);
    tr.dispatch_rows = ep_.send_rows;
    tr.dispatch_payload_bytes.assign(static_cast<size_t>(N), 0.0);
    tr.dispatch_meta_bytes.assign(static_cast<size_t>(N), 0.0);
    for (int64_t r = 0; r < N; ++r) {
        tr.dispatch_payload_bytes[static_cast<size_t>(r)] =
            static_cast<double>(ep_.send_rows[static_cast<size_t>(r)] * ep_.row_bytes);
        tr.dispatch_meta_bytes[static_cast<size_t>(r)] =
            static_cast<double>(ep_.send_rows[static_cast<size_t>(r)] * ep_.meta_bytes);
    }
    tr.rows_received = arrived;

    // Arrival: dequantise, then one (row, held expert, weight) per assignment, grouped by held expert.
    ep_.recv_x.resize(static_cast<size_t>(arrived * H));
    const uint8_t* wire = ep_.recv_payload.data();
    float* rx = ep_.recv_x.data();
    const core::DispatchDtype dtype = ep_.dtype;
    pool_->parallel_for(
        arrived,
        [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) core::decode_row(dtype, wire + i * stride, H, rx + i * H);
        },
        16);
    const size_t held = ep_.experts.size();
    const int64_t slots = ep_.dedup ? k : 1;
    const uint8_t* meta = wire + ep_.row_bytes;  // row i's metadata at meta + i * stride
    const auto local_of = [&](int64_t i, int64_t j) {
        int32_t local;
        std::memcpy(&local, meta + i * stride + 8 * j, 4);
        MOEBENCH_CHECK(local >= -1 && local < static_cast<int32_t>(held), "dispatch: expert slot {} of {} on rank {}",
                       local, held, ep_.rank);
        return local;
    };
    std::fill(ep_.counts.begin(), ep_.counts.end(), 0);
    for (int64_t i = 0; i < arrived; ++i)
        for (int64_t j = 0; j < slots; ++j)
            if (const int32_t le = local_of(i, j); le >= 0) ++ep_.counts[static_cast<size_t>(le)];
    ep_.offsets[0] = 0;
    for (size_t e = 0; e < held; ++e) ep_.offsets[e + 1] = ep_.offsets[e] + ep_.counts[e];
    const int64_t rows = ep_.offsets[held];
    ensure_expert_rows(rows);
    ep_.asg_row.resize(static_cast<size_t>(rows));
    ep_.asg_weight.resize(static_cast<size_t>(rows));
    std::copy(ep_.offsets.begin(), ep_.offsets.end() - 1, ep_.cursor.begin());
    for (int64_t i = 0; i < arrived; ++i)  // arrival order (source rank, then its order) within each expert
        for (int64_t j = 0; j < slots; ++j) {
            const int32_t le = local_of(i, j);
            if (le < 0) continue;
            const int64_t at = ep_.cursor[static_cast<size_t>(le)]++;
            ep_.asg_row[static_cast<size_t>(at)] = static_cast<int32_t>(i);
            float w = 1.0f;
            if (ep_.dedup) std::memcpy(&w, meta + i * stride + 8 * j + 4, 4);
            ep_.asg_weight[static_cast<size_t>(at)] = w;
        }
    const bool scale_in = ep_.dedup && core::route_scales_input(static_cast<int>(m_.moe.routing));
    float* xp = xperm_.data();
    pool_->parallel_for(
        rows,
        [&](int64_t b, int64_t e) {
            for (int64_t a = b; a < e; ++a) {
                const float* xr = rx + static_cast<int64_t>(ep_.asg_row[static_cast<size_t>(a)]) * H;
                float* d = xp + a * H;
                if (scale_in) {
                    const float s = ep_.asg_weight[static_cast<size_t>(a)];
                    for (int64_t c = 0; c < H; ++c) d[c] = xr[c] * s;
                } else {
                    std::memcpy(d, xr, sizeof(float) * H);
                }
            }
        },
        16);
    tr.expert_rows = rows;
    std::fill(ep_.expert_us.begin(), ep_.expert_us.end(), 0.0);
}

// Expert side: each arrived row's output (dedup: its experts' weighted sum), sent back to the token's rank.
void CpuBackend::ep_combine(int64_t slot) {
    if (!lw(slot).is_moe) return;
    MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const int64_t H = d_.H, N = ep_.world;
    const int64_t arrived = sum(ep_.recv_rows), rows = ep_.offsets.back();
    const bool weigh = ep_.dedup && !core::route_scales_input(static_cast<int>(m_.moe.routing));
    ep_.ret_send.assign(static_cast<size_t>(arrived * H), 0.0f);
    float* out = ep_.ret_send.data();
    const float* y = yperm_.data();
    // Serial over assignments: rows of one arrived row may sit under several experts (dedup), and the sum order
    // (held experts ascending) stays fixed.
    for (int64_t a = 0; a < rows; ++a) {
        float* o = out + static_cast<int64_t>(ep_.asg_row[static_cast<size_t>(a)]) * H;
        const float s = weigh ? ep_.asg_weight[static_cast<size_t>(a)] : 1.0f;
        const float* ya = y + a * H;
        for (int64_t c = 0; c < H; ++c) o[c] += s * ya[c];
    }
    // The held experts' measured GEMM times under their global ids.
    for (size_t e = 0; e < ep_.experts.size(); ++e)
        st.result.expert_gemm_us[static_cast<size_t>(ep_.experts[e])] += ep_.expert_us[e];
    const int64_t sent = sum(ep_.send_rows);
    ep_.ret_recv.resize(static_cast<size_t>(sent * H));
    RankTraffic& tr = st.result.traffic;
    const auto w0 = clock_type::now();
    ep_.comm->barrier();
    tr.combine_wait_us = us_since(w0);
    const auto t0 = clock_type::now();
    const int64_t act_row_bytes = static_cast<int64_t>(sizeof(float)) * H;  // combine in the activation dtype
    ep_.comm->alltoallv(ep_.ret_send.data(), scaled(ep_.recv_rows, act_row_bytes), ep_.ret_recv.data(),
                        scaled(ep_.send_rows, act_row_bytes));
    tr.combine_exchange_us = us_since(t0);
    tr.combine_payload_bytes.assign(static_cast<size_t>(N), 0.0);
    for (int64_t r = 0; r < N; ++r)
        tr.combine_payload_bytes[static_cast<size_t>(r)] =
            static_cast<double>(ep_.recv_rows[static_cast<size_t>(r)] * act_row_bytes);
}

// Token side: shared experts + the returned rows (per-expert: weighted in slot order, as one process sums them;
// dedup: each expert rank's partial sum, in destination order), then the residual.
void CpuBackend::ep_unpermute(int64_t slot) {
    if (!lw(slot).is_moe) return;
    if (!ep_.dedup) {
        sum_slots(slot, ep_.row_of_slot.data(), ep_.ret_recv.data());
        return;
    }
    const int64_t H = d_.H;
    const float *ret = ep_.ret_recv.data(), *so = d_.shared_I > 0 ? sout_.data() : nullptr;
    float* out = moe_[static_cast<size_t>(slot)].moe_out.data();
    pool_->parallel_for(
        T_,
        [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) {
                float* o = out + t * H;
                if (so)
                    std::memcpy(o, so + t * H, sizeof(float) * H);
                else
                    std::memset(o, 0, sizeof(float) * H);
                for (int64_t i = ep_.tok_off[static_cast<size_t>(t)]; i < ep_.tok_off[static_cast<size_t>(t + 1)];
                     ++i) {
                    const float* r = ret + ep_.token_rows[static_cast<size_t>(i)] * H;
                    for (int64_t c = 0; c < H; ++c) o[c] += r[c];
                }
            }
        },
        4);
    add_block_output(slot);
}

}  // namespace moebench::cpu
