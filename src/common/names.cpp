// SPDX-License-Identifier: Apache-2.0
// The one check of names that reach reports and labels (common/names.hpp).
#include "common/names.hpp"

#include "common/error.hpp"

namespace moebench {

void require_printable_name(const std::string& field, const std::string& name) {
    const auto byte = [&](size_t j) { return j < name.size() ? static_cast<unsigned char>(name[j]) : 0; };
    for (size_t i = 0; i < name.size(); ++i) {
        const bool control = byte(i) < 0x20 || byte(i) == 0x7f;
        const bool bidi = byte(i) == 0xe2 && ((byte(i + 1) == 0x80 && byte(i + 2) >= 0xaa && byte(i + 2) <= 0xae) ||
                                              (byte(i + 1) == 0x81 && byte(i + 2) >= 0xa6 && byte(i + 2) <= 0xa9));
        if (control || bidi)
            config_error(
                field,
                fmt::format("holds a {} at byte {}", control ? "control character" : "bidirectional override", i),
                "\"" + name + "\"",  // config_error shows the control bytes as \xNN
                "use printable characters only");
    }
}

}  // namespace moebench
