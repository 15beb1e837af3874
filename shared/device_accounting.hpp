#pragma once
// The simulated device's machine-wide accounting. The simulated device stands for a GPU,
// which every participant shares: its table (a sealed memfd the supervisor creates once and
// hands to every participant, writable) holds one row per participant slot, and "used" is
// the sum over the rows, as the CUDA driver reports device-wide use on Linux. It exists
// only for the simulated device; a real device has no table.
//
// The one rule for which rows count: a row's bytes count when its participant record (the
// supervisor's, read-only to participants) is in a live state (spawning, ready, busy or
// draining) and the row carries the record's generation. A row left by an earlier life of
// the slot does not count, nor does one whose participant is empty, dead or failed: a
// dead process's allocations went with it. A running worker always counts: the supervisor
// publishes its generation and a live state before starting it, and marks it dead or
// failed only after it has exited.
//
// Rows are two plain atomics, not a seqlock: there is no record a stopped writer can
// leave unreadable. A participant that writes garbage into a row can make the simulated
// device look full, as a process can fill a real GPU; docs/SECURITY.md says so. Sums
// saturate at UINT64_MAX: a row can claim anything, and a wrapped sum would lie.

#include "shared/records.hpp"
#include "shared/segment_layout.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace comfy {

struct alignas(ipc::kCacheLine) DeviceUseRow {
    // The generation of the life that wrote used_bytes; stored after it, with release.
    std::atomic<std::uint32_t> generation;
    std::atomic<std::uint64_t> used_bytes;
};

inline std::size_t device_table_bytes(std::uint32_t participants) { return participants * sizeof(DeviceUseRow); }

// Typed access to a mapped table of `participants` rows.
class DeviceTable {
public:
    DeviceTable() = default;
    DeviceTable(std::byte* base, std::uint32_t participants) noexcept
        : rows_(reinterpret_cast<DeviceUseRow*>(base)), participants_(participants) {}
    DeviceUseRow& row(std::uint32_t slot) const noexcept { return rows_[slot]; }
    std::uint32_t participants() const noexcept { return participants_; }

private:
    DeviceUseRow* rows_ = nullptr;
    std::uint32_t participants_ = 0;
};

// Spawning, ready, busy or draining: a process may be running and holding memory.
bool is_live_participant_state(std::uint8_t state) noexcept;

// A running sum by the rule above, for a reader that reads the records itself (comfyctl
// sums the census reports it shows; the supervisor its own view of its workers).
class DeviceUseTally {
public:
    // Bytes claimed by the life `generation` of the participant `participant` describes.
    void add(const ParticipantRecord& participant, std::uint32_t generation, std::uint64_t bytes) noexcept;

    // The sum over what was added; what is known to be in use.
    std::uint64_t counted_bytes() const noexcept { return counted_bytes_; }

private:
    std::uint64_t counted_bytes_ = 0;
};

// The device's "used" for a participant's allocation decisions (its allocate() re-checks
// it after publishing its own use): the rule over every row of `table`, the participant
// records read from `segment`. A participant record that stays mid-write through a
// seqlock's default retries (the supervisor stopped inside a write) makes the device count
// as full: never overcommit.
std::uint64_t simulated_device_used(const SegmentView& segment, const DeviceTable& table);
// The device's total less that "used", never below zero: what the driver would report free.
std::uint64_t simulated_device_free(const SegmentView& segment, const DeviceTable& table);

}  // namespace comfy
