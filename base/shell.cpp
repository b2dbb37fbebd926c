#include "base/shell.h"

namespace ringpilot::base {
namespace {

bool IsShellSafe(const std::string& word) {
  if (word.empty()) return false;
  for (const char c : word) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string("_-./:=,+@%").find(c) != std::string::npos;
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string ShellSingleQuote(const std::string& word) {
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ShellJoin(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) {
    if (!out.empty()) out += ' ';
    out += IsShellSafe(word) ? word : ShellSingleQuote(word);
  }
  return out;
}

}  // namespace ringpilot::base
