#pragma once
// What a log line is about, as fields of its own in the systemd journal, so that
// `journalctl COMFY_PACK=sdxl` finds every line about a pack, its output included
// (docs/OPERATIONS.md, "Logs"). Only when stderr is the journal: elsewhere the line's text
// says the same for a person.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace comfy::supervisor {

// Each one empty or absent when the line is not about it; such a field is left out.
struct LogFields {
    std::string pack;                         // COMFY_PACK: the pack (or "host") the line is about
    std::optional<std::uint32_t> slot;        // COMFY_SLOT: its slot in the segment
    std::optional<std::uint32_t> generation;  // COMFY_GENERATION: its life
    std::string model;                        // COMFY_MODEL: the model's name, as in the ledger
    std::optional<std::uint64_t> model_id;    // COMFY_MODEL_ID: its owner's id for it
    std::string event;                        // COMFY_EVENT: the event journal's kind, or the log's topic
};

// One journal entry as "FIELD=value" strings: MESSAGE (the line as a terminal shows it,
// without the time and level, which the journal keeps itself), PRIORITY (err, warning,
// info: 3, 4, 6), SYSLOG_IDENTIFIER (`identifier`, as the journal names a service's stream
// lines), then the COMFY_ fields `fields` has.
std::vector<std::string> journal_fields(int priority, std::string_view message, std::string_view identifier,
                                        const LogFields& fields);

// Where the journal takes entries (systemd's native protocol).
inline constexpr const char* kJournalSocket = "/run/systemd/journal/socket";

// Sends one entry to the journal's socket (sd_journal_sendv); false when it could not, so
// that the caller writes the line to stderr instead. libsystemd reports a missing socket as
// success: the caller sends only where kJournalSocket is.
bool send_to_journal(const std::vector<std::string>& fields);

}  // namespace comfy::supervisor
