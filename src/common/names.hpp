// SPDX-License-Identifier: Apache-2.0
// Names that reach every report, table and label (models, hardware profiles): printable text only.
#pragma once
#include <string>

namespace moebench {

/// ConfigError naming `field` when `name` holds a control character (a newline broke the Markdown view, an escape
/// sequence would drive a terminal) or a bidirectional override (U+202A-U+202E, U+2066-U+2069: they reorder what a
/// reader sees).
void require_printable_name(const std::string& field, const std::string& name);

}  // namespace moebench
