#include "worker/census_writer.hpp"

namespace comfy::worker {

CensusWriter::CensusWriter(CensusSlot& slot, std::uint32_t generation) : slot_(slot), writer_(slot.census) {
    record_.generation = generation;
    publish();
}

void CensusWriter::beat() noexcept {
    // Relaxed: the supervisor only compares successive values; no data rides on it.
    slot_.heartbeat.store(++beats_, std::memory_order_relaxed);
}

}  // namespace comfy::worker
