// Reads /http/token_file: the bearer token of the HTTP requests that change something.
// The secret lives in a file of its own, never in the config, which is often readable by
// everyone (a ConfigMap, /etc); so the file must be closed to other users, and it must
// be this user's or root's, so no one else can choose the token. Its text is never shown
// in a message.

#include "shared/input_file.hpp"
#include "supervisor/config/sections.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace comfy::supervisor::config_loader {

namespace {

// Long enough to be unguessable (openssl rand -hex 32 gives 64), short enough for a header.
constexpr std::size_t kMinTokenChars = 16;
constexpr std::size_t kMaxTokenChars = 1024;

std::string octal(mode_t mode) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

}  // namespace

std::string read_token_file(const ConfigReader& reader, const Node& node) {
    const fs::path file = reader.read_path(node, "the path of a file holding the token");
    const auto found = [&](const std::string& why) { return describe_json_value(node.value) + " (" + why + ")"; };
    std::string text;
    try {
        InputFile input(file.string(), kMaxTokenChars + 2);
        struct stat status {};
        if (::fstat(input.descriptor(), &status) != 0) reader.fail(node.at, "a readable file", found(file.string()));
        if ((status.st_mode & (S_IRWXO | S_IWGRP)) != 0) {
            reader.fail(node.at, "a file other users cannot read or write (chmod 600 " + file.string() + ")",
                        found("mode " + octal(status.st_mode)));
        }
        if (status.st_uid != ::geteuid() && status.st_uid != 0) {
            reader.fail(node.at, "a file of the supervisor's user (uid " + std::to_string(::geteuid()) + ") or root",
                        found("owned by uid " + std::to_string(status.st_uid)));
        }
        char chunk[512];
        for (std::size_t n; (n = input.read(chunk, sizeof chunk)) > 0;) text.append(chunk, n);
    } catch (const InputFileError& error) {
        reader.fail(node.at, "a file holding the token", found(error.what()));
    }
    // One line, as `openssl rand -hex 32 > FILE` writes it.
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (!text.empty() && text.back() == '\r') text.pop_back();
    const bool visible = std::all_of(text.begin(), text.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; });
    if (!visible || text.size() < kMinTokenChars || text.size() > kMaxTokenChars) {
        reader.fail(node.at,
                    "a file holding one line of " + std::to_string(kMinTokenChars) + " to " +
                        std::to_string(kMaxTokenChars) +
                        " visible ASCII characters, no spaces (e.g. openssl rand -hex 32 > " + file.string() + ")",
                    found(std::to_string(text.size()) + " characters" + (visible ? "" : ", not all of them visible")));
    }
    return text;
}

}  // namespace comfy::supervisor::config_loader
