#pragma once
// The report as aligned tables for a terminal, sizes in binary units.

#include "supervisor/ctl/segment_report.hpp"

#include <cstdint>
#include <string>

namespace comfy::ctl {

// A title line, then one row per participant (ages measured at `now_ms`, wall clock).
std::string workers_text(const SegmentReport& report, std::uint64_t now_ms);

// A title line, the device line, then one row per participant's census.
std::string census_text(const SegmentReport& report);

// The machine-wide ledger: one row per model held on a device, most recent load first.
std::string ledger_text(const SegmentReport& report);

}  // namespace comfy::ctl
