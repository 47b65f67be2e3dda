// SPDX-License-Identifier: Apache-2.0
// Overloaded{lambdas...}: one visitor from several lambdas, for std::visit over a variant.
#pragma once

namespace moebench {

template <class... F>
struct Overloaded : F... {
    using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace moebench
