// SPDX-License-Identifier: Apache-2.0
// The README's examples run as written.
#include "test_paths.hpp"
#include "cli_helpers.hpp"
#include "robust_helpers.hpp"

#include <catch2/catch.hpp>

using moebench::test::expect_refused;
using moebench::test::run_cli;

TEST_CASE("the README's plan example runs as written", "[docs]") {
    // The README used --ep 8 in bf16, which the plan refuses (DeepSeek-V3 needs 16 H200s in bf16).
    auto r = run_cli("plan --model deepseek-v3 --hardware h200-sxm --dtype fp8 --ep 8 --batch 64 --context 8192");
    INFO(r.err);
    CHECK(r.exit_code == 0);
    expect_refused("plan --model deepseek-v3 --hardware h200-sxm --ep 8 --batch 64 --context 8192",
                   {"--ep", "16"});
}
