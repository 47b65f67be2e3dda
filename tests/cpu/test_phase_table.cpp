// SPDX-License-Identifier: Apache-2.0
// The phase table (core/phase.hpp): names and groups as reports spell them, the engine running phases in table order
// for every shipped model, and every link-bound row priced by the sim.
#include "backends/sim/sim_backend.hpp"
#include "config/model_config.hpp"
#include "core/phase.hpp"
#include "core/precision.hpp"
#include "engine/engine.hpp"
#include "test_models.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

using namespace moebench;

TEST_CASE("phase table: names and groups as the design notes and every report spell them", "[phase_table]") {
    // DESIGN.md's vocabulary and group table, in execution order (a new phase may come between them).
    const std::vector<std::pair<std::string, std::string>> expected = {{"embed", "embed"},
                                                                       {"attn_norm", "attention"},
                                                                       {"qkv_proj", "attention"},
                                                                       {"attention", "attention"},
                                                                       {"linear_attention", "attention"},
                                                                       {"o_proj", "attention"},
                                                                       {"attn_allreduce", "attention"},
                                                                       {"ffn_norm", "router"},
                                                                       {"router_gemm", "router"},
                                                                       {"topk", "router"},
                                                                       {"moe_allgather", "dispatch"},
                                                                       {"permute", "dispatch"},
                                                                       {"dispatch_a2a", "dispatch"},
                                                                       {"expert_up", "experts"},
                                                                       {"activation", "experts"},
                                                                       {"expert_down", "experts"},
                                                                       {"shared_expert", "experts"},
                                                                       {"combine_a2a", "combine"},
                                                                       {"unpermute_reduce", "combine"},
                                                                       {"moe_allreduce", "combine"},
                                                                       {"dense_mlp", "dense"},
                                                                       {"dense_allreduce", "dense"},
                                                                       {"final_norm", "head"},
                                                                       {"lm_head", "head"}};
    int previous = -1;
    for (const auto& [name, group] : expected) {
        INFO(name);
        const auto p = phase_from_name(name);
        REQUIRE(p.has_value());
        const int index = static_cast<int>(*p);
        CHECK(index > previous);
        previous = index;
        CHECK(std::string(phase_name(*p)) == name);
        CHECK(std::string(kPhaseNames[static_cast<size_t>(index)]) == name);
        CHECK(std::string(phase_group_name(phase_group(*p))) == group);
        CHECK(std::string(phase_group_name(name)) == group);
    }
    CHECK(phase_group_name(std::string_view("no_such_phase")).empty());
    // The group names as reports spell them, and the MoE block the roofline sums: router, dispatch, experts, combine.
    std::vector<std::string> groups, block;
    for (const PhaseGroupInfo& g : kPhaseGroupTable) {
        groups.emplace_back(g.name);
        if (g.moe_block) block.emplace_back(g.name);
    }
    CHECK(groups ==
          std::vector<std::string>{"embed", "attention", "router", "dispatch", "experts", "combine", "dense", "head"});
    CHECK(block == std::vector<std::string>{"router", "dispatch", "experts", "combine"});
    // The all-to-alls and the collectives of tensor parallelism are bound by links; the routed experts' three phases
    // run on the expert side, the rest of the vocabulary on the token side.
    for (const auto& [name, group] : expected) {
        INFO(name);
        const Phase p = *phase_from_name(name);
        CHECK(is_link_bound(p) == (name == "dispatch_a2a" || name == "combine_a2a" || name == "attn_allreduce" ||
                                   name == "moe_allgather" || name == "moe_allreduce" || name == "dense_allreduce"));
        CHECK(is_routed_expert_phase(p) == (name == "expert_up" || name == "activation" || name == "expert_down"));
    }
}

TEST_CASE("phase table: the engine runs every shipped model's phases in table order", "[phase_table][engine]") {
    namespace fs = std::filesystem;
    int models = 0;
    for (const auto& f : fs::directory_iterator(fs::path(MOEBENCH_SOURCE_DIR) / "configs" / "models")) {
        if (f.path().extension() != ".json") continue;
        const ModelConfig m = load_model(f.path().string());
        ++models;
        // One GPU, --ep 2, and TP 2 x DP 2 attention over EP 4 (every collective of tensor parallelism).
        Layout tp_dp;
        tp_dp.attn_tp = tp_dp.attn_dp = 2;
        tp_dp.moe_ep = m.is_moe_model() ? 4 : 1;
        tp_dp.moe_tp = 4 / tp_dp.moe_ep;
        for (const Layout& layout : {Layout{}, m.is_moe_model() ? ep_layout(2) : Layout{}, tp_dp}) {
            std::vector<int64_t> layers(static_cast<size_t>(m.num_layers));
            for (int64_t l = 0; l < m.num_layers; ++l) layers[static_cast<size_t>(l)] = l;
            const std::vector<PhaseEntry> plan = step_plan(m, layers, layout, true);
            INFO(m.name << " " << layout.describe());
            // The once-per-step phases at the ends, each layer's phases ascending in table order.
            REQUIRE(plan.size() > 3);
            CHECK(phase_info(plan.front().phase).scope == PhaseScope::before_layers);
            CHECK(phase_info(plan.back().phase).scope == PhaseScope::after_layers);
            for (size_t i = 1; i < plan.size(); ++i) {
                const bool same_layer = plan[i].slot == plan[i - 1].slot;
                if (same_layer || plan[i].slot < 0 || plan[i - 1].slot < 0)
                    CHECK(static_cast<int>(plan[i].phase) > static_cast<int>(plan[i - 1].phase));
                CHECK((plan[i].slot >= 0) == (phase_info(plan[i].phase).scope == PhaseScope::layer));
            }
        }
    }
    CHECK(models >= 30);
}

