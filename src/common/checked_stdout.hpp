// SPDX-License-Identifier: Apache-2.0
// Standard output that cannot fail in silence: std::cout writes through write(2) on descriptor 1 and remembers the
// first failure (a full disk, a closed pipe), so that the process ends with exit 1 and the reason instead of 0.
#pragma once
#include <string>

namespace moebench {

/// Makes std::cout write through the checked writer (main() calls it once, before any output). Buffered like
/// stdio: by line on a terminal, in blocks otherwise.
void install_checked_stdout();

/// Flushes std::cout and returns why a write to standard output failed ("No space left on device"), or "" when
/// every write so far reached it. A failure is returned once: the caller that gets it reports it.
std::string take_stdout_failure();

/// take_stdout_failure(), then closes descriptor 1 so that an error only the close reports (NFS) is caught too.
/// For the end of the process: nothing may write to stdout afterwards.
std::string close_stdout();

}  // namespace moebench
