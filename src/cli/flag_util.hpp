// SPDX-License-Identifier: Apache-2.0
// Flags over config values: a flag replaces a config field only when the user gave it on the command line
// (shared by `run` and `sweep`, so both treat an absent flag the same way). The run config's flags are made from
// its field table (config/run_fields.hpp).
#pragma once
#include "common/error.hpp"
#include "config/run_fields.hpp"
#include "workload/trace.hpp"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace moebench::cli {

/// A whole number given for `label` (a flag), read alike on every command: digits only, no saturation (CLI11 turns
/// 99999999999999999999 into 2^63 - 1). ConfigError naming the flag, the value and the fix; for a list or range
/// (1,2,4; 1..64; 1-64) the fix names the sweep's syntax, as `sweep_example` ("moebench sweep --batch") takes it.
int64_t parse_whole_number(const std::string& text, const std::string& label, const std::string& sweep_example = "");
/// A finite decimal given for `label`, read alike on every command (as parse_whole_number).
double parse_decimal(const std::string& text, const std::string& label, const std::string& sweep_example = "");

/// Whole numbers given for `label` in a sweep axis's syntax (8; 1,2,4; 1..64 powers of two, 1..64:x4, 0..64:+8:
/// sweep/axes), each at least `min`: a flag that takes several values (`deploy --gpus 8,16`). ConfigError naming the
/// flag, the value and the forms it takes (kAxisSyntax); a range written with a dash is named as the range meant.
std::vector<int64_t> parse_whole_list(const std::string& text, const std::string& label, int64_t min = 1);

/// How a sweep takes a list or range for run field `f`, the value to be appended: "moebench sweep --batch ",
/// "moebench sweep --set seed=".
std::string sweep_example_of(const RunField& f);

/// One value of run field `f` given as text for `label` (`--set batch=8`): a number read as the field's flag reads
/// it (parse_whole_number, parse_decimal), anything else as set_value reads it.
json run_field_value(const RunField& f, const std::string& text, const std::string& label);

/// A whole-number option (`names` as CLI11 takes them, "--batch" or "-n,--num"): INT in --help, its value read by
/// parse_whole_number when the command line is parsed.
template <class Int>
CLI::Option* add_whole_option(CLI::App* cmd, const std::string& names, Int& target, const std::string& help) {
    const std::string label = names.substr(names.rfind(',') + 1);
    return cmd
        ->add_option_function<std::string>(
            names,
            [&target, label](const std::string& text) {
                const int64_t v = parse_whole_number(text, label);
                if (static_cast<int64_t>(static_cast<Int>(v)) != v)
                    config_error(label, "is out of range", text, "use a smaller value");
                target = static_cast<Int>(v);
            },
            help)
        ->type_name("INT");
}
/// A decimal option: FLOAT in --help, its value read by parse_decimal.
CLI::Option* add_decimal_option(CLI::App* cmd, const std::string& names, double& target, const std::string& help);

/// A list option of whole numbers: LIST in --help, its value read by parse_whole_list (each at least `min`; a
/// command with its own words for a too-small value passes a lower min and checks it itself).
CLI::Option* add_whole_list_option(CLI::App* cmd, const std::string& names, std::vector<int64_t>& target,
                                   const std::string& help, int64_t min = 1);

/// Sets `field` from `value` only when `opt` appeared on the command line.
template <typename T, typename U>
void override_if(const CLI::Option* opt, T& field, const U& value) {
    if (opt->count() > 0) field = static_cast<T>(value);
}

/// The flags of the run config fields that `want` selects, added to `cmd` with CLI11's typed parsing; apply()
/// writes the ones given on the command line into a RunConfig.
class RunFieldFlags {
public:
    template <class Want>
    RunFieldFlags(CLI::App* cmd, Want want) {
        for (const RunField& f : run_fields())
            if (!f.flag.empty() && want(f)) add(cmd, f);
    }
    /// The given flags over `cfg` (mode and seed parsed as their JSON values are, errors naming the flag).
    void apply(RunConfig& cfg) const;
    /// The option of field `key`; nullptr when it has no flag here.
    CLI::Option* option(const std::string& key) const;
    bool given(const std::string& key) const {
        const CLI::Option* o = option(key);
        return o && o->count() > 0;
    }
    /// The fields given on the command line, each with its flag as written ("--batch 4"), in the table's order.
    std::vector<std::pair<std::string, std::string>> given_as_written() const;

private:
    struct Bound {
        const RunField* field = nullptr;
        CLI::Option* opt = nullptr;
        std::variant<std::string, int64_t, double, bool> value;
    };
    void add(CLI::App* cmd, const RunField& f);
    std::vector<std::unique_ptr<Bound>> bound_;  // stable addresses: CLI11 writes into them
};

/// A moebench trace (safetensors), or a JSONL / text recording imported on the fly (with the model's expert count
/// when known, else 0: an expert no token chose would otherwise be missing from the inferred count); `flag` names it
/// in errors (`place`, `offload`).
RoutingTrace load_any_trace(const std::string& path, int64_t num_experts, const std::string& flag);

/// A command's rendered view to stdout (`out` empty or "-"), else to the file `out`, written atomically and said on
/// stderr ("moebench: wrote FILE").
void emit_view(const std::string& view, const std::string& out);

}  // namespace moebench::cli
