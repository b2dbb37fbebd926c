#include "trainer/checkpoint/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "base/files.h"

namespace ringpilot::trainer::checkpoint {

namespace {

std::string StepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return buf;
}

void WriteFileSynced(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) throw CheckpointError(path + ": write failed");
  base::FsyncPath(path);
}

}  // namespace

CheckpointStore::CheckpointStore(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {}

static std::vector<std::string> StepDirs(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& n : base::ListDir(dir)) {
    if (n.rfind("step-", 0) == 0 && base::IsDirectory(dir + "/" + n)) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// Streams `archive` into `path` through our own writes. LibTorch's save_to(path) finishes
// the zip file in its writer's destructor and throws there when a write came up short (a
// full disk): std::terminate, and a rank that dies without a word. The writer must never
// see a short write, so a failed write is remembered, later ones are skipped, and the
// error is raised here once the writer is done.
void WriteArchive(torch::serialize::OutputArchive& archive, const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw base::FileError(path + ": cannot create: " + std::strerror(errno));
  }
  int error = 0;
  archive.save_to([&](const void* data, size_t n) -> size_t {
    const auto* p = static_cast<const char*>(data);
    for (size_t done = 0; error == 0 && done < n;) {
      const ssize_t w = ::write(fd, p + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error = w < 0 ? errno : EIO;
        break;
      }
      done += static_cast<size_t>(w);
    }
    return n;
  });
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) throw base::FileError(path + ": cannot write: " + std::strerror(error));
}

}  // namespace

CheckpointInfo CheckpointStore::Save(int64_t step, int world_size, const std::string& job,
                                     const std::vector<NamedTensor>& tensors) const {
  const std::string final_path = dir_ + "/" + StepName(step);
  const std::string tmp = dir_ + "/.tmp-" + StepName(step) + "-" + std::to_string(::getpid());
  try {
    base::MakeDirs(dir_);
    base::RemoveTree(tmp);
    base::MakeDirs(tmp);
    torch::serialize::OutputArchive archive;
    for (const auto& nt : tensors) archive.write(nt.name, nt.tensor.detach().cpu());
    archive.write("ringpilot/step", at::tensor({step}, at::kLong));
    const std::string state = tmp + "/" + kStateFile;
    WriteArchive(archive, state);
    WriteFileSynced(tmp + "/" + kManifestFile,
                    ManifestJson(tmp, {kStateFile}, step, world_size, job));
    base::FsyncPath(tmp);
    // A checkpoint of the same step from an earlier attempt is replaced whole.
    if (base::Exists(final_path)) {
      const std::string old = tmp + ".old";
      base::Rename(final_path, old);
      base::Rename(tmp, final_path);
      base::RemoveTree(old);
    } else {
      base::Rename(tmp, final_path);
    }
    base::FsyncPath(dir_);
  } catch (const c10::Error& e) {
    base::RemoveTree(tmp);
    throw CheckpointError("checkpoint " + final_path + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    try {
      base::RemoveTree(tmp);
    } catch (...) {
    }
    throw CheckpointError("checkpoint " + final_path + ": " + e.what());
  }

  // Prune: keep the newest `keep_` complete checkpoints.
  auto names = StepDirs(dir_);
  while (static_cast<int>(names.size()) > keep_) {
    base::RemoveTree(dir_ + "/" + names.front());
    names.erase(names.begin());
  }
  return {step, world_size, final_path};
}

std::vector<std::string> CheckpointStore::Tidy(double attempt_start_unix) const {
  std::vector<std::string> lines;
  const auto remove = [&](const std::string& name, const std::string& why) {
    try {
      base::RemoveTree(dir_ + "/" + name);
      lines.push_back("removed " + dir_ + "/" + name + " (" + why + ")");
    } catch (const std::exception& e) {
      lines.push_back("cannot remove " + dir_ + "/" + name + " (" + why + "): " + e.what());
    }
  };
  // corrupt-step-<8 digits>-<unix time>: by time, then name; the newest last.
  std::vector<std::pair<long long, std::string>> corrupt;
  for (const std::string& name : base::ListDir(dir_)) {
    if (name.rfind(".tmp-step-", 0) == 0) {
      struct stat st {};
      if (::lstat((dir_ + "/" + name).c_str(), &st) != 0) continue;
      const double mtime = static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
      if (mtime < attempt_start_unix) remove(name, "an unfinished save of an earlier attempt");
    } else if (name.rfind("corrupt-step-", 0) == 0 && base::IsDirectory(dir_ + "/" + name)) {
      const std::size_t dash = name.rfind('-');
      corrupt.emplace_back(std::atoll(name.c_str() + dash + 1), name);
    }
  }
  std::sort(corrupt.begin(), corrupt.end());
  const std::size_t keep = static_cast<std::size_t>(std::max(keep_, 0));
  for (std::size_t i = 0; i < corrupt.size(); ++i) {
    const std::string& name = corrupt[i].second;
    if (corrupt.size() - i > keep) {
      remove(name, "a corrupt checkpoint; checkpoint.keep " + std::to_string(keep_) +
                       " newer ones are kept");
    } else {
      lines.push_back("kept " + dir_ + "/" + name +
                      " (a corrupt checkpoint set aside; delete it once looked at)");
    }
  }
  return lines;
}

std::vector<std::string> CheckpointStore::StepPaths() const {
  std::vector<std::string> paths;
  for (const std::string& n : StepDirs(dir_)) paths.push_back(dir_ + "/" + n);
  return paths;
}

std::optional<CheckpointInfo> CheckpointStore::FindNewestValid(
    std::vector<std::string>* warnings) const {
  auto names = StepDirs(dir_);
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    const std::string& n = *it;
    try {
      return Verify(dir_ + "/" + n);
    } catch (const CheckpointError& e) {
      // Moved aside, not deleted: a later save of the same step must not overwrite the
      // evidence, and the name no longer matches step-* so scans and pruning skip it.
      const std::string aside =
          dir_ + "/corrupt-" + n + "-" +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count());
      std::string where = "left in place";
      try {
        base::Rename(dir_ + "/" + n, aside);
        where = "moved to " + aside;
      } catch (const std::exception&) {
      }
      if (warnings) warnings->push_back(std::string(e.what()) + "; skipping it (" + where + ")");
    }
  }
  return std::nullopt;
}

std::vector<std::string> CheckpointStore::Load(const CheckpointInfo& info,
                                               const std::vector<NamedTensor>& tensors) const {
  const std::string file = info.path + "/" + kStateFile;
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(file);
  } catch (const c10::Error& e) {
    throw CheckpointError(file + ": cannot load: " + e.what_without_backtrace());
  }
  at::NoGradGuard no_grad;
  std::vector<std::string> absent;
  for (const auto& nt : tensors) {
    at::Tensor value;
    if (!archive.try_read(nt.name, value)) {
      if (nt.optional) {
        absent.push_back(nt.name);
        continue;
      }
      throw CheckpointMismatchError(file + ": has no tensor '" + nt.name +
                                    "' (different model or optimizer?)");
    }
    if (value.sizes() != nt.tensor.sizes()) {
      throw CheckpointMismatchError(file + ": tensor '" + nt.name + "' has shape " +
                                    c10::str(value.sizes()) + ", expected " +
                                    c10::str(nt.tensor.sizes()));
    }
    nt.tensor.detach().copy_(value);
  }
  return absent;
}

}  // namespace ringpilot::trainer::checkpoint
