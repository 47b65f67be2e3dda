// SPDX-License-Identifier: Apache-2.0
// The engine's phase lists per model family and the step loop's pairing of intervals with (phase, layer).
#include "engine/engine.hpp"

#include "common/error.hpp"

#include <catch2/catch.hpp>

using namespace moebench;

namespace {

ModelConfig tiny_model(int64_t num_layers, std::vector<uint8_t> is_moe, int64_t shared) {
    ModelConfig m;
    m.name = "test";
    m.num_layers = num_layers;
    m.hidden_size = 8;
    m.moe.num_experts = 4;
    m.moe.top_k = 2;
    m.moe.num_shared_experts = shared;
    m.layer_is_moe = std::move(is_moe);
    return m;
}

std::vector<std::string> names(const std::vector<Phase>& ps) {
    std::vector<std::string> out;
    for (Phase p : ps) out.emplace_back(phase_name(p));
    return out;
}

// Records the calls and returns intervals 1, 2, 3, ... so the pairing can be checked.
class FakeBackend : public Backend {
public:
    std::vector<std::pair<Phase, int64_t>> calls;
    int marks = 0;
    int extra_intervals = 0;
    BackendTraits traits() const override {
        BackendTraits t;
        t.name = "fake";
        return t;
    }
    json describe() const override { return json::object(); }
    PreparedStep prepare(const ModelConfig&, const std::vector<int64_t>&, const StepShape&, const RunOptions&,
                         const Topology&) override {
        return {};
    }
    void set_routing_override(const StepRouting*) override {}
    void begin_step() override {
        marks = 0;
        calls.clear();
    }
    void run_phase(Phase p, int64_t slot) override { calls.emplace_back(p, slot); }
    void mark() override { ++marks; }
    std::vector<double> end_step() override {
        std::vector<double> v;
        for (int i = 1; i < marks + extra_intervals; ++i) v.push_back(static_cast<double>(i));
        return v;
    }
    MoeLayerResult moe_result(int64_t) const override { return {}; }
};

}  // namespace

TEST_CASE("phase list of a MoE layer (Mixtral-like)", "[engine]") {
    ModelConfig m = tiny_model(2, {1, 1}, 0);
    CHECK(names(phases_for_layer(m, 0, 1)) ==
          std::vector<std::string>{"attn_norm", "qkv_proj", "attention", "o_proj", "ffn_norm", "router_gemm", "topk",
                                   "permute", "expert_up", "activation", "expert_down", "unpermute_reduce"});
}

TEST_CASE("phase list with shared experts and expert parallelism", "[engine]") {
    ModelConfig m = tiny_model(2, {1, 1}, 1);
    CHECK(names(phases_for_layer(m, 1, 1)) == std::vector<std::string>{"attn_norm", "qkv_proj", "attention", "o_proj",
                                                                       "ffn_norm", "router_gemm", "topk", "permute",
                                                                       "expert_up", "activation", "expert_down",
                                                                       "shared_expert", "unpermute_reduce"});
    CHECK(names(phases_for_layer(m, 1, 4)) ==
          std::vector<std::string>{"attn_norm", "qkv_proj", "attention", "o_proj", "ffn_norm", "router_gemm", "topk",
                                   "permute", "dispatch_a2a", "expert_up", "activation", "expert_down", "shared_expert",
                                   "combine_a2a", "unpermute_reduce"});
}

TEST_CASE("dense-first layers run as dense; a dense model has no MoE phases", "[engine]") {
    ModelConfig m = tiny_model(3, {0, 1, 1}, 1);
    CHECK(names(phases_for_layer(m, 0, 1)) ==
          std::vector<std::string>{"attn_norm", "qkv_proj", "attention", "o_proj", "ffn_norm", "dense_mlp"});
    CHECK(m.is_moe_layer(1));
    ModelConfig dense = tiny_model(2, {0, 0}, 0);
    dense.moe.num_experts = 0;
    CHECK(names(phases_for_layer(dense, 1, 8)).back() == "dense_mlp");
}

TEST_CASE("step plan: embed first, layers in order with their slots, head last", "[engine]") {
    ModelConfig m = tiny_model(3, {0, 1, 1}, 0);
    auto plan = step_plan(m, {0, 1}, 1, true);
    REQUIRE(plan.size() == 1 + 6 + 12 + 2);
    CHECK(plan.front().phase == Phase::embed);
    CHECK(plan.front().slot == -1);
    CHECK(plan[1].phase == Phase::attn_norm);
    CHECK(plan[1].layer == 0);
    CHECK(plan[6].phase == Phase::dense_mlp);
    CHECK(plan[7].layer == 1);
    CHECK(plan[7].slot == 1);
    CHECK(plan[plan.size() - 2].phase == Phase::final_norm);
    CHECK(plan.back().phase == Phase::lm_head);
    CHECK(step_plan(m, {0, 1}, 1, false).size() == 6 + 12);
}

TEST_CASE("run_step pairs each interval with its phase and times the whole step", "[engine]") {
    ModelConfig m = tiny_model(2, {1, 1}, 0);
    auto plan = step_plan(m, {0, 1}, 1, true);
    FakeBackend b;
    StepTimes t = run_step(b, plan);
    REQUIRE(b.calls.size() == plan.size());
    CHECK(b.marks == static_cast<int>(plan.size()) + 1);  // one before the first phase, one after each
    for (size_t i = 0; i < plan.size(); ++i) {
        CHECK(b.calls[i].first == plan[i].phase);
        CHECK(b.calls[i].second == plan[i].slot);
        CHECK(t.phase_us[i] == static_cast<double>(i + 1));
    }
    CHECK(t.wall_us >= 0.0);
    b.extra_intervals = 1;  // a backend that returns one interval too many is an internal error
    CHECK_THROWS_AS(run_step(b, plan), Error);
}
