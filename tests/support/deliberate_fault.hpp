#pragma once
// A write that must fault, in a process that must die of it (a hostile participant, a
// test's forked writer into a read-only mapping): the process is to end killed by SIGSEGV,
// as a compromised pack would. Under a sanitizer build the runtime's handler would take
// the fault for a bug of ours, report it and exit 1 (in a forked test child, Catch's
// handler reports it first, then hands it to the runtime's), so SIGSEGV goes back to the
// default just before the write. In a plain build this changes nothing but Catch's report.

#include <signal.h>

#include <cstdint>

namespace comfy::test {

// Writes one word at `address`, as a stray pointer would; returns only when the write did
// not fault.
inline void write_expecting_fault(void* address) {
    ::signal(SIGSEGV, SIG_DFL);
    *static_cast<volatile std::uint64_t*>(address) = 0xDEADBEEFDEADBEEFull;
}

}  // namespace comfy::test
