#include "supervisor/ops/log/journal_fields.hpp"

// Where this file sends from says nothing of the line: no CODE_FILE, CODE_LINE, CODE_FUNC.
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>
#include <sys/uio.h>

namespace comfy::supervisor {

std::vector<std::string> journal_fields(int priority, std::string_view message, std::string_view identifier,
                                        const LogFields& fields) {
    std::vector<std::string> out;
    const auto add = [&out](std::string_view name, std::string_view value) {
        if (!value.empty()) out.push_back(std::string(name) + "=" + std::string(value));
    };
    out.push_back("MESSAGE=" + std::string(message));  // even empty: a blank line of a child's
    add("PRIORITY", std::to_string(priority));
    add("SYSLOG_IDENTIFIER", identifier);
    add("COMFY_PACK", fields.pack);
    if (fields.slot) add("COMFY_SLOT", std::to_string(*fields.slot));
    if (fields.generation) add("COMFY_GENERATION", std::to_string(*fields.generation));
    add("COMFY_MODEL", fields.model);
    if (fields.model_id) add("COMFY_MODEL_ID", std::to_string(*fields.model_id));
    add("COMFY_EVENT", fields.event);
    return out;
}

bool send_to_journal(const std::vector<std::string>& fields) {
    std::vector<iovec> entry;
    entry.reserve(fields.size());
    // sd_journal_sendv only reads them: the const_cast is for struct iovec's plain pointer.
    for (const auto& field : fields) entry.push_back({const_cast<char*>(field.data()), field.size()});
    return sd_journal_sendv(entry.data(), static_cast<int>(entry.size())) >= 0;
}

}  // namespace comfy::supervisor
