#include "supervisor/ops/log/log_limiter.hpp"

namespace comfy::supervisor {

std::vector<std::string> LogLimiter::pass(const std::string& who, const std::string& topic, std::string line,
                                          Clock::time_point now) {
    std::vector<std::string> out;
    const Key key{who, topic};
    auto found = windows_.find(key);
    if (found != windows_.end() && now >= found->second.end) {
        if (found->second.suppressed > 0) out.push_back(summary(key, found->second));
        windows_.erase(found);
        found = windows_.end();
    }
    if (found == windows_.end()) found = windows_.emplace(key, Window{now + window_}).first;
    Window& window = found->second;
    if (window.written < lines_) {
        ++window.written;
        out.push_back(std::move(line));
    } else {
        ++window.suppressed;
    }
    return out;
}

std::vector<std::string> LogLimiter::ended(Clock::time_point now) {
    std::vector<std::string> out;
    std::erase_if(windows_, [&](const auto& entry) {
        if (now < entry.second.end) return false;
        if (entry.second.suppressed > 0) out.push_back(summary(entry.first, entry.second));
        return true;
    });
    return out;
}

std::vector<std::string> LogLimiter::flush() {
    std::vector<std::string> out;
    for (const auto& [key, window] : windows_) {
        if (window.suppressed > 0) out.push_back(summary(key, window));
    }
    windows_.clear();
    return out;
}

std::string LogLimiter::summary(const Key& key, const Window& window) const {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(window_).count();
    return key.first + ": " + std::to_string(window.suppressed) + " more line" + (window.suppressed == 1 ? "" : "s") +
           " like this suppressed in the last " + std::to_string(seconds) + " s (" + key.second + ")";
}

}  // namespace comfy::supervisor
