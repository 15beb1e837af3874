#pragma once
// The arbiter at the configured maximum of participants (1,023 packs plus the host), pure
// core, microseconds per sample (scripts/bench arbitration):
//   decide_siblings_p1024_l65536_us  one admission that ends in asking the idle siblings
//                                    for a partial release, over a ledger of 65,536 entries
//   owner_death_m8192_us             the death of an owner of 8,192 of those entries

#include <vector>

namespace comfy::bench {

std::vector<double> measure_decide_siblings();
std::vector<double> measure_owner_death();

}  // namespace comfy::bench
