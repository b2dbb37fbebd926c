// Private to diagnose/: what the training report (report.cpp) and the program report
// (program_report.cpp) print and emit alike.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diagnose/diagnose.h"

namespace ringpilot::diagnose::detail {

/// `v` with `digits` decimals ("%.*f").
std::string Fmt(double v, int digits);

/// Rows as a left-aligned table: `indent`, then the cells, two spaces between columns;
/// no trailing spaces.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows,
                const std::string& indent = "  ");

/// One row of a bus bandwidth table in `--json` (comm.collectives, program.collectives).
nlohmann::json CollectiveJson(const CollectiveRow& row);

}  // namespace ringpilot::diagnose::detail
