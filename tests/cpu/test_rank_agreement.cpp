// SPDX-License-Identifier: Apache-2.0
// The pieces of a multi-process job that need no processes: the rank deadline's rule (--rank-timeout and auto), the
// settings the ranks compare at start and the one-line difference they print. The jobs themselves (a rank with
// other settings, a rank stopped mid-run) are tests/mpi_check.py (CTest moebench.mpi).
#include "comm/rank_deadline.hpp"
#include "config/run_config.hpp"
#include "harness/rank_settings.hpp"
#include "model/placement.hpp"

#include "error_helpers.hpp"
#include "test_models.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace moebench;
using moebench::test::config_error_of;

TEST_CASE("rank deadline: auto is max(30 s, 5 x the slowest step), a fixed one is itself", "[ep][rank_timeout]") {
    RankDeadline d;
    CHECK(d.seconds() == 30.0);  // nothing measured yet: the floor
    d.note_step_s(2.0);
    CHECK(d.seconds() == 30.0);  // 5 x 2 s is below the floor
    d.note_step_s(10.0);
    d.note_step_s(4.0);  // the slowest step so far stays 10 s
    CHECK(d.seconds() == 50.0);
    d.allow_stage_s(20.0);  // the sync after a 20 s preparation: 5 x 20 s
    CHECK(d.seconds() == 100.0);
    d.allow_stage_s(0);
    CHECK(d.seconds() == 50.0);
    d.set_fixed_s(3.0);
    CHECK(d.seconds() == 3.0);
    CHECK(d.fixed());
    d.set_fixed_s(0);  // back to auto
    CHECK(d.seconds() == 50.0);
}

TEST_CASE("rank deadline: the context names the phase and layer, and is restored", "[ep][rank_timeout]") {
    CHECK(describe(comm_context()) == "start-up");
    {
        const ScopedCommContext outer("the stop rule's broadcast after a step");
        CHECK(describe(comm_context()) == "the stop rule's broadcast after a step");
        {
            const ScopedCommContext inner("dispatch_a2a", 3);
            CHECK(describe(comm_context()) == "dispatch_a2a (layer 3)");
        }
        CHECK(describe(comm_context()) == "the stop rule's broadcast after a step");
    }
    CHECK(describe(comm_context()) == "start-up");
}

TEST_CASE("--rank-timeout: auto or a finite number of seconds > 0", "[ep][rank_timeout]") {
    CHECK(parse_rank_timeout("auto", "rank_timeout (--rank-timeout)") == 0.0);
    CHECK(parse_rank_timeout("30", "f") == 30.0);
    CHECK(parse_rank_timeout("2.5", "f") == 2.5);
    CHECK(parse_rank_timeout("86400", "f") == 86400.0);
    for (const char* bad : {"0", "-1", "nan", "NaN", "inf", "-inf", "", "3s", "abc", "86401", "1e400"}) {
        const std::string msg = config_error_of([&] { parse_rank_timeout(bad, "rank_timeout (--rank-timeout)"); });
        INFO(bad);
        CHECK(msg.find("rank_timeout (--rank-timeout)") != std::string::npos);
        CHECK(msg.find("auto") != std::string::npos);  // the fix names the other form
    }
    RunConfig c;
    CHECK(c.rank_timeout == "auto");
    c.rank_timeout = "0";
    CHECK(config_error_of([&] { validate(c); }).find("rank_timeout (--rank-timeout)") != std::string::npos);
    // A run config takes seconds as a number too.
    CHECK(run_config_from_json(json{{"rank_timeout", 60}}, "").rank_timeout == "60");
    CHECK(run_config_from_json(json{{"rank_timeout", 2.5}}, "").rank_timeout == "2.5");
    CHECK(config_error_of([] { validate(run_config_from_json(json{{"rank_timeout", 0}}, "")); }) != "");
}

namespace {

ModelConfig tiny_model() { return test::tiny_gqa_h8(); }

std::string difference(const RunConfig& rank0, const RunConfig& rank1, const ModelConfig& m0, const ModelConfig& m1) {
    const ExpertPlacement p0 = contiguous_placement(m0.moe.num_experts, 2),
                          p1 = contiguous_placement(m1.moe.num_experts, 2);
    return settings_difference(rank_settings(rank0, m0, p0), rank_settings(rank1, m1, p1), 1);
}

}  // namespace

