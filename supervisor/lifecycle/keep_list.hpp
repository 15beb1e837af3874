#pragma once
// One participant's keep_loaded list in the making: the keys of its admission_keep messages,
// gathered until the admission_request with the same correlation arrives. A participant is
// not trusted, so the list is bounded (no load can keep more models than the ledger holds)
// and a request must name exactly as many models as its messages carried.

#include "shared/message_payloads.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace comfy::supervisor {

class KeepList {
public:
    explicit KeepList(std::size_t limit) : limit_(limit) {}

    // Adds one message's keys. Keys kept for another correlation are dropped first (that
    // request never came). An error line when the list would pass the limit.
    std::string add(std::uint64_t correlation, const AdmissionKeep& keep);

    // The whole list for the request with this correlation, which names `count` models;
    // the list is empty again afterwards. Sets `error` (and returns nothing) when the
    // messages named another number.
    std::vector<std::uint64_t> take(std::uint64_t correlation, std::uint32_t count, std::string& error);

    // A new life of the participant starts with nothing kept.
    void clear() { keys_.clear(); }

private:
    std::size_t limit_;
    std::uint64_t correlation_ = 0;
    std::vector<std::uint64_t> keys_;
};

}  // namespace comfy::supervisor
