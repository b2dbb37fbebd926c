// Number formatting for the reports the commands print (diagnose, status, commbench).
#pragma once

#include <string>

namespace ringpilot::base {

/// `v` with exactly `decimals` digits after the point, as printf's "%.*f" (any magnitude;
/// "nan", "inf" as printf writes them). Thread-safe, locale-independent only in the "C"
/// locale the commands run in.
std::string FormatFixed(double v, int decimals);

}  // namespace ringpilot::base
