// Small file and text helpers shared by the doctor checks (internal to launcher/doctor*).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "doctor/doctor.h"

namespace ringpilot::doctor::doctor_util {

/// The common "does a GPU check apply" gate (doctor_gpu.cpp): true with *OUT set (SKIP, or
/// FAIL for the driver and visibility checks with `--device cuda` and no GPU) when it does not.
bool GpuGate(const std::string& name, const DoctorEnv& env, const DriverInfo& drv, DoctorDevice dev,
             bool needs_nvml, CheckResult* out);

/// VARS[NAME], or FALLBACK when unset or empty.
inline std::string Lookup(const Environment& vars, const char* name, const std::string& fallback) {
  const auto it = vars.find(name);
  return it == vars.end() || it->second.empty() ? fallback : it->second;
}

/// The trainer CheckTrainerLibraries inspects: $RINGPILOT_TRAINER, else ringpilot-trainer
/// next to the ringpilot executable.
inline std::string TrainerPath(const DoctorEnv& env) {
  return Lookup(env.vars, "RINGPILOT_TRAINER",
                (env.self_dir.empty() ? std::string(".") : env.self_dir) + "/ringpilot-trainer");
}

/// The file's contents with surrounding whitespace removed; "" when unreadable.
inline std::string ReadTrimmed(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string s = buf.str();
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

/// The last non-empty line of TEXT (a command's output), for one-line messages.
inline std::string LastLine(const std::string& text) {
  std::string last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) last = line;
  }
  return last;
}

/// The file's raw bytes; "" when unreadable.
inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

/// Names of the entries of DIR, sorted; empty when it does not exist.
inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

/// ncclGetVersion's number as "2.21.5": MAJOR*10000 + MINOR*100 + PATCH since 2.9
/// (MAJOR*1000 + MINOR*100 + PATCH before).
inline std::string NcclVersionText(int v) {
  if (v >= 10000) {
    return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
           std::to_string(v % 100);
  }
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 100) + "." +
         std::to_string(v % 100);
}

/// Bytes as "16 MiB" / "1.5 GiB".
inline std::string FormatBytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream out;
  out.precision(v == static_cast<double>(static_cast<std::uint64_t>(v)) ? 0 : 1);
  out << std::fixed << v << " " << units[u];
  return out.str();
}

}  // namespace ringpilot::doctor::doctor_util
