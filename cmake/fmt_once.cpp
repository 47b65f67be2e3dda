// SPDX-License-Identifier: Apache-2.0
// fmt's implementation, compiled once for a build from the dependency bundle (cmake/MoebenchDeps.cmake), where fmt has
// no library to link: without it every file that formats would compile fmt/format-inl.h (FMT_HEADER_ONLY), about a
// third of a JSON-heavy file's compile time under the sanitizers. Its functions are defined by including
// format-inl.h without FMT_HEADER_ONLY; the templates format.h declares for a library are instantiated below, for
// the types fmt's headers name (fmt 9, Debian 12's libfmt-dev).
#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
namespace detail {
// Shortest round-trip digits of floating-point numbers (format.h declares them for a library to provide).
template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
// Locale-dependent formatting ({:L}).
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;
// format.h's `extern template` declarations.
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl(locale_ref) -> char;
template auto decimal_point_impl(locale_ref) -> wchar_t;
}  // namespace detail
FMT_END_NAMESPACE
