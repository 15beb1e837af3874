#include "supervisor/lifecycle/keep_list.hpp"

#include <utility>

namespace comfy::supervisor {

std::string KeepList::add(std::uint64_t correlation, const AdmissionKeep& keep) {
    if (correlation != correlation_) {
        correlation_ = correlation;
        keys_.clear();
    }
    if (keys_.size() + keep.count > limit_) {
        return "asked to keep more models loaded than the ledger holds (" + std::to_string(limit_) + ")";
    }
    keys_.insert(keys_.end(), keep.keys, keep.keys + keep.count);
    return {};
}

std::vector<std::uint64_t> KeepList::take(std::uint64_t correlation, std::uint32_t count, std::string& error) {
    auto keys = std::exchange(keys_, {});
    if (correlation != correlation_) keys.clear();  // gathered for another request
    if (keys.size() != count) {
        error = "sent an admission_request keeping " + std::to_string(count) +
                " models after admission_keep messages naming " + std::to_string(keys.size());
        return {};
    }
    return keys;
}

}  // namespace comfy::supervisor
