// SPDX-License-Identifier: Apache-2.0
// GPU test runner: without a usable GPU it prints why and exits 77 (CTest SKIP_RETURN_CODE), never "passed"; listing
// the tests (-l, --list-tests, --list-test-names-only, --list-tags) needs no GPU.
// Tags scripts/device-check.sh selects: [conformance] (the shared case list on cuda, and cuda against cpu),
// [sanitize] (small shapes, every own kernel and a few whole tiny steps: run under compute-sanitizer memcheck and
// racecheck), and the rest as ~[conformance].
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "backends/cuda/cuda_backend.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-l" || a == "--list-tests" || a == "--list-test-names-only" || a == "-t" || a == "--list-tags")
            return Catch::Session().run(argc, argv);
    }
    std::string why;
    if (!moebench::cuda_available(&why)) {
        std::printf("moebench_tests_cuda: SKIPPED: %s\n", why.c_str());
        return 77;
    }
    std::printf("moebench_tests_cuda: %s\n", why.c_str());
    return Catch::Session().run(argc, argv);
}
