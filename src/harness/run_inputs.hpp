// SPDX-License-Identifier: Apache-2.0
// The files a run point reads and writes, named once: `run` and `sweep` refuse an output that is one of the inputs
// (common/file_identity.hpp), and a sweep's journal records each point's inputs by content (sweep/journal.hpp).
#pragma once
#include "common/file_identity.hpp"
#include "config/run_config.hpp"

#include <string>
#include <vector>

namespace moebench {

/// One file a run reads, resolved as the run resolves it.
struct RunInput {
    std::string field;  // run config field: model | hardware | routing | placement
    std::string flag;   // for messages: --model, --hardware, --routing, --placement
    std::string name;   // as given ("olmoe-1b-7b", "trace:t.safetensors" -> "t.safetensors")
    std::string path;   // the file it names; "" when it names none (the run then fails on it as usual)
};

/// The model (a short name resolved in configs/models), the hardware profile (when set), the routing trace
/// (trace:FILE) and the placement file (when set). Never throws for a name that does not resolve.
std::vector<RunInput> run_input_files(const RunConfig& cfg);

/// run_input_files as FileArgs (those that name a file), for refuse_output_over_input.
std::vector<FileArg> run_input_args(const RunConfig& cfg);

/// The files a run writes: the report (--out; "" and "-" are none) and --dump-tensors' moe_layer.safetensors.
std::vector<FileArg> run_output_args(const RunConfig& cfg);

}  // namespace moebench
