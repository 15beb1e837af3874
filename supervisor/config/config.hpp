#pragma once
// Room config/: what the supervisor is told, checked whole before anything starts: this
// config, the command line, a workload file, and where an install keeps its parts.
//
// The supervisor's configuration: the device, the limits, and the node packs to run.
// Loaded from JSON and validated whole before anything is spawned.

#include "shared/segment_layout.hpp"
#include "supervisor/arbiter/arbiter_io.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace comfy::supervisor {

using Milliseconds = std::chrono::milliseconds;

// What happens to a pack's worker after it dies: restart after a backoff that doubles
// from `initial_backoff` up to `max_backoff`; more than `max_restarts` restarts within
// `window` marks the pack failed until an operator asks again.
struct RestartPolicy {
    Milliseconds initial_backoff{100};
    Milliseconds max_backoff{30'000};
    std::uint32_t max_restarts = 5;
    Milliseconds window{60'000};
};

enum class DeviceKind { simulated, cuda };
// What to do when a CUDA device is configured but none is usable.
enum class CudaFallback { simulated, stop };

struct DeviceConfig {
    // The real device unless the config asks for the simulated one: a GPU machine never
    // arbitrates a fake device because a config said nothing.
    DeviceKind kind = DeviceKind::cuda;
    std::uint64_t total_bytes = std::uint64_t{24} << 30;  // simulated device size
    int cuda_index = 0;
    CudaFallback cuda_fallback = CudaFallback::stop;
    // How long the start waits for the CUDA device to become usable (its driver may still
    // be loading at boot), trying again with backoff; then the fallback applies.
    Milliseconds wait{60'000};
};

// What becomes of a participant the arbiter found deaf (it let a command go unanswered
// past memory.answer_timeout_ms): kept, its models passed over until it answers again, or
// restarted, so that the memory it holds comes back (docs/ARBITRATION.md).
enum class DeafPolicy { keep, restart };
inline constexpr std::pair<std::string_view, DeafPolicy> kDeafPolicies[] = {
    {"keep", DeafPolicy::keep},
    {"restart", DeafPolicy::restart},
};

// How the supervisor arbitrates device memory (see docs/ARBITRATION.md).
struct MemoryConfig {
    std::uint64_t reserve_bytes = kDefaultReserve;  // upstream's EXTRA_RESERVED_VRAM
    arbiter::NoFitPolicy no_fit = arbiter::NoFitPolicy::admit;  // upstream's behaviour
    Milliseconds wait_timeout{30'000};                        // policy wait: refuse after this
    Milliseconds answer_timeout{5'000};                       // an owner silent on an eviction
    DeafPolicy deaf_participant = DeafPolicy::keep;           // an owner silent past it
    bool smart_memory = true;  // false: upstream's --disable-smart-memory (detach all)
    // The most models one participant may have in the ledger; none: its fair share
    // (ledger_quota_of). Past it a model is not tracked, as in a full ledger.
    std::optional<std::uint32_t> ledger_quota;
};

// Host RAM, budgeted: pinned bytes and resident sets against what the machine has.
struct HostMemoryConfig {
    std::uint64_t budget_bytes = 0;  // 0: read the machine (cgroup v2 or MemAvailable)
    std::uint64_t low_water_bytes = std::uint64_t{2} << 30;  // below this, pins are released
    Milliseconds pin_release_interval{5'000};  // at most one release_pins round per interval
    Milliseconds idle_release{0};              // full_release to a worker idle this long; 0: off
};

// The operator's HTTP endpoints (/census, /metrics, /free); off unless a listen address is given.
struct HttpConfig {
    bool enabled = false;
    std::string address;      // an IPv4 or IPv6 address, e.g. 127.0.0.1
    unsigned short port = 0;  // 0: any free port (the log says which)
    // Host names a request's Host may carry besides localhost and IP addresses, lower case.
    std::vector<std::string> allowed_hosts;
    // What a request that changes something (POST /free) must bear (Authorization:
    // Bearer), read from http.token_file; empty when none is configured, which only a
    // loopback listen address allows.
    std::string token;
};

struct Limits {
    Milliseconds heartbeat_timeout{5'000};   // a worker silent this long is hung
    Milliseconds handshake_timeout{10'000};  // from spawn to Hello, for a pack's worker
    // The same for the ComfyUI host, which says Hello once torch is imported and its custom
    // nodes are loaded: minutes on a real machine.
    Milliseconds host_handshake_timeout{600'000};
    // From Hello to `ready`, for a participant that says when it is ready (kCapReadyLater:
    // a Python pack's worker, whose import runs meanwhile); a start-up that hangs is ended.
    Milliseconds ready_timeout{600'000};
    Milliseconds shutdown_grace{5'000};      // from Shutdown to SIGKILL
    // Requests one participant may have waiting on the supervisor: admissions not answered
    // yet, and answers it has not taken from its ring. One more stops it.
    std::uint32_t outstanding_requests = 16;
    Capacities capacities;
};

// A pack's worker run inside bubblewrap (docs/SECURITY.md): no network unless allowed, the
// file system read-only except the folders listed here, its own /dev, /dev/shm, /tmp,
// /run and /proc, the GPU's device nodes, and death with the supervisor.
struct SandboxConfig {
    // Bound writable: the working directory first, then the folders the config declares.
    // Absolute with links resolved, so each is mounted where it really is.
    std::vector<std::string> writable;
    // Bound read-only where the sandbox would hide them (under /tmp or /run), like writable.
    std::vector<std::string> readable;
    bool network = false;
};

// The size of a life's value arena (docs/ARCHITECTURE.md, "Node calls") unless the config
// says otherwise: sparse, so only what the life writes takes memory.
inline constexpr std::uint64_t kDefaultArenaBytes = std::uint64_t{2} << 30;

// A pack given in the config's "python" form: a custom node pack's folder, or a group of
// them, run by comfy_supervisor.pack_worker in the pack's own interpreter. The loader
// turns it into the pack's command, args and PYTHONPATH.
struct PythonPack {
    // The pack's folder (it has __init__.py), absolute; a group's several, in the config's
    // order, imported into one worker so that objects pass between them as within one pack.
    std::vector<std::string> folders;
    std::string interpreter;  // absolute; default: the first python3 on the supervisor's PATH at load time
    // The pack's environment, as `comfyctl pack add` built it (absolute; its bin/python is the
    // interpreter), or empty when the config names an interpreter instead. Not looked at when
    // the config is read: before each start (environment_problem.hpp), so that one missing
    // environment fails its pack alone.
    std::string environment;
    // What builds that environment for this pack as the config names it, for the lines
    // about it: "comfyctl pack add DIR --name NAME --config FILE".
    std::string build_command;
    std::string comfyui;      // the ComfyUI checkout whose comfy package it imports, absolute
    std::vector<std::string> comfyui_args;  // ComfyUI's own flags for that comfy package (--cpu, ...)
    // CUDA tensors to and from the host by CUDA IPC, where both sides can. Unset: yes,
    // unless the pack is sandboxed (a peer that maps our memory can read and write the
    // whole allocation around a tensor).
    std::optional<bool> cuda_ipc;
    // How long a node may run on after ComfyUI's Cancel before the host has its worker
    // ended and restarted (docs/PACKS.md, "A node call").
    Milliseconds cancel_grace{3'000};
    // Forked from the warm template its interpreter and environment share with other packs
    // (lifecycle/warm_templates.hpp); false: always started as a process of its own.
    bool warm_template = true;
};

// What the host forwards of a pack's messages to the browser (the pack's
// PromptServer.send_sync in its worker; docs/SECURITY.md): the worker is the pack's code,
// and upstream's queue to the browser has no bound. The defaults leave room for what
// packs really send: ComfyUI's own progress previews are binary and stay in the worker
// (only JSON crosses), so the largest JSON messages are previews a pack encodes into it
// (base64 of a JPEG or PNG, a few hundred KiB for 1024 x 1024) and node outputs' lists of
// files; the most frequent are progress updates, at a sampler's step rate (tens a second).
struct BrowserMessageLimits {
    std::uint64_t max_bytes = std::uint64_t{1} << 20;          // one message's frame, at most
    std::uint64_t per_second = 100;                            // messages a second, per pack
    std::uint64_t bytes_per_second = std::uint64_t{16} << 20;  // bytes a second, per pack
};

struct PackConfig {
    std::string name;                       // 1-31 of [A-Za-z0-9_-], unique
    std::string command;                    // absolute after loading (relative: to the config's folder)
    std::vector<std::string> args;
    std::vector<std::string> env_allowlist; // variables passed through from the supervisor's environment
    std::map<std::string, std::string> env; // the pack's own variables
    std::string working_directory;          // absolute after loading; default: the config's folder
    RestartPolicy restart;
    std::optional<SandboxConfig> sandbox;   // absent: the worker runs as the supervisor's child, unconfined
    std::optional<PythonPack> python;       // present: given in the "python" form
    // Whether it takes part in node calls between the host and the packs: the host always,
    // a pack in the "python" form. Each of its lives then gets a control socket and a
    // value arena of arena_bytes.
    bool bridges = false;
    std::uint64_t arena_bytes = kDefaultArenaBytes;
    // The host's alone (the "comfyui" section): what it forwards of the packs' messages
    // to the browser, told to it in the bridge's packs event.
    BrowserMessageLimits browser_messages;
};

// Where and from what `comfyctl pack add` builds the packs' environments (docs/CONFIG.md,
// /environments): read and checked here, used by the pack tool alone.
struct EnvironmentsConfig {
    std::string root;                     // absolute; empty: the tool's default
    std::vector<std::string> find_links;  // folders of wheels (absolute), as pip's --find-links
    bool no_index = false;
    std::string index_url;                // empty: pip's own (or PIP_INDEX_URL)
};

// The name the ComfyUI host process goes by in the participant table, comfyctl and logs.
inline constexpr const char* kHostParticipantName = "host";

struct Config {
    std::string source;  // the file it came from, for messages
    DeviceConfig device;
    Limits limits;
    MemoryConfig memory;
    HostMemoryConfig host;
    HttpConfig http;
    // The ComfyUI host process (the "comfyui" section), run in slot 0 like a pack's
    // worker; its name is kHostParticipantName. Absent: slot 0 stays empty.
    std::optional<PackConfig> comfyui;
    // The ComfyUI checkout (/comfyui/checkout), absolute; empty when not given. The Python
    // packs that name none import its comfy package.
    std::string comfyui_checkout;
    std::vector<PackConfig> packs;
    EnvironmentsConfig environments;
};

// One line: the file, the JSON path of the bad value, what was expected, what was found.
class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Reads and validates a config file (a regular file of at most kMaxJsonFileBytes).
// Throws ConfigError on anything wrong.
Config load_config(const std::string& path);

// The same from text already read: `path` names it in messages, and its folder is where
// relative paths start.
Config load_config_text(std::string_view text, const std::string& path);

// What the config gives a process's environment: the variables of its env_allowlist that the
// supervisor has now, then its env (a Python pack's PYTHONPATH with the package's folder
// first). The supervisor adds its own COMFY_SV_* variables at spawn.
std::map<std::string, std::string> configured_environment(const PackConfig& process);

// memory.ledger_quota, or when the config does not set it, each participant's fair share:
// the ledger's rows divided among the participants configured (the packs, and the host
// when there is one), at least 1. Every participant keeps room for its share however
// full the others fill theirs.
std::uint32_t ledger_quota_of(const Config& config);

}  // namespace comfy::supervisor
