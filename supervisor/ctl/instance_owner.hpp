#pragma once
// An instance that another user's supervisor runs (the systemd unit's comfy-supervisor
// user, seen from root's shell or an admin's): comfyctl cannot read it, and says exactly
// why in one line instead of "is the supervisor running?". A segment is its user's alone
// (named by its uid, mode 600, never attached by another uid: ipc/shm_segment.hpp), and so
// is the control socket (docs/SECURITY.md): comfyctl reads an instance as the user it runs as.

#include "shared/segment_layout.hpp"

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

namespace comfy::ctl {

struct OtherOwner {
    uid_t uid = 0;
    std::string segment;  // its name, "/comfy-sv-UID-INSTANCE"
};

// A segment of `instance` in `shm_folder` owned by a uid other than `own_uid` (the lowest
// such uid, when several are), or nothing.
std::optional<OtherOwner> instance_of_another_user(const std::string& instance, uid_t own_uid,
                                                   const std::filesystem::path& shm_folder = "/dev/shm");

// "instance 'gpu0' is run by user comfy-supervisor (uid 998): its segment /comfy-sv-998-gpu0 and
// control socket are that user's alone; run comfyctl as that user: sudo -u comfy-supervisor comfyctl ..."
std::string another_user_line(const std::string& instance, const OtherOwner& owner);

// attach_segment(instance), whose failure, when this user has no segment of that name but
// another user has, is that user's line above (an ipc::SegmentError).
ipc::SharedSegment attach_instance(const std::string& instance);

}  // namespace comfy::ctl
