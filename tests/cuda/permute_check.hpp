// SPDX-License-Identifier: Apache-2.0
// The GPU permutation (kernels::launch_permute_index) against moe_core run on the host: apply_capacity,
// exclusive_offsets, permutation_map; every output compared. Shared by the small and the real-shape tests.
#pragma once
#include "core/moe_core.cuh"
#include "gpu_test_util.hpp"
#include "kernels/launch.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace moebench::test {

/// What the host reference made of the routing (for a test's own claims about its data).
struct PermuteReference {
    std::vector<int64_t> counts;  // kept rows per expert
    int64_t dropped = 0;
};

/// Runs the permutation of `ids` / `w` (T x k over E experts, capacity cap; -1 = dropless) on the device and requires
/// every output to equal the host's: ids and weights after drops, counts, offsets, the row of each assignment, the
/// assignment, token and expert of each row, the drop count, the active-expert list and the tile map.
inline PermuteReference check_permutation(const std::vector<int32_t>& ids, const std::vector<float>& w, int64_t T,
                                          int64_t k, int64_t E, int64_t cap, cudaStream_t stream) {
    const int64_t A = T * k;
    auto di = upload(ids);
    auto dw = upload(w);
    DeviceBuffer<int32_t> counts(E), offsets(E + 1), pslot(A), pexp(A), spos(A), dropped(1), active(E + 1),
        tiles(E + 1), ws(kernels::permute_workspace_ints(A, E));
    const kernels::PermuteMaps maps{.counts = counts.get(),
                                    .offsets = offsets.get(),
                                    .perm_slot = pslot.get(),
                                    .perm_expert = pexp.get(),
                                    .slot_pos = spos.get(),
                                    .dropped = dropped.get(),
                                    .active = active.get(),
                                    .tile_offsets = tiles.get()};
    kernels::launch_permute_index(di.get(), dw.get(), T, k, E, cap, maps, ws.get(), stream);

    std::vector<int32_t> rid = ids;
    std::vector<float> rw = w;
    std::vector<int64_t> rc(E), roff(E + 1), cursor(E), rslot(A);
    std::vector<int32_t> rtok(A, -7);
    const int64_t rdrop = core::apply_capacity(rid.data(), rw.data(), T, int(k), int(E), cap, rc.data());
    core::exclusive_offsets(rc.data(), int(E), roff.data());
    core::permutation_map(rid.data(), T, int(k), int(E), roff.data(), cursor.data(), rslot.data(), rtok.data());
    std::vector<int32_t> ract;  // the experts with kept rows, ascending
    for (int64_t e = 0; e < E; ++e)
        if (rc[e] > 0) ract.push_back(int32_t(e));

    const auto gid = download(di.get(), A);
    const auto gwt = download(dw.get(), A);
    const auto gc = download(counts.get(), E);
    const auto go = download(offsets.get(), E + 1);
    const auto gs = download(spos.get(), A);
    const auto gp = download(pslot.get(), A);
    const auto ge = download(pexp.get(), A);
    const auto gd = download(dropped.get(), 1);
    const auto ga = download(active.get(), E + 1);
    const auto gt = download(tiles.get(), E + 1);
    INFO("capacity " << cap);
    CHECK(gd[0] == rdrop);
    for (int64_t e = 0; e <= E; ++e) REQUIRE(go[e] == roff[e]);
    for (int64_t e = 0; e < E; ++e) REQUIRE(gc[e] == rc[e]);
    REQUIRE(ga[0] == int32_t(ract.size()));
    for (size_t i = 0; i < ract.size(); ++i) REQUIRE(ga[1 + i] == ract[i]);
    // The tile map: an exclusive sum of ceil(kept / kExpertTileRows).
    int64_t tile_sum = 0;
    for (int64_t e = 0; e <= E; ++e) {
        REQUIRE(gt[e] == tile_sum);
        if (e < E) tile_sum += (rc[e] + kernels::kExpertTileRows - 1) / kernels::kExpertTileRows;
    }
    int64_t bad = 0, first_bad = -1;
    for (int64_t a = 0; a < A; ++a) {
        bool ok = gid[a] == rid[a] && gwt[a] == rw[a] && gs[a] == rslot[a];
        if (ok && gs[a] >= 0) ok = gp[gs[a]] == a && rtok[gs[a]] == a / k && ge[gs[a]] == rid[a];
        if (!ok && bad++ == 0) first_bad = a;
    }
    INFO("first differing assignment " << first_bad);
    CHECK(bad == 0);
    return {rc, rdrop};
}

}  // namespace moebench::test
