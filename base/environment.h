// Process environment helpers: a copy of
// `environ` as a map (so the logic that reads it stays pure and testable) and the PATH
// lookup that execvp would do.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ringpilot::base {

/// Environment variables by name, sorted (a copy of `environ`, or a test's own map).
using Environment = std::map<std::string, std::string>;

/// A copy of this process's environment.
Environment CurrentEnvironment();

/// The value of `name` in `env`, or `fallback` when it is unset or empty.
std::string Lookup(const Environment& env, const std::string& name, const std::string& fallback);

/// `NAME=VALUE` strings for execve, in name order.
std::vector<std::string> ToEnvStrings(const Environment& env);

/// The executable execvp would run for `name` with `path_var` as PATH: `name` itself when it
/// contains '/', else the first `DIR/name` on the list that is an executable regular file.
/// Returns "" when there is none.
std::string ResolveExecutable(const std::string& name, const std::string& path_var);

/// Absolute path of the running executable (from /proc/self/exe); "" when unknown.
std::string SelfExecutablePath();

/// This machine's host name (gethostname); "" when unknown.
std::string HostName();

}  // namespace ringpilot::base
