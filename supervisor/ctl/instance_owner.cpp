#include "supervisor/ctl/instance_owner.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <vector>

namespace comfy::ctl {

namespace {

// The user's name, or nothing when the password database has none for `uid`.
std::optional<std::string> user_name(uid_t uid) {
    std::vector<char> buffer(16384);
    passwd entry{};
    passwd* found = nullptr;
    if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) return std::nullopt;
    return std::string(found->pw_name);
}

// Whether `file` is "comfy-sv-UID-INSTANCE" for some whole number UID.
bool names_instance(const std::string& file, const std::string& instance) {
    constexpr std::string_view kPrefix = "comfy-sv-";
    if (file.rfind(kPrefix, 0) != 0) return false;
    const char* digits = file.data() + kPrefix.size();
    const char* end = file.data() + file.size();
    uid_t uid = 0;
    const auto [after, error] = std::from_chars(digits, end, uid);
    return error == std::errc{} && after != digits && after < end && *after == '-' &&
           std::string_view(after + 1, static_cast<std::size_t>(end - after - 1)) == instance;
}

}  // namespace

std::optional<OtherOwner> instance_of_another_user(const std::string& instance, uid_t own_uid,
                                                   const std::filesystem::path& shm_folder) {
    std::optional<OtherOwner> found;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(shm_folder, error)) {
        const std::string file = entry.path().filename().string();
        if (!names_instance(file, instance)) continue;
        struct stat st {};
        // Its owner as the kernel keeps it, whatever its name says.
        if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid == own_uid) continue;
        if (!found || st.st_uid < found->uid) found = OtherOwner{st.st_uid, "/" + file};
    }
    return found;
}

std::string another_user_line(const std::string& instance, const OtherOwner& owner) {
    const auto name = user_name(owner.uid);
    const std::string who = name ? "user " + *name + " (uid " + std::to_string(owner.uid) + ")"
                                 : "uid " + std::to_string(owner.uid);
    return "instance '" + instance + "' is run by " + who + ", not by uid " + std::to_string(::geteuid()) +
           ": its segment " + owner.segment + " and its control socket are that user's alone; run comfyctl as " +
           "that user: sudo -u " + (name ? *name : "'#" + std::to_string(owner.uid) + "'") + " comfyctl ...";
}

ipc::SharedSegment attach_instance(const std::string& instance) {
    try {
        return attach_segment(instance);
    } catch (const ipc::SegmentError&) {
        const bool ours = ipc::inspect_segment(ipc::segment_name(instance)).state != ipc::SegmentState::absent;
        const auto other = ours ? std::nullopt : instance_of_another_user(instance, ::geteuid());
        if (other) throw ipc::SegmentError(another_user_line(instance, *other));
        throw;
    }
}

}  // namespace comfy::ctl
