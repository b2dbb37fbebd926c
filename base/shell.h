// POSIX shell quoting for command lines that are logged, rendered into scripts, or run
// through `sh -c` on other hosts.
#pragma once

#include <string>
#include <vector>

namespace ringpilot::base {

/// `word` single-quoted for a POSIX shell ('it'\''s'), always quoted.
std::string ShellSingleQuote(const std::string& word);

/// `argv` as one line a POSIX shell would split back into the same words: words of safe
/// characters ([A-Za-z0-9_-./:=,+@%]) stay bare, others are single-quoted.
std::string ShellJoin(const std::vector<std::string>& argv);

}  // namespace ringpilot::base
