// A configuration given as changes to another, as `ktune sweep --params` takes it: the op's
// parameter parser over a base configuration.
#pragma once

#include <string_view>

#include "templates/op.hpp"

namespace ktune {

/// The name=value items of `text` over `base`: tunables the text does not name keep base's
/// values (a user's change to a default, e.g. "block_m=32"); throws InvalidArgument with the
/// messages of Op::parse_params (an unknown name, a value outside its list, a name given twice).
Params parse_params_over(const Op& op, std::string_view text, const Params& base);

}  // namespace ktune
