#pragma once
// The ledger rows changed since the supervisor last published them. Marking a row is O(1)
// (a flag per row and a list), so that an owner's death marking thousands of rows costs
// no tree of its own; taking them sorts only the rows marked.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace comfy::arbiter {

class ChangedRows {
public:
    // The list is sized once, copies too: growing it step by step while an owner's
    // thousands of rows are freed made the allocator consolidate all their freed nodes at
    // every step.
    explicit ChangedRows(std::size_t capacity) : marked_(capacity, false) { rows_.reserve(capacity); }
    ChangedRows(const ChangedRows& other) : marked_(other.marked_) {
        rows_.reserve(marked_.size());
        rows_.assign(other.rows_.begin(), other.rows_.end());
    }
    ChangedRows& operator=(const ChangedRows& other) {
        if (this != &other) *this = ChangedRows(other);
        return *this;
    }
    ChangedRows(ChangedRows&&) noexcept = default;
    ChangedRows& operator=(ChangedRows&&) noexcept = default;

    void insert(std::size_t row) {
        if (marked_[row]) return;
        marked_[row] = true;
        rows_.push_back(row);
    }

    // The rows marked, ascending, each once; none are marked afterwards.
    std::vector<std::size_t> take() {
        for (const auto row : rows_) marked_[row] = false;
        std::sort(rows_.begin(), rows_.end());
        std::vector<std::size_t> taken(rows_.begin(), rows_.end());
        rows_.clear();  // keeps its capacity
        return taken;
    }

private:
    std::vector<bool> marked_;
    std::vector<std::size_t> rows_;
};

}  // namespace comfy::arbiter
