// Process environment helpers shared by `ringpilot run` and `ringpilot exec`: a copy of
// `environ` as a map (so the logic that reads it stays pure and testable) and the PATH
// lookup that execvp would do.
#pragma once

#include <string>
#include <vector>

#include "slurm/slurm_env.h"

namespace ringpilot::launcher {

/// Environment variables by name, sorted (the same type the Slurm parser reads).
using Environment = slurm::Environment;

/// A copy of this process's environment.
Environment CurrentEnvironment();

/// `NAME=VALUE` strings for execve, in name order.
std::vector<std::string> ToEnvStrings(const Environment& env);

/// The executable execvp would run for `name` with `path_var` as PATH: `name` itself when it
/// contains '/', else the first `DIR/name` on the list that is an executable regular file.
/// Returns "" when there is none.
std::string ResolveExecutable(const std::string& name, const std::string& path_var);

/// Absolute path of the running executable (from /proc/self/exe); "" when unknown.
std::string SelfExecutablePath();

/// Directory part of `path` ("" when it has none).
std::string ParentDirectory(const std::string& path);

}  // namespace ringpilot::launcher
