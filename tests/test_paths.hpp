// SPDX-License-Identifier: Apache-2.0
// Where the tests find the binary, the sources and their data. Defined in one small file (test_paths.cpp) that the
// build compiles with the paths, so that no other test object carries a checkout's absolute path and a compiler
// cache can share them between checkouts.
#pragma once

namespace moebench::test {
extern const char* const kBin;        // the moebench binary under test
extern const char* const kSourceDir;  // the source tree
extern const char* const kTestData;   // tests/data
}  // namespace moebench::test

#define MOEBENCH_BIN (::moebench::test::kBin)
#define MOEBENCH_SOURCE_DIR (::moebench::test::kSourceDir)
#define MOEBENCH_TEST_DATA (::moebench::test::kTestData)
