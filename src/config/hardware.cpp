// SPDX-License-Identifier: Apache-2.0
// Hardware profiles: reads configs/hardware/*.json (units in the field names, the fields in config/hardware_fields.cpp,
// schema in docs/hardware-schema.md) and converts them to the SI HardwareProfile (bytes, bytes/s, FLOP/s).
#include "config/hardware.hpp"

#include "common/file_memo.hpp"
#include "common/flag_names.hpp"
#include "common/paths.hpp"
#include "config/file_kind.hpp"
#include "config/hardware_fields.hpp"

namespace moebench {

HardwareProfile hardware_from_json(const json& j, const std::string& path) { return hardware_from_fields(j, path); }

HardwareProfile load_hardware(const std::string& name_or_path) {
    const std::string path = resolve_config("hardware", name_or_path, flag_of("hardware"));
    static FileMemo<HardwareProfile> memo;  // read once while unchanged (a sweep loads it for every point)
    return memo.get(path, [&] {
        const json doc = load_json_file(path, kMaxConfigBytes);
        refuse_other_file_kind(doc, flag_of("hardware") + " " + path, {FileKind::hardware});
        return hardware_from_json(doc, path);
    });
}

json hardware_to_json(const HardwareProfile& h) { return hardware_fields_to_json(h); }

}  // namespace moebench
