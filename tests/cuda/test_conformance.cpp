// SPDX-License-Identifier: Apache-2.0
// The conformance case list on the GPU (tests/conformance_cases.hpp, the list moebench_tests_cpu runs on cpu): every
// tiny model x every variant on cuda through run_point with --check (the MoE block against the fp32 host reference,
// within the cuda traits' tolerance), and the whole cuda step against the whole cpu step of the same case. One line
// per case on stdout ("conformance-check ...", "conformance-step ..."): scripts/device_summary.py counts them.
#include "conformance_cases.hpp"

#include <catch2/catch.hpp>

using namespace moebench::test::conformance;

TEST_CASE("conformance on the GPU: every tiny model x every variant passes --check on cuda", "[gpu][conformance]") {
    check_backend("cuda", true);
}

TEST_CASE("conformance on the GPU: the whole cuda step equals the cpu step, every tiny model x every variant",
          "[gpu][conformance]") {
    compare_backends("cpu", "cuda", true);
}
