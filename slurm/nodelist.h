// Slurm hostlist expressions (SLURM_JOB_NODELIST, `scontrol show hostnames`) and the
// compressed per-node task counts of SLURM_TASKS_PER_NODE.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringpilot::slurm {

/// Upper bound on the hosts one expression may expand to. Real allocations are far
/// smaller; the bound keeps a typo such as `n[1-999999999]` from exhausting memory.
inline constexpr std::size_t kMaxExpandedHosts = 1u << 20;

/// Expands a Slurm hostlist expression into host names, in Slurm's order.
///
/// Grammar: a comma-separated list of host patterns; a pattern is text with zero or more
/// bracket groups `[a,b-c,...]` of decimal numbers and ascending ranges. Several groups in
/// one pattern expand as a cartesian product, the leftmost group varying slowest
/// (`a[1-2]-ib[3-4]` -> a1-ib3 a1-ib4 a2-ib3 a2-ib4). A range keeps the width of its lower
/// bound, so zero padding survives (`gpu[08-10]` -> gpu08 gpu09 gpu10).
///
/// Throws std::invalid_argument naming the list and the 1-based character position for an
/// empty list or element, an unterminated or nested `[`, a stray `]`, an empty or
/// non-numeric bracket item, a descending range (`n[3-1]`), or more than
/// kMaxExpandedHosts hosts.
std::vector<std::string> ExpandNodelist(const std::string& list);

/// Expands SLURM_TASKS_PER_NODE / SLURM_STEP_TASKS_PER_NODE (`2(x3),1` -> 2 2 2 1): one
/// entry per node, in node-id order. Throws std::invalid_argument naming the value and
/// position when it is empty or malformed, or a count is not positive.
std::vector<int> ExpandTasksPerNode(const std::string& spec);

}  // namespace ringpilot::slurm
