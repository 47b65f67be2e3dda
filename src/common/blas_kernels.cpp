// SPDX-License-Identifier: Apache-2.0
#include "common/blas_kernels.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace moebench {

// OpenBLAS 0.3.21 (Debian, DYNAMIC_ARCH) does not recognise some recent Xeons (e.g. family 6 model 207 under KVM)
// and falls back to its Prescott (SSE3) kernels, about 10x below the machine's sgemm rate. The core type is read
// once, when the library loads, so the only fix inside the process is to re-execute it with OPENBLAS_CORETYPE
// set to the newest kernel family the CPU supports. A user-set OPENBLAS_CORETYPE is left alone.
void ensure_blas_kernels(const char* who) {
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
    const std::string core = openblas_get_corename();
    if (core != "Prescott" && core != "prescott") return;
    const char* want = nullptr;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512bf16"))
        want = "Cooperlake";
    else if (__builtin_cpu_supports("avx512f"))
        want = "SkylakeX";
    else if (__builtin_cpu_supports("avx2"))
        want = "Haswell";
#endif
    if (!want) return;
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string raw = ss.str();
    std::vector<std::string> args;
    for (size_t b = 0; b < raw.size();) {
        const size_t e = raw.find('\0', b);
        args.push_back(raw.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos) break;
        b = e + 1;
    }
    if (args.empty()) return;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::setenv("OPENBLAS_CORETYPE", want, 1);
    ::setenv(kReexecutedForCoretype, core.c_str(), 1);  // the report's environment says why the core type is set
    std::cerr << fmt::format(
        "{}: OpenBLAS picked its {} kernels on this CPU; re-running with "
        "OPENBLAS_CORETYPE={} (set OPENBLAS_CORETYPE yourself to choose)\n",
        who, core, want);
    std::cerr.flush();
    ::execv("/proc/self/exe", argv.data());
    ::unsetenv(kReexecutedForCoretype);
    ::unsetenv("OPENBLAS_CORETYPE");  // exec failed: carry on with what OpenBLAS chose
    std::cerr << who << ": re-exec failed; continuing with the Prescott kernels\n";
}

}  // namespace moebench
