// RUN_DIR/run.lock: one `ringpilot run` per run directory. The launcher holds an exclusive
// flock(2) on the file for its whole life and records in it who holds it (pid, host, the
// process's start time, when it took the lock), so that a second launcher on the same
// directory stops before it touches anything, and `status`, `logs` and `stop` can say who
// runs the directory. The record is checked as well as the flock: on a shared filesystem
// whose flock is local to each host (NFS local_lock, Lustre localflock) a launcher on
// another host holds no lock this host can see. A record of a process that no longer runs
// on this host (a launcher killed with SIGKILL) is stale and is taken over. The file is
// never renamed or removed (the flock is on its inode); an empty file is a free lock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace ringpilot::history {

/// RUN_DIR/run.lock.
std::string RunLockPath(const std::string& run_dir);

/// What run.lock records about its holder.
struct RunLockRecord {
  int pid = 0;
  std::string host;     ///< base::HostName of the holder
  std::string started;  ///< when it took the lock (base::FormatLogTime)
  /// The holder's start in clock ticks since boot (/proc/PID/stat field 22): with the pid,
  /// tells the holder from a later process that got its pid. 0 when unknown.
  uint64_t process_start = 0;
  std::string command = "ringpilot run";
};

/// "ringpilot run (pid N on HOST since T)".
std::string DescribeHolder(const RunLockRecord& record);

/// The JSON text run.lock holds, and back (nullopt for anything else, an empty file too).
std::string RunLockJson(const RunLockRecord& record);
std::optional<RunLockRecord> ParseRunLock(const std::string& text);

/// How the lock stands, as far as this host can tell from the record alone (a reader never
/// takes the flock: it would make a launcher starting that instant see the directory busy).
enum class LockState {
  kFree,       ///< no record: no launcher holds it (or it released it)
  kHeld,       ///< the recorded process runs on this host
  kStale,      ///< the recorded process is gone from this host: the next launcher takes over
  kElsewhere,  ///< recorded by a launcher on another host, whose processes this one cannot see
};
const char* ToString(LockState state);

struct RunLockView {
  LockState state = LockState::kFree;
  std::optional<RunLockRecord> record;  ///< absent when kFree
};

/// Reads RUN_DIR/run.lock. Never throws; a missing or unreadable file is kFree.
RunLockView ReadRunLock(const std::string& run_dir);

/// Whether `record`'s process still runs on this host (same pid, same start time).
bool HolderAlive(const RunLockRecord& record);

/// Another launcher holds the directory. what(): "RUN_DIR is in use by ringpilot run (pid N
/// on HOST since T); ringpilot stop it first".
class RunDirBusy : public std::runtime_error {
 public:
  RunDirBusy(const std::string& run_dir, const std::optional<RunLockRecord>& holder);
  const std::optional<RunLockRecord>& holder() const { return holder_; }

 private:
  std::optional<RunLockRecord> holder_;
};

/// The exclusive lock of one run directory, held until destroyed (which clears the record
/// and releases the flock). Its descriptor is close-on-exec: mpirun and the ranks never
/// hold it, so it ends with the launcher, even a launcher killed with SIGKILL.
class RunDirLock {
 public:
  /// Takes RUN_DIR's lock (RUN_DIR must exist). Throws RunDirBusy when another launcher
  /// holds it (the flock is taken, or the record names a live process on this host, or any
  /// process on another host), having changed nothing; base::FileError when the lock file
  /// cannot be opened or written. A stale record is taken over, and `*notice` (when not
  /// null) gets one line saying so; otherwise it is left empty.
  static std::unique_ptr<RunDirLock> Acquire(const std::string& run_dir, std::string* notice);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

  const RunLockRecord& record() const { return record_; }

 private:
  RunDirLock(int fd, RunLockRecord record) : fd_(fd), record_(std::move(record)) {}
  int fd_ = -1;
  RunLockRecord record_;
};

}  // namespace ringpilot::history
