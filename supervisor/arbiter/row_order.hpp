#pragma once
// An ordered set of (key, row) pairs that also keeps each row's place in it, so that a
// row leaves the order without a search. An owner's death retires thousands of rows at
// once: each node stays behind as a tombstone (no rebalance then), skipped by walkers
// because its table row is empty, and goes when the row is next inserted. So the set
// holds at most one node per row. A copy points its places into its own set (replay and
// the benchmarks copy arbiters).

#include <cstddef>
#include <set>
#include <utility>
#include <vector>

namespace comfy::arbiter {

template <class Key>
class RowOrder {
public:
    using Set = std::set<std::pair<Key, std::size_t>>;

    explicit RowOrder(std::size_t capacity) : at_(capacity), retired_(capacity, false) {}
    RowOrder(const RowOrder& other) : set_(other.set_), at_(other.at_.size()), retired_(other.retired_) {
        // The copy holds the same rows in the same sequence.
        for (auto it = set_.begin(); it != set_.end(); ++it) at_[it->second] = it;
    }
    RowOrder& operator=(const RowOrder& other) {
        if (this != &other) *this = RowOrder(other);
        return *this;
    }
    // A moved set keeps its nodes, so the places stay right.
    RowOrder(RowOrder&&) noexcept = default;
    RowOrder& operator=(RowOrder&&) noexcept = default;

    // `row` must not be in the order already (a retired row's tombstone goes now).
    void insert(const Key& key, std::size_t row) {
        if (retired_[row]) {
            set_.erase(at_[row]);
            retired_[row] = false;
        }
        at_[row] = set_.insert({key, row}).first;
    }
    // `row` must be in the order.
    void erase(std::size_t row) { set_.erase(at_[row]); }
    // `row` must be in the order; its node stays as a tombstone until the row is reused.
    void retire(std::size_t row) { retired_[row] = true; }
    const Set& set() const noexcept { return set_; }

private:
    Set set_;
    std::vector<typename Set::const_iterator> at_;
    std::vector<bool> retired_;
};

}  // namespace comfy::arbiter
