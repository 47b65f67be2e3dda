// SPDX-License-Identifier: Apache-2.0
// The libFuzzer harness of every target: one executable, fuzz_moebench, and one link to it per reader, fuzz_<name>
// (fuzz/CMakeLists.txt); the name it is started by picks the reader of fuzz/readers.hpp. One link step instead of 13,
// and one 70 MB binary.
// Expected errors end an input quietly. Any other exception is left uncaught on purpose: std::terminate then aborts
// at the throw, so the finding's stack shows where it was thrown, not where a harness caught it.
#include "fuzz/readers.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
const moebench::fuzz::Reader* g_reader = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
    std::string name = *argc > 0 ? (*argv)[0] : "";
    name = name.substr(name.find_last_of('/') + 1);  // npos + 1 == 0: no folder
    if (name.rfind("fuzz_", 0) == 0) g_reader = moebench::fuzz::find_reader(name.substr(5));
    if (!g_reader) {
        std::string names;
        for (const auto& r : moebench::fuzz::readers())
            names += std::string(names.empty() ? "" : ", ") + "fuzz_" + r.name;
        std::fprintf(stderr, "fuzz: started as '%s', which names no reader of fuzz/readers.hpp; start one of: %s\n",
                     name.c_str(), names.c_str());
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
