// SPDX-License-Identifier: Apache-2.0
// What differs between two compared reports besides their match keys but can move the numbers: the tool (git
// revision, version, build type), the machine (CPU, CPU count, BLAS), per matched point the threads and dtype, the
// run config's fixed fields, and the contrast that --match let through. Warnings, not refusals: the comparison is
// still made, and says so (stderr and the comparison's "warnings").
#pragma once
#include "common/json_util.hpp"
#include "compare/point_match.hpp"
#include "report/report_reader.hpp"

namespace moebench {

/// One {"field", "a", "b", "message"} per difference. Machine differences are left out when every compared point
/// of both reports is modeled (sim: no machine behind the numbers).
json environment_warnings(const ReadReport& a, const ReadReport& b, const PointMatch& m);

}  // namespace moebench
