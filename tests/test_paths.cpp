// SPDX-License-Identifier: Apache-2.0
#include "test_paths.hpp"

namespace moebench::test {
#ifdef MOEBENCH_BIN_PATH
const char* const kBin = MOEBENCH_BIN_PATH;
#else
const char* const kBin = "moebench";
#endif
const char* const kSourceDir = MOEBENCH_SOURCE_DIR_PATH;
const char* const kTestData = MOEBENCH_TEST_DATA_PATH;
}  // namespace moebench::test
