// SPDX-License-Identifier: Apache-2.0
// GPU test runner: without a usable GPU it prints why and exits 77 (CTest SKIP_RETURN_CODE), never "passed".
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "backends/cuda/cuda_backend.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    std::string why;
    if (!moebench::cuda_available(&why)) {
        std::printf("moebench_tests_cuda: SKIPPED: %s\n", why.c_str());
        return 77;
    }
    std::printf("moebench_tests_cuda: %s\n", why.c_str());
    return Catch::Session().run(argc, argv);
}
