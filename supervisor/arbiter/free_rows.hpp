#pragma once
// The unused rows of the ledger's table, handed out lowest first (the segment's table stays
// packed at the front, and comfyctl and the tests rely on it). Rows from never_used_ up
// were never taken; freed_ is a min-heap of the rows below it given back since, so taking
// and giving back a row both cost O(log n) however many an owner's death gives back.

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace comfy::arbiter {

class FreeRows {
public:
    // The heap is sized once, copies too: growing it step by step while an owner's
    // thousands of rows come back made the allocator consolidate all the nodes just freed
    // at every step.
    explicit FreeRows(std::size_t capacity) : capacity_(capacity) { freed_.reserve(capacity); }
    FreeRows(const FreeRows& other) : capacity_(other.capacity_), never_used_(other.never_used_) {
        freed_.reserve(capacity_);
        freed_.assign(other.freed_.begin(), other.freed_.end());
    }
    FreeRows& operator=(const FreeRows& other) {
        if (this != &other) *this = FreeRows(other);
        return *this;
    }
    FreeRows(FreeRows&&) noexcept = default;
    FreeRows& operator=(FreeRows&&) noexcept = default;

    // The lowest unused row; the caller has checked that one is left.
    std::size_t take() {
        // Every freed row lies below never_used_, so the heap's top, when there is one, is
        // the lowest unused row.
        if (freed_.empty()) return never_used_++;
        std::pop_heap(freed_.begin(), freed_.end(), std::greater<>());
        const std::size_t row = freed_.back();
        freed_.pop_back();
        return row;
    }

    void give_back(std::size_t row) {
        freed_.push_back(row);
        std::push_heap(freed_.begin(), freed_.end(), std::greater<>());
    }

private:
    std::size_t capacity_;
    std::size_t never_used_ = 0;
    std::vector<std::size_t> freed_;
};

}  // namespace comfy::arbiter
