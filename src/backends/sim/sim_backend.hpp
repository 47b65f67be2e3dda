// SPDX-License-Identifier: Apache-2.0
// The sim backend: an analytic cost model of each phase (roofline of counted FLOPs and bytes against a hardware
// profile, plus a fixed per-phase overhead) and of expert-parallel all-to-all from the actual per-rank traffic.
// Every time it returns is "modeled". Parameters and defaults: docs/sim-backend.md.
#pragma once
#include "config/hardware.hpp"
#include "engine/backend.hpp"
#include "model/memory_plan.hpp"
#include "model/phase_work.hpp"

#include <memory>
#include <string>
#include <vector>

namespace moebench {

/// Efficiencies and fixed costs of the model. Defaults are stated (and justified) in docs/sim-backend.md; a hardware
/// profile may override any of them in an optional "sim" object.
struct SimParams {
    double compute_efficiency = 0.75;      // fraction of the dtype's dense peak a GEMM phase reaches
    double memory_efficiency = 0.85;       // fraction of the HBM bandwidth a streaming phase reaches
    double link_efficiency = 0.80;         // fraction of the per-direction link bandwidth an all-to-all reaches
    double phase_overhead_us = 3.0;        // per phase: kernel launch and tail, added to the roofline time
    double a2a_latency_us = 10.0;          // per all-to-all within one node (scale-up links)
    double a2a_network_latency_us = 25.0;  // per all-to-all that crosses nodes
    double host_link_efficiency = 0.78;    // fraction of pcie_bw_gbps a host-to-device copy of pinned memory reaches
    double host_copy_latency_us = 10.0;    // per copy from host memory (one fetched expert): launch and sync
    DType dtype = DType::bf16;  // the native format ("auto" of --dtype): bf16, or fp32 (a profile's sim.dtype)
    MlaForm mla_form = MlaForm::absorbed;  // MLA attention as the cuda backend runs it
};

/// Reads the optional "sim" object of a hardware profile (`path` names it in errors); missing keys keep defaults.
/// Its fields are one table in sim_backend.cpp (key, accepted values, default, meaning, member).
SimParams sim_params_from_json(const json& sim, const std::string& path);
/// That table for people: "text" (for `moebench devices --hardware-fields`), "md" (docs/sim-backend.md's parameter
/// table) or "json".
std::string sim_fields_table(const std::string& format);
/// The profile's "sim" object when its source file has one, else the defaults.
SimParams sim_params_for(const HardwareProfile& hw);
/// `p` as a profile's "sim" object (every field of the table): what a calibrated profile holds.
json sim_params_to_json(const SimParams& p);

/// One number of the sim object (an efficiency or a fixed cost): its key, member and accepted range, from the same
/// table as the reader. What `moebench calibrate` fits.
struct SimNumberField {
    std::string key;
    double SimParams::*member = nullptr;
    double min = 0, max = 0;
};
std::vector<SimNumberField> sim_number_fields();
/// Prices the prepared step of a sim backend again with the efficiencies and fixed costs of `p` (its dtype and MLA
/// form stay those it was prepared with): calibration prices one prepared step under many parameter sets without
/// preparing it again. `backend` must come from make_sim_backend (else InternalError).
void reprice_sim(Backend& backend, const SimParams& p);

/// Peak FLOP/s of the native format `p.dtype` on `hw` (what the profile must have for the sim to model anything).
double sim_peak_flops(const HardwareProfile& hw, const SimParams& p);
/// Modeled time of one phase on one GPU: max(flops / (peak_flops * compute_eff), bytes / (mem_bw * memory_eff)) +
/// overhead; `peak_flops` is the rate of the format the phase computes in (model/decode_floor.hpp peak_flops_for).
double sim_phase_us(const PhaseWork& w, double peak_flops, const HardwareProfile& hw, const SimParams& p);
/// Modeled time of one all-to-all: max over ranks of max(bytes sent, bytes received) over its links (scale-up within
/// a node of gpus_per_node ranks, network beyond; each at link_efficiency), plus the latency. `transpose` reads the
/// traffic the other way round (combine). The latency is a2a_network_latency_us when the ranks span more than one
/// node, else a2a_latency_us; it is paid even when no row crosses ranks.
double sim_a2a_us(const A2aTraffic& t, const HardwareProfile& hw, const SimParams& p, bool transpose = false);

/// Modeled time of one ring collective (model/phase_work.hpp ring_bytes_per_gpu) over `n` GPUs of a buffer of
/// `buffer_bytes`: its bytes per GPU over one direction of the link (scale-up within a node, the network when the
/// group spans nodes; at link_efficiency), plus the latency of the same kind as an all-to-all's (a2a_latency_us, or
/// a2a_network_latency_us across nodes). 0 for n <= 1.
double sim_collective_us(Collective c, int64_t n, double buffer_bytes, bool spans_nodes, const HardwareProfile& hw,
                         const SimParams& p);
/// Whether an attention tensor-parallel group of `l` (consecutive GPUs: group d holds GPUs d x attn_tp to
/// (d + 1) x attn_tp - 1) spans nodes of `gpus_per_node`.
bool tp_groups_span_nodes(const Layout& l, int64_t gpus_per_node);
/// What one all-to-all moves per rank over each kind of link: to and from the ranks of its own node (scale-up links;
/// nodes of gpus_per_node consecutive ranks) and of other nodes (the network). What sim_a2a_us reads of the traffic:
/// the largest entry of each kind, so an entry may also stand for a class of alike ranks (the statistical routing
/// path's maxima, backends/sim/sim_routing.hpp), and the four lists may differ in length.
struct A2aLinkBytes {
    A2aLinkBytes() = default;
    explicit A2aLinkBytes(int64_t ranks)
        : num_ranks(ranks),
          intra_out(static_cast<size_t>(ranks), 0.0),
          intra_in(intra_out),
          inter_out(intra_out),
          inter_in(intra_out) {}
    int64_t num_ranks = 1;  // the ranks of the exchange (its latency: one node or several)
    std::vector<double> intra_out, intra_in, inter_out, inter_in;
    A2aLinkBytes transposed() const;  // the same exchange the other way round (combine after dispatch)
    A2aLinkBytes scaled(double factor) const;
};
A2aLinkBytes a2a_link_bytes(const A2aTraffic& t, int64_t gpus_per_node);
/// sim_a2a_us of traffic already summed per rank and link: the largest entry of each link's two directions over its
/// bandwidth, the slower link, plus the latency.
double sim_a2a_us(const A2aLinkBytes& l, const HardwareProfile& hw, const SimParams& p);

/// What the sim backend is and accepts, modeling `hw` with `p` (registry: the default profile and parameters).
BackendTraits sim_backend_traits(const HardwareProfile& hw, const SimParams& p);

/// A sim backend for `hw` with its profile's parameters (or `p`).
std::unique_ptr<Backend> make_sim_backend(const HardwareProfile& hw);
std::unique_ptr<Backend> make_sim_backend(const HardwareProfile& hw, const SimParams& p);
/// The profile modeled when none is given: the one default (plan's too).
inline constexpr const char* kSimDefaultHardware = kDefaultHardware;

}  // namespace moebench
