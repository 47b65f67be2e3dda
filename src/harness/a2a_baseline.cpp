// SPDX-License-Identifier: Apache-2.0
#include "harness/a2a_baseline.hpp"

#include "comm/communicator.hpp"
#include "common/error.hpp"
#include "metrics/ceilings.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace moebench {

namespace {

// Row `r` (what r sends) and column `r` (what r receives) of a [src][dst] matrix, per layer, in whole bytes.
std::vector<int64_t> row_of(const json& m, int64_t r, int64_t layers) {
    std::vector<int64_t> out;
    for (const json& v : m.at(static_cast<size_t>(r)))
        out.push_back(std::llround(v.get<double>() / static_cast<double>(layers)));
    return out;
}
std::vector<int64_t> column_of(const json& m, int64_t r, int64_t layers) {
    std::vector<int64_t> out;
    for (const json& row : m)
        out.push_back(std::llround(row.at(static_cast<size_t>(r)).get<double>() / static_cast<double>(layers)));
    return out;
}
std::vector<int64_t> plus(std::vector<int64_t> a, const std::vector<int64_t>& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
}
int64_t total(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

}  // namespace

json time_bare_alltoallv(Communicator& comm, const json& traffic, int64_t num_moe_layers, int64_t iters) {
    const json t = json::parse(broadcast_string(comm, comm.rank() == 0 ? traffic.dump() : std::string(), 0));
    const int64_t r = comm.rank(), L = std::max<int64_t>(1, num_moe_layers);
    const std::vector<int64_t> d_send =
        plus(row_of(t.at("dispatch_payload_bytes"), r, L), row_of(t.at("dispatch_meta_bytes"), r, L));
    const std::vector<int64_t> d_recv =
        plus(column_of(t.at("dispatch_payload_bytes"), r, L), column_of(t.at("dispatch_meta_bytes"), r, L));
    const std::vector<int64_t> c_send = row_of(t.at("combine_payload_bytes"), r, L);
    const std::vector<int64_t> c_recv = column_of(t.at("combine_payload_bytes"), r, L);
    std::vector<uint8_t> ds(static_cast<size_t>(total(d_send)), 1), dr(static_cast<size_t>(total(d_recv)));
    std::vector<uint8_t> cs(static_cast<size_t>(total(c_send)), 1), cr(static_cast<size_t>(total(c_recv)));
    using clock = std::chrono::steady_clock;
    // Cold: a read of 4 x LLC before each repetition, as the step's GEMMs evict the LLC between moebench's
    // exchanges; warm: back to back, the buffers cached (the best case, for comparison).
    ReadBuffer evict(4 * llc_bytes(), 1);
    json out = json::object();
    for (const bool cold : {true, false}) {
        double dispatch_us = 0, combine_us = 0;
        for (int64_t it = -2; it < iters; ++it) {  // two warm-up repetitions
            if (cold) evict.read_pass();
            comm.barrier();
            double d = 0, c = 0;
            for (int64_t l = 0; l < L; ++l) {
                auto t0 = clock::now();
                comm.alltoallv(ds.data(), d_send, dr.data(), d_recv);
                auto t1 = clock::now();
                comm.alltoallv(cs.data(), c_send, cr.data(), c_recv);
                auto t2 = clock::now();
                d += std::chrono::duration<double, std::micro>(t1 - t0).count();
                c += std::chrono::duration<double, std::micro>(t2 - t1).count();
            }
            if (it < 0) continue;
            // The slowest rank's repetition.
            const std::vector<std::string> all = comm.gather(json({d, c}).dump(), 0);
            for (const std::string& s : all) {
                const json v = json::parse(s);
                if (comm.rank() == 0) {
                    d = std::max(d, v[0].get<double>());
                    c = std::max(c, v[1].get<double>());
                }
            }
            dispatch_us += d;
            combine_us += c;
        }
        out[cold ? "cold" : "warm"] = {{"dispatch_us", dispatch_us / static_cast<double>(iters)},
                                       {"combine_us", combine_us / static_cast<double>(iters)},
                                       {"iterations", iters}};
    }
    return out;
}

}  // namespace moebench
