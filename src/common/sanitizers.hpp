// SPDX-License-Identifier: Apache-2.0
// Whether this build runs under AddressSanitizer (-DMOEBENCH_SANITIZE=address): GCC and clang say so differently.
// ASan reserves terabytes of shadow address space, so address-space caps (ulimit -v, RLIMIT_AS) set before a
// process starts cannot work under it, and its leak check runs from an exit handler.
#pragma once

namespace moebench {

// MOEBENCH_SANITIZE_ADDRESS: set by cmake/MoebenchSanitize.cmake on every file of such a build, also the test
// sources compiled without instrumentation (they run the instrumented binary).
#if defined(MOEBENCH_SANITIZE_ADDRESS) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace moebench
