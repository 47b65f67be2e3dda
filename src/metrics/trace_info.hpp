// SPDX-License-Identifier: Apache-2.0
// `moebench trace info`: a routing trace's expert load, switch rate and co-activation per layer (counted), as the
// document "moebench.trace_info/1". Its views are the format table's (report/formats.hpp).
#pragma once
#include "common/json_util.hpp"
#include "workload/trace.hpp"

#include <cstdint>
#include <string>

namespace moebench {

struct TraceInfoRequest {
    std::string file;           // the trace's path, as the document names it
    int64_t window = 0;         // > 0: also the load over successive windows of this many tokens
    int64_t top_pairs = 3;      // co-activated expert pairs listed per layer
    int64_t cache_window = 16;  // > 0: the routing-decision cache's hit rate over the previous this many tokens
};

/// The request's numbers (ConfigError naming the field).
void check_trace_info_request(const TraceInfoRequest& r);

/// The moebench.trace_info/1 document of `t`. A window so small that its counts would not fit in half of the memory
/// available: ConfigError naming the window, with one that fits.
json trace_info_document(const RoutingTrace& t, const TraceInfoRequest& r);

}  // namespace moebench
