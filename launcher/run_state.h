// Whether the launcher that RUN_DIR/launcher.json names still runs. The record itself (its
// states, fields, writer and reader) is history/launcher_record.h; the launcher's names for
// it below are that file's.
#pragma once

#include "history/launcher_record.h"

namespace ringpilot::launcher {

using history::LauncherRecord;
using history::RunState;

/// Whether the process of `record` still runs, seen from this host: alive, gone (no such
/// process, or the pid now belongs to another program), or elsewhere (it runs on another
/// host, where its pid means nothing to this one).
enum class Liveness { kAlive, kGone, kElsewhere };
Liveness CheckLauncher(const LauncherRecord& record);

}  // namespace ringpilot::launcher
