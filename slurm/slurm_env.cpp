#include "slurm/slurm_env.h"

#include <cctype>
#include <limits>
#include <stdexcept>
#include <string>

#include "slurm/nodelist.h"

namespace ringpilot::slurm {
namespace {

const std::string* Find(const Environment& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// First of `names` that is set, with its name; old Slurm releases used other spellings.
const std::string* FindAny(const Environment& env, std::initializer_list<const char*> names,
                           const char** found_name) {
  for (const char* name : names) {
    if (const std::string* value = Find(env, name)) {
      *found_name = name;
      return value;
    }
  }
  return nullptr;
}

uint64_t ParseUnsigned(const char* name, const std::string& value, uint64_t max) {
  bool ok = !value.empty() && value.size() <= 19;
  for (const char c : value) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  const uint64_t parsed = ok ? std::stoull(value) : 0;
  if (!ok || parsed > max) {
    throw std::invalid_argument(std::string(name) + "='" + value +
                                "': expected a non-negative integer");
  }
  return parsed;
}

int ParseInt(const char* name, const std::string& value) {
  return static_cast<int>(ParseUnsigned(name, value, std::numeric_limits<int>::max()));
}

}  // namespace

std::optional<int> SlurmEnv::LocalTasks() const {
  if (nodeid < 0 || static_cast<std::size_t>(nodeid) >= tasks_per_node.size()) {
    return std::nullopt;
  }
  return tasks_per_node[static_cast<std::size_t>(nodeid)];
}

std::optional<SlurmEnv> ParseSlurmEnv(const Environment& env) {
  const char* name = nullptr;
  const std::string* procid = Find(env, "SLURM_PROCID");
  if (procid == nullptr &&
      FindAny(env, {"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"},
              &name) == nullptr) {
    return std::nullopt;
  }

  SlurmEnv out;
  if (procid != nullptr) {
    out.procid = ParseInt("SLURM_PROCID", *procid);
    const std::string* ntasks = FindAny(env, {"SLURM_NTASKS", "SLURM_NPROCS"}, &name);
    if (ntasks == nullptr) {
      throw std::invalid_argument("SLURM_PROCID is set but SLURM_NTASKS is not");
    }
    out.ntasks = ParseInt(name, *ntasks);
    if (*out.ntasks == 0 || *out.procid >= *out.ntasks) {
      throw std::invalid_argument("SLURM_PROCID=" + *procid + " is not below " + name + "=" +
                                  *ntasks);
    }
  }
  if (const std::string* v = Find(env, "SLURM_LOCALID"))
    out.localid = ParseInt("SLURM_LOCALID", *v);
  if (const std::string* v = Find(env, "SLURM_NODEID")) out.nodeid = ParseInt("SLURM_NODEID", *v);

  if (const std::string* list = FindAny(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}, &name)) {
    try {
      out.nodes = ExpandNodelist(*list);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(name) + ": " + e.what());
    }
  }
  if (const std::string* id = FindAny(env, {"SLURM_JOB_ID", "SLURM_JOBID"}, &name)) {
    out.job_id = ParseUnsigned(name, *id, std::numeric_limits<uint64_t>::max());
  }
  if (const std::string* tasks =
          FindAny(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, &name)) {
    try {
      out.tasks_per_node = ExpandTasksPerNode(*tasks);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(name) + ": " + e.what());
    }
    out.tasks_per_node_var = name;
    if (out.nodeid >= 0 && static_cast<std::size_t>(out.nodeid) >= out.tasks_per_node.size()) {
      throw std::invalid_argument("SLURM_NODEID=" + std::to_string(out.nodeid) + " but " + name +
                                  "='" + *tasks + "' describes only " +
                                  std::to_string(out.tasks_per_node.size()) + " node(s)");
    }
  }
  return out;
}

}  // namespace ringpilot::slurm
