// SPDX-License-Identifier: Apache-2.0
// The libFuzzer harness shared by every target; each target's executable adds the name of its reader
// (moebench_fuzz_target_name, a generated one-line file: fuzz/CMakeLists.txt).
// Expected errors end an input quietly. Any other exception is left uncaught on purpose: std::terminate then aborts
// at the throw, so the finding's stack shows where it was thrown, not where a harness caught it.
#include "fuzz/readers.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" const char moebench_fuzz_target_name[];

namespace {
const moebench::fuzz::Reader* g_reader = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    g_reader = moebench::fuzz::find_reader(moebench_fuzz_target_name);
    if (!g_reader) {
        std::fprintf(stderr, "fuzz: no reader named '%s' in fuzz/readers.hpp\n", moebench_fuzz_target_name);
        std::abort();
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        moebench::fuzz::replay(*g_reader, bytes);
    } catch (const moebench::ConfigError&) {
    } catch (const moebench::UnsupportedError&) {
    } catch (const moebench::Regression&) {
    }
    return 0;
}
