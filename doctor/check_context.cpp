#include "doctor/check_context.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "base/environment.h"

namespace ringpilot::doctor {

std::string TrainerPath(const DoctorEnv& env) {
  return base::Lookup(
      env.vars, "RINGPILOT_TRAINER",
      (env.self_dir.empty() ? std::string(".") : env.self_dir) + "/ringpilot-trainer");
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string ReadTrimmed(const std::string& path) {
  std::string s = ReadBytes(path);
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

}  // namespace ringpilot::doctor
