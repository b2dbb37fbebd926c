// Prometheus text exposition format 0.0.4: name rules, escaping and number formatting.
//
// Reference: https://prometheus.io/docs/instrumenting/exposition_formats/
// Every function here is pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ringpilot::metrics {

/// Content-Type of a text exposition (what GET /metrics answers with).
inline constexpr const char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

/// True when `name` matches [a-zA-Z_:][a-zA-Z0-9_:]* (the metric-name rule).
bool IsValidMetricName(std::string_view name);

/// True when `name` matches [a-zA-Z_][a-zA-Z0-9_]* and does not start with "__"
/// (names with that prefix are reserved for Prometheus itself).
bool IsValidLabelName(std::string_view name);

/// True when `text` is well-formed UTF-8 (label values and HELP must be).
bool IsValidUtf8(std::string_view text);

/// Appends a label value escaped for the text format: `\` -> `\\`, `"` -> `\"`,
/// newline -> `\n`. Everything else is copied byte for byte.
void AppendEscapedLabelValue(std::string& out, std::string_view value);

/// Appends HELP text escaped for the text format: `\` -> `\\`, newline -> `\n`.
void AppendEscapedHelp(std::string& out, std::string_view help);

/// Appends a sample value: `+Inf`, `-Inf`, `NaN`, otherwise the shortest decimal
/// form that parses back to exactly the same double (e.g. `0.1`, `1e+21`, `-0`).
void AppendValue(std::string& out, double value);

/// Appends an unsigned integer in decimal (bucket and observation counts).
void AppendValue(std::string& out, std::uint64_t value);

/// Convenience wrappers that return a new string.
std::string FormatValue(double value);
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);

}  // namespace ringpilot::metrics
