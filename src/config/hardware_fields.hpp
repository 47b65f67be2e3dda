// SPDX-License-Identifier: Apache-2.0
// The hardware profile's fields as one table: key (its unit in the name), unit, SI scale, plausible range,
// required or default, meaning, and the HardwareProfile member it fills. The reader (hardware_from_json), its
// validation (ranges, the one-of rule of memory, unknown keys with the list of known ones), the writer
// (hardware_to_json: the report's hardware block), `moebench devices --hardware-fields` and docs/hardware-schema.md's
// field table all come from it. A new field is one row in hardware_fields.cpp and its member in HardwareProfile.
#pragma once
#include "config/hardware.hpp"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace moebench {

/// What a field holds in the file.
enum class HardwareFieldKind {
    schema,     // the schema's name, which must be "moebench.hardware/1"
    text,       // a string
    text_list,  // a list of strings, appended to its member (the sources, to the comment)
    number,     // a figure in the unit its name gives, scaled to SI on load
    count,      // a whole number
    object,     // read by its owner (the sim block: backends/sim/sim_backend.cpp)
};

/// Whether a field must be given.
enum class HardwareFieldNeed {
    optional,  // absent: its default (a figure: 0 = not supported, or unknown)
    required,
    one_of,  // exactly one of the fields that fill the same member (memory_gib, memory_gb, memory_bytes)
};

/// An absent text field's value.
enum class HardwareTextDefault { empty, file_stem, name };

using HardwareMember =
    std::variant<std::monostate, std::string HardwareProfile::*, double HardwareProfile::*, int64_t HardwareProfile::*>;

/// One row of the table (hardware_fields.cpp builds each kind of row with its own helper: the columns it needs).
struct HardwareField {
    std::string key;   // JSON key; the unit is in the name
    std::string unit;  // as --hardware-fields and the docs give it
    HardwareFieldKind kind = HardwareFieldKind::number;
    HardwareFieldNeed need = HardwareFieldNeed::optional;
    double si_scale = 1;        // number: member = value x si_scale
    double lo = 0, hi = 0;      // number, count: the physically plausible range in the field's unit
    int64_t default_count = 0;  // count: when absent
    HardwareTextDefault text_default = HardwareTextDefault::empty;
    bool recorded = true;  // hardware_to_json writes it (the report's hardware block)
    std::string meaning;   // one line
    std::string fix;       // count: the fix an out-of-range value's error gives ("" for numbers: the unit)
    HardwareMember member;
};

/// The table, in the order the reader reads them (name before display_name, comment before sources) and the docs list
/// them.
const std::vector<HardwareField>& hardware_fields();
/// nullptr for a key that is no field.
const HardwareField* find_hardware_field(const std::string& key);

/// Reads and validates a profile against the table (hardware_from_json is this with the file's path).
HardwareProfile hardware_from_fields(const json& j, const std::string& path);
/// The recorded fields in their files' units (memory in bytes): what the report's hardware block holds.
json hardware_fields_to_json(const HardwareProfile& h);

/// The table for people: "text" (aligned columns, for --hardware-fields), "md" (docs/hardware-schema.md's table) or
/// "json" (one object per field).
std::string hardware_fields_table(const std::string& format);

}  // namespace moebench
