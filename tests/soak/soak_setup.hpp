#pragma once
// What the soak runs: the demo's config (examples/demo.json: the ComfyUI stand-in and the
// three packs) with short time-outs and restarts that never give up, beside it one pack
// per hostile mode of tests' misbehaving-worker (each waits for the soak's signal), a
// deaf pack, and tests/packs/hostile_pack and tests/packs/arena_hostile_pack in the python
// form, whose nodes the stand-in calls at the soak's signal
// (examples/host_participant.py --hostile-calls, --hostile-arena); and the demo's prompts
// (examples/workload.json), repeated for longer than any soak lasts.

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace comfy::soak {

// A hostile mode, and the words the supervisor's log must have for its pack's pid once
// the soak has signalled it; or, for a mode that `escapes`, the words of the worker's own
// line that names the processes it started outside its process group, which must end
// when the soak then kills the worker.
struct HostileMode {
    const char* mode;
    const char* outcome;
    bool escapes = false;
};

// Every hostile mode the soak signals. The floods (admission-flood, ledger-flood, on the
// branch that adds them to misbehaving-worker) go here once that branch is merged, each
// with what the supervisor logs when it stops or caps the flood.
inline constexpr HostileMode kHostileModes[] = {
    {"write-header", "killed by SIGSEGV"},
    {"write-device-total", "killed by SIGSEGV"},
    {"write-device-use", "killed by SIGSEGV"},
    {"write-ledger", "killed by SIGSEGV"},
    {"write-participant", "killed by SIGSEGV"},
    {"write-ring-half", "killed by SIGSEGV"},
    {"census-garbage", "its census is unreadable at two heartbeat checks in a row"},
    {"ring-garbage", "its ring to the supervisor is corrupt"},
    {"escape", "escaped: setsid child ", true},
};

inline constexpr const char* kDeafPack = "deaf";
inline constexpr unsigned kDeafPackModels = 128;  // within its ledger quota (4096 / 13 participants)
// The hostile calls, each a signal to the host, which then calls a hostile Python pack's
// node and says how it went ("host_participant: hostile calls: WHAT passed"):
// - cancel (SIGUSR1): a node of kHostileCallsPack that never ends, cancelled; the
//   supervisor must end the pack's life with the words of `outcome`;
// - protocol (SIGUSR2): a node that breaks the call protocol; likewise;
// - mutate (SIGRTMIN): kHostileArenaPack hands tensors over, then writes over every arena
//   it can reach; what the host holds must be unchanged, and the pack's life goes on;
// - flood (SIGRTMIN + 1): a node of kHostileCallsPack floods the browser; the host must
//   forward no more than its limits, count the rest, say so in a line with the words of
//   `host_says`, and answer the next call, in the same life;
// - walk (SIGRTMIN + 2): a node of kHostileCallsPack walks the host's MODEL with dotted
//   names, object patches and callables toward the host's builtins (hostile_pack/walks.py);
//   each walk must be refused, the host's canary never written and its MODEL unchanged,
//   and the pack's life goes on (the host's log line of it is rate-limited, so not awaited);
// - callback (SIGRTMIN + 3): the host's KSampler over a MODEL kHostileCallsPack patched with
//   a CFG function that never returns, cancelled; the supervisor must end the pack's life
//   with the words of `outcome`, the host's sampling end with upstream's interrupt, and the
//   host say that Cancel reached the callback.
inline constexpr const char* kHostileCallsPack = "hostile-calls";
inline constexpr const char* kHostileArenaPack = "hostile-arena";
inline constexpr std::chrono::milliseconds kCancelGrace{500};
struct HostileCall {
    const char* what;
    int signal;
    const char* pack;
    const char* outcome = nullptr;    // the supervisor's words ending the pack's life; none: it goes on
    const char* host_says = nullptr;  // the start of a line of the host's the round must bring, if any
};
// Not constexpr: SIGRTMIN is the C library's to say, at run time.
inline const HostileCall kHostileCalls[] = {
    {"cancel", SIGUSR1, kHostileCallsPack, "its node did not end within"},
    {"protocol", SIGUSR2, kHostileCallsPack, "its call session with the host broke"},
    {"mutate", SIGRTMIN, kHostileArenaPack},
    {"flood", SIGRTMIN + 1, kHostileCallsPack, nullptr, "comfy-supervisor: pack hostile-calls: refused "},
    {"walk", SIGRTMIN + 2, kHostileCallsPack},
    {"callback", SIGRTMIN + 3, kHostileCallsPack, "its callback did not end within",
     "comfy-supervisor: pack hostile-calls: ComfyUI's Cancel reached its callback"},
};
inline constexpr std::chrono::milliseconds kHeartbeatTimeout{2000};
inline constexpr std::chrono::milliseconds kAnswerTimeout{1000};

std::string hostile_pack(const HostileMode& mode);

struct SoakSetup {
    std::filesystem::path config;
    std::filesystem::path workload;
    std::vector<std::string> demo_participants;  // the host and the demo's packs
    std::vector<std::string> participants;       // every name in the config
};

// Writes config.json and workload.json into `folder`. Throws std::runtime_error with one
// line when the demo's files cannot be read.
SoakSetup write_soak_setup(const std::filesystem::path& folder);

}  // namespace comfy::soak
