// A pack's worker that only looks around, for the sandbox and hardening tests:
//   sandbox-probe [--outside DIR] [--writable DIR] [--readable FILE] [--port N]
// It tries what a sandbox should stop (writing DIR outside its folders, writing FILE it
// was given read-only, connecting to the host's 127.0.0.1:N, opening the supervisor's
// segment by name) and lists what it can see (network interfaces, /dev/shm, processes,
// its doorbell descriptor), writes one "key value" line each to report.txt in its working
// directory, and waits to be stopped. It never says Hello.

#include "ipc/shm_segment.hpp"
#include "worker/worker_environment.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

// "ok", or the errno's name ("EROFS"), so the test can say which wall stopped it.
std::string outcome(bool ok) { return ok ? "ok" : strerrorname_np(errno); }

std::string try_create(const std::string& folder) {
    const std::string file = folder + "/probe-was-here";
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return outcome(false);
    ::close(fd);
    return "ok";
}

std::string try_read_then_write(const std::string& file) {
    std::ifstream in(file);
    std::string content;
    if (!std::getline(in, content)) return "unreadable";
    const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND);
    const std::string write = outcome(fd >= 0);
    if (fd >= 0) ::close(fd);
    return content + "," + write;
}

std::string try_connect(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return outcome(false);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool connected = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
    const std::string result = outcome(connected);
    ::close(fd);
    return result;
}

std::string joined(std::vector<std::string> words) {
    std::sort(words.begin(), words.end());
    std::string text;
    for (const auto& word : words) {
        if (!text.empty()) text += ',';
        text += word;
    }
    return text.empty() ? "-" : text;
}

std::string interfaces() {
    std::vector<std::string> names;
    if (struct if_nameindex* list = ::if_nameindex()) {
        for (const struct if_nameindex* entry = list; entry->if_index != 0; ++entry) names.emplace_back(entry->if_name);
        ::if_freenameindex(list);
    }
    return joined(names);
}

std::vector<std::string> entries(const std::string& folder) {
    std::vector<std::string> names;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
        names.push_back(entry.path().filename().string());
    }
    return names;
}

// The command names of every process in /proc.
std::string processes() {
    std::vector<std::string> names;
    for (const auto& name : entries("/proc")) {
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream comm("/proc/" + name + "/comm");
        std::string command;
        if (std::getline(comm, command)) names.push_back(command);
    }
    return joined(names);
}

std::string open_segment(const std::string& instance) {
    const int fd = ::shm_open(comfy::ipc::segment_name(instance).c_str(), O_RDONLY, 0);
    const std::string result = outcome(fd >= 0);
    if (fd >= 0) ::close(fd);
    return result;
}

// What the inherited doorbell is, and whether ringing it works (the supervisor wakes,
// finds no message, and sleeps again).
std::string doorbell(int fd) {
    char target[256] = {};
    if (::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), target, sizeof target - 1) < 0) {
        return outcome(false);
    }
    const std::uint64_t one = 1;
    return std::string(target) + "," + outcome(::write(fd, &one, sizeof one) == sizeof one);
}

}  // namespace

int main(int argc, char* argv[]) {
    std::map<std::string, std::string> options;
    for (int i = 1; i + 1 < argc; i += 2) options[argv[i]] = argv[i + 1];
    const auto env = comfy::worker::WorkerEnvironment::from_process_environment();

    std::ostringstream report;
    report << "pid " << ::getpid() << "\n";
    report << "dumpable " << ::prctl(PR_GET_DUMPABLE) << "\n";
    if (options.count("--outside")) report << "write_outside " << try_create(options["--outside"]) << "\n";
    if (options.count("--writable")) report << "write_declared " << try_create(options["--writable"]) << "\n";
    if (options.count("--readable")) report << "readable " << try_read_then_write(options["--readable"]) << "\n";
    if (options.count("--port")) report << "connect_host " << try_connect(std::atoi(options["--port"].c_str())) << "\n";
    report << "interfaces " << interfaces() << "\n";
    report << "dev_shm " << joined(entries("/dev/shm")) << "\n";
    report << "open_segment " << open_segment(env.instance) << "\n";
    report << "processes " << processes() << "\n";
    report << "doorbell " << doorbell(env.doorbell_fd) << "\n";
    // Whole or not at all: the test reads the file as soon as it exists.
    std::ofstream("report.tmp") << report.str();
    std::rename("report.tmp", "report.txt");
    for (;;) ::pause();  // the supervisor ends us
}
