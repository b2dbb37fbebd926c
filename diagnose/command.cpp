#include "diagnose/command.h"

#include <cstdlib>
#include <iostream>
#include <memory>

#include "diagnose/diagnose.h"

namespace ringpilot::diagnose {

void AddDiagnoseCommand(CLI::App& app) {
  auto args = std::make_shared<DiagnoseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "diagnose",
      "Report on a run (live or finished; a launch.command program's too, from its NCCL "
      "records): straggler ranking, per-rank step time, exposed communication, bus bandwidth "
      "vs expected, hangs, NCCL transports; merges the per-rank traces into RUN_DIR/trace.json");
  cmd->add_option("RUN_DIR", args->run_dir, "Run directory (holds summary.json and logs/)")
      ->required();
  cmd->add_flag("--json", args->json, "Print the report as one JSON object");
  cmd->add_option("--svg-dir", args->svg_dir,
                  "Also write busbw-vs-size.svg and step-time-per-rank.svg into DIR")
      ->type_name("DIR");
  cmd->callback([args] {
    const int status = RunDiagnose(*args, std::cout, std::cerr);
    std::cout.flush();
    std::exit(status);
  });
}

int RunDiagnose(const DiagnoseArgs& args, std::ostream& out, std::ostream& err) {
  Diagnosis d;
  try {
    d = Analyze(LoadRun(args.run_dir, args.infiniband_dir));
  } catch (const history::RecordError& e) {  // a DiagnoseError, or a record's
    err << "ringpilot diagnose: " << e.what() << "\n";
    return 2;
  }
  TraceMerge trace;
  try {
    trace = MergeTraces(args.run_dir);
  } catch (const DiagnoseError& e) {
    err << "ringpilot diagnose: " << e.what() << "\n";
    return 1;
  }
  for (const std::string& w : trace.warnings) err << "ringpilot diagnose: warning: " << w << "\n";
  std::vector<std::string> plots;
  if (!args.svg_dir.empty()) {
    try {
      plots = WriteDiagnosisSvgs(d, args.svg_dir);
    } catch (const std::exception& e) {
      err << "ringpilot diagnose: " << e.what() << "\n";
      return 1;
    }
  }
  if (args.json) {
    nlohmann::json j = DiagnosisToJson(d);
    j["plots"] = plots;
    j["trace"] = trace.path.empty() ? nlohmann::json(nullptr) : nlohmann::json(trace.path);
    out << j.dump(2) << "\n";
  } else {
    out << RenderDiagnosisText(d);
    for (const std::string& p : plots) out << "plot: " << p << "\n";
    if (!trace.path.empty()) {
      out << "trace: " << trace.path << " (" << trace.ranks << " rank(s), " << trace.events
          << " events; open in https://ui.perfetto.dev or chrome://tracing)\n";
    }
  }
  return 0;
}

}  // namespace ringpilot::diagnose
