// SPDX-License-Identifier: Apache-2.0
// Flags over config values: a flag replaces a config field only when the user gave it on the command line
// (shared by `run` and `sweep`, so both treat an absent flag the same way). The run config's flags are made from
// its field table (config/run_fields.hpp).
#pragma once
#include "config/run_fields.hpp"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace moebench::cli {

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

}  // namespace moebench::cli