TEST_CASE("rank settings: the first differing field, rank 1's value then rank 0's", "[ep][rank_settings]") {
    const ModelConfig m = tiny_model();
    RunConfig a;
    a.shape.batch = 8;
    RunConfig b = a;
    CHECK(difference(a, b, m, m).empty());
    b.shape.batch = 16;
    CHECK(difference(a, b, m, m) == "rank 1 differs from rank 0 in batch (--batch): 16 vs 8");
    b.options.seed = 3;  // the first difference in field order is still the batch
    CHECK(difference(a, b, m, m) == "rank 1 differs from rank 0 in batch (--batch): 16 vs 8");
    b = a;
    b.options.seed = 3;
    CHECK(difference(a, b, m, m) == "rank 1 differs from rank 0 in seed (--seed): 3 vs 0");
    b = a;
    b.layers = 2;
    CHECK(difference(a, b, m, m) == "rank 1 differs from rank 0 in layers (--layers): 2 vs 0");
    b = a;
    b.precision.dispatch_dtype = "fp8";
    CHECK(difference(a, b, m, m) == "rank 1 differs from rank 0 in dispatch_dtype (--dispatch-dtype): fp8 vs auto");
    b = a;
    b.layout.a2a = "per-expert";
    CHECK(difference(a, b, m, m) == "rank 1 differs from rank 0 in a2a (--a2a): per-expert vs dedup");
    b = a;
    b.warmup = 5;  // every rank runs its warm-up steps' all-to-alls: they must agree
    CHECK(difference(a, b, m, m) == "rank 1 differs from rank 0 in warmup (--warmup): 5 vs 2");
}

TEST_CASE("rank settings: what may differ per rank, and the model by its shapes", "[ep][rank_settings]") {
    const ModelConfig m = tiny_model();
    RunConfig a;
    RunConfig b = a;
    // Each rank's own, or rank 0's alone: out, threads, rank_timeout, the stop rule's targets, the dump folder.
    b.out = "other.json";
    b.options.num_threads = 7;
    b.rank_timeout = "5";
    b.iters = 99;
    b.max_iters = 5000;
    b.min_time_s = 3;
    b.max_noise = 0.01;
    a.dump_tensors = "rank0-dump";
    b.dump_tensors = "elsewhere";
    CHECK(difference(a, b, m, m).empty());
    b.dump_tensors.clear();  // but whether it is given: every rank then sends its rows to rank 0
    CHECK(difference(a, b, m, m) == "rank 1 differs from rank 0 in dump_tensors (--dump-tensors): not given vs given");
    // The model: its path may differ (the same file elsewhere), its shapes may not.
    b = a;
    b.model = "/another/path/to/the/same.json";
    CHECK(difference(a, b, m, m).empty());
    ModelConfig wider = m;
    wider.hidden_size = 2 * m.hidden_size;
    CHECK(difference(a, b, m, wider) ==
          fmt::format("rank 1 differs from rank 0 in model (--model): hidden_size {} vs {}", 2 * m.hidden_size,
                      m.hidden_size));
    ModelConfig renamed = m;
    renamed.name = "other-model";
    CHECK(difference(a, b, m, renamed) ==
          "rank 1 differs from rank 0 in model (--model): name other-model vs tiny-gqa");
}

TEST_CASE("rank settings: the placement by its experts per rank", "[ep][rank_settings]") {
    const ModelConfig m = tiny_model();
    RunConfig a;
    ExpertPlacement p0 = contiguous_placement(m.moe.num_experts, 2), p1 = p0;
    CHECK(settings_difference(rank_settings(a, m, p0), rank_settings(a, m, p1), 1).empty());
    std::swap(p1.experts_on_rank[0].back(), p1.experts_on_rank[1].front());
    p1.source = "placement.json";
    const std::string d = settings_difference(rank_settings(a, m, p0), rank_settings(a, m, p1), 1);
    CHECK(d.rfind("rank 1 differs from rank 0 in placement (--placement): placement.json ", 0) == 0);
}
