#pragma once
// The report printed when a workload ends: what ran, what restarted, the peak device
// use and each worker's census.

#include "supervisor/ops/workload.hpp"

namespace comfy::supervisor {

void print_summary(const Totals& totals, Bytes device_total, const WorkloadRunner& runner);

}  // namespace comfy::supervisor