TEST_CASE("phase table: every link-bound phase is priced by the sim", "[phase_table][sim]") {
    // Four GPUs of one node, TP 2 x DP 2 attention over experts TP 2 x EP 2 (the toy links of test_sim_backend.cpp):
    // each link-bound row gets a finite time of at least the collective latency, never an error.
    ModelConfig m = test::tiny_gqa_h8();
    m.dense_intermediate_size = 0;
    HardwareProfile hw;
    hw.name = "toy";
    hw.memory_bw_bytes_per_s = 1e9;
    hw.bf16_flops = 1e9;
    hw.scaleup_bw_bytes_per_s = 1e9;
    hw.gpus_per_node = 8;
    SimParams p;
    p.a2a_latency_us = 10.0;
    auto be = make_sim_backend(hw, p);
    RunOptions opt;
    opt.layout.attn_tp = opt.layout.attn_dp = opt.layout.moe_tp = opt.layout.moe_ep = 2;
    be->prepare(m, {0}, test::decode(4, 2), opt);
    int priced = 0;
    for (const PhaseInfo& row : kPhaseTable) {
        if (!is_link_bound(row.phase)) continue;
        INFO(row.name);
        be->begin_step();
        be->mark();
        REQUIRE_NOTHROW(be->run_phase(row.phase, 0));
        be->mark();
        const std::vector<double> us = be->end_step();
        REQUIRE(us.size() == 1);
        CHECK(std::isfinite(us[0]));
        if (row.phase == Phase::expert_fetch)  // priced per fetched expert: nothing without offload (its pricing:
            CHECK(us[0] == 0.0);               // test_offload_cost.cpp)
        else
            CHECK(us[0] >= 10.0);
        ++priced;
    }
    CHECK(priced >= 6);  // dispatch_a2a, combine_a2a, attn_allreduce, moe_allgather, moe_allreduce, dense_allreduce
}

TEST_CASE("phase table: the format each phase's matrix products compute in", "[phase_table]") {
    Precision p;
    p.dense_weights = DType::fp8;
    p.expert_weights = DType::int4;
    p.kv_cache = DType::fp8;
    p.activations = DType::bf16;
    p.dispatch = DType::fp8;
    p.combine = DType::bf16;
    // Dense linear layers in the dense format; router and LM head kept in high precision (bf16 beside fp8 weights);
    // the routed experts in theirs; attention over the cache and linear attention's state products on activations.
    CHECK(matmul_dtype(Phase::qkv_proj, p) == DType::fp8);
    CHECK(matmul_dtype(Phase::shared_expert, p) == DType::fp8);
    CHECK(matmul_dtype(Phase::router_gemm, p) == DType::bf16);
    CHECK(matmul_dtype(Phase::lm_head, p) == DType::bf16);
    CHECK(matmul_dtype(Phase::expert_up, p) == DType::int4);
    CHECK(matmul_dtype(Phase::expert_down, p) == DType::int4);
    CHECK(matmul_dtype(Phase::attention, p) == DType::bf16);
    CHECK(matmul_dtype(Phase::linear_attention, p) == DType::bf16);
    // The phases that stream weights through a GEMM (bench moe's floor counts these), and some that do not.
    for (Phase q : {Phase::qkv_proj, Phase::o_proj, Phase::router_gemm, Phase::expert_up, Phase::expert_down,
                    Phase::shared_expert, Phase::dense_mlp, Phase::lm_head})
        CHECK(is_weight_matmul(q));
    for (Phase q :
         {Phase::embed, Phase::attn_norm, Phase::attention, Phase::linear_attention, Phase::topk, Phase::permute,
          Phase::dispatch_a2a, Phase::activation, Phase::combine_a2a, Phase::unpermute_reduce, Phase::final_norm})
        CHECK_FALSE(is_weight_matmul(q));
}
