#include "tests/support/sanitizer_reports.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#ifdef COMFY_SANITIZE
#include <sanitizer/common_interface_defs.h>
#endif

namespace comfy::test {

#ifdef COMFY_SANITIZE

namespace {

// The options every process of a test runs with: stop at the first finding (UBSan is
// also built not to recover), leaks of our own programs reported at exit.
struct Options {
    const char* variable;
    const char* base;
};
constexpr Options kOptions[] = {
    {"ASAN_OPTIONS", "halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1"},
    {"UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1"},
    {"TSAN_OPTIONS", "halt_on_error=1:second_deadlock_stack=1"},
};

// The test process's pid, fixed at the first call, which comes before main (ASan and TSan
// ask for their options as they start): UBSan, linked in, asks only at its first report,
// perhaps in a fork, and the fork must still write into its test's folder.
pid_t test_pid_value = 0;
__attribute__((no_sanitize("address", "undefined", "thread"))) pid_t test_pid() {
    if (test_pid_value == 0) test_pid_value = ::getpid();
    return test_pid_value;
}

// This test process's folder, named by its pid like its segments (test_instance.hpp).
std::filesystem::path report_folder() {
    return std::filesystem::path(COMFY_SANITIZER_REPORTS) / ("t" + std::to_string(test_pid()));
}

std::string getenv_or_empty(const char* name) {
    const char* value = std::getenv(name);
    return value ? value : "";
}

// `base` and the log path of this process's folder, in `buffer`. The runtimes ask for their
// options while they start, before main and before any constructor: so this code is not
// instrumented and calls nothing but getpid (in test_pid). (Not __sanitizer_set_report_path from main
// instead: that reaches only one runtime where there are two, UBSan linked in and ASan
// shared.)
constexpr std::size_t kOptionsSize = 1024;
char asan_options[kOptionsSize];
char ubsan_options[kOptionsSize];
char tsan_options[kOptionsSize];

__attribute__((no_sanitize("address", "undefined", "thread"))) const char* options_with_log_path(char* buffer,
                                                                                                  const char* base) {
    char pid_text[24];
    std::size_t digits = 0;
    unsigned long pid = static_cast<unsigned long>(test_pid());
    do {
        pid_text[digits++] = static_cast<char>('0' + pid % 10);
        pid /= 10;
    } while (pid != 0);
    const char* parts[] = {base, ":log_path=" COMFY_SANITIZER_REPORTS "/t", nullptr, "/report"};
    std::size_t n = 0;
    for (const char* part : parts) {
        if (part == nullptr) {
            while (digits > 0 && n + 1 < kOptionsSize) buffer[n++] = pid_text[--digits];
            continue;
        }
        while (*part != '\0' && n + 1 < kOptionsSize) buffer[n++] = *part++;
    }
    buffer[n] = '\0';
    return buffer;
}

}  // namespace

}  // namespace comfy::test

// This process's own options, with its folder (its children read theirs from the
// environment set below). Its forks share its runtimes, and so its folder.
extern "C" __attribute__((no_sanitize("address", "undefined", "thread"))) const char* __asan_default_options() {
    return comfy::test::options_with_log_path(comfy::test::asan_options, comfy::test::kOptions[0].base);
}
extern "C" __attribute__((no_sanitize("address", "undefined", "thread"))) const char* __ubsan_default_options() {
    return comfy::test::options_with_log_path(comfy::test::ubsan_options, comfy::test::kOptions[1].base);
}
extern "C" __attribute__((no_sanitize("address", "undefined", "thread"))) const char* __tsan_default_options() {
    return comfy::test::options_with_log_path(comfy::test::tsan_options, comfy::test::kOptions[2].base);
}

namespace comfy::test {

void start_sanitizer_reports() {
    const auto folder = report_folder();
    // A folder left by an earlier process of this pid that was killed; this process has
    // written nothing yet (a report before main would have stopped it).
    std::filesystem::remove_all(folder);
    std::filesystem::create_directories(folder);
    const std::string path = (folder / "report").string();
    for (const auto& options : kOptions) {
        std::string value = options.base;
        if (const std::string own = getenv_or_empty(options.variable); !own.empty()) value += ":" + own;
        value += ":log_path=" + path;
        ::setenv(options.variable, value.c_str(), 1);
    }
}

std::vector<std::string> take_sanitizer_reports() {
    std::vector<std::string> reports;
    const auto folder = report_folder();
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
        std::ifstream in(entry.path());
        reports.push_back(entry.path().string() + ":\n" +
                          std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
    }
    std::filesystem::remove_all(folder, error);
    // What this process still finds (LeakSanitizer's check at its exit) goes to stderr and
    // its exit status (the shared runtime's, the one that checks leaks).
    __sanitizer_set_report_path("stderr");
    return reports;
}

nlohmann::json with_sanitizer_environment(nlohmann::json config) {
    // A Python interpreter, not built with the sanitizer, loads our instrumented library
    // late: it needs the runtimes preloaded, and its own leaks are not ours to report.
    const auto runs_python = [](const nlohmann::json& section) {
        if (section.contains("python")) return true;  // a pack in the python form
        const auto command = section.find("command");
        return command != section.end() && command->is_string() &&
               std::filesystem::path(command->get<std::string>()).filename().string().starts_with("python");
    };
    const auto add = [&](nlohmann::json& section) {
        if (!section.is_object()) return;
        const bool preload = runs_python(section);
        auto& env = section["env"];
        if (env.is_null()) env = nlohmann::json::object();
        if (!env.is_object()) return;
        for (const auto& options : kOptions) env[options.variable] = getenv_or_empty(options.variable);
        if (preload) {
            env["LD_PRELOAD"] = COMFY_SANITIZER_PRELOAD;
            env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"].get<std::string>() + ":detect_leaks=0";
        }
    };
    if (config.is_object() && config.contains("packs") && config["packs"].is_array()) {
        for (auto& pack : config["packs"]) add(pack);
    }
    if (config.is_object() && config.contains("comfyui")) add(config["comfyui"]);
    return config;
}

std::string sanitizer_python_environment() {
    return "LD_PRELOAD='" COMFY_SANITIZER_PRELOAD "' ASAN_OPTIONS='" + getenv_or_empty("ASAN_OPTIONS") +
           ":detect_leaks=0' ";
}

#else

void start_sanitizer_reports() {}
std::vector<std::string> take_sanitizer_reports() { return {}; }
nlohmann::json with_sanitizer_environment(nlohmann::json config) { return config; }
std::string sanitizer_python_environment() { return {}; }

#endif

std::string memory_limit_words(std::size_t mib) {
#if defined(__SANITIZE_ADDRESS__)
    return "export ASAN_OPTIONS=\"$ASAN_OPTIONS:hard_rss_limit_mb=" + std::to_string(mib) + "\"; ";
#elif defined(__SANITIZE_THREAD__)
    return "export TSAN_OPTIONS=\"$TSAN_OPTIONS:max_allocation_size_mb=" + std::to_string(mib) + "\"; ";
#else
    return "ulimit -v " + std::to_string(mib * 1024) + "; ";
#endif
}

}  // namespace comfy::test
