// SPDX-License-Identifier: Apache-2.0
// What a JSON file given to moebench is, by its markers, and where it belongs: a file given to the flag of another
// kind (a hardware profile as --model) is named for what it is and the flag that takes it, instead of being read
// field by field into "unknown field bf16_tflops". Every reader of a JSON input asks here first.
#pragma once
#include "common/json_util.hpp"

#include <initializer_list>
#include <string>

namespace moebench {

enum class FileKind {
    unknown,       // no marker of any kind: the reader names its fields
    model,         // "moebench": "model/1" (configs/models)
    hf_config,     // a Hugging Face config.json (model_type, architectures)
    hardware,      // "schema": "moebench.hardware/1" (configs/hardware)
    run_config,    // no schema; only run config fields (configs/runs)
    sweep_config,  // a run config with "axes" or a "sweep" block (configs/sweeps)
    report,        // "schema": "moebench.report/1"
    placement,     // "schema": "moebench.placement/1"
    output,        // another document moebench writes (plan, devices, bench, trace info): no input
};

/// The kind of `doc` by its markers: its "schema" ("moebench.<kind>/N"), a model's "moebench": "model/N", a Hugging
/// Face config's model_type or architectures, a sweep config's "axes" or "sweep", a run config's fields alone.
FileKind file_kind(const json& doc);

/// "a hardware profile (moebench.hardware/1)": what `doc` is, for messages.
std::string file_kind_name(const json& doc);

/// ConfigError naming `label` (the file, or the flag and the file) when `doc` is recognisably of a kind that is not
/// one of `accepted`: what it is and where it goes ("is a hardware profile (moebench.hardware/1), not a model; pass
/// it to --hardware"). A document of no recognised kind passes: its reader names the fields that are wrong.
void refuse_other_file_kind(const json& doc, const std::string& label, std::initializer_list<FileKind> accepted);

}  // namespace moebench
