// comfy-worker: the reference worker. Started by comfy-supervisor, it runs the node pack
// described in a JSON file on the device, through the worker runtime.

#include "shared/command_line.hpp"
#include "worker/reference_worker.hpp"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>

namespace {

namespace po = comfy::cli::po;

constexpr const char* kUsage = "usage: comfy-worker --pack FILE (started by comfy-supervisor)";

po::options_description worker_options() {
    po::options_description options("options");
    options.add_options()("pack", po::value<std::string>()->value_name("FILE"),
                          "the pack's description: its nodes and their steps (JSON); required");
    comfy::cli::add_help_and_version(options);
    return options;
}

std::string help_text(const po::options_description& options) {
    std::ostringstream out;
    out << kUsage << "\n\n"
        << "The reference worker: joins the supervisor named by its environment (COMFY_SV_*,\n"
           "set by comfy-supervisor) and runs the pack's nodes on the device until told to stop.\n"
        << options
        << "\nexit status:\n"
           "  0   stopped when the supervisor asked\n"
           "  2   bad command line, a pack description that cannot be read, or no supervisor\n"
           "      to join (run by comfy-supervisor, not by hand)\n";
    return out.str();
}

}  // namespace

int main(int argc, char* argv[]) {
    const auto options = worker_options();
    std::string pack_file;
    try {
        const auto values = comfy::cli::parse(std::vector<std::string>(argv + 1, argv + argc), options);
        if (values.count("help")) return std::fputs(help_text(options).c_str(), stdout) < 0 ? 1 : 0;
        if (values.count("version")) return std::puts(comfy::cli::version_line("comfy-worker").c_str()) < 0 ? 1 : 0;
        pack_file = comfy::cli::value_or(values, "pack", "");
        if (pack_file.empty()) throw comfy::cli::UsageError("no pack given");
    } catch (const comfy::cli::UsageError& error) {
        std::fprintf(stderr, "comfy-worker: %s; %s; see comfy-worker --help\n", error.what(), kUsage);
        return 2;
    }
    try {
        auto pack = comfy::worker::load_pack_description(pack_file);
        const auto environment = comfy::worker::WorkerEnvironment::from_process_environment();
        const std::uint64_t capabilities =
            comfy::kCapPinnedMemory | (pack.node_boundary_release ? std::uint64_t{comfy::kCapNodeBoundaryRelease} : 0);
        comfy::worker::WorkerRuntime runtime(environment, capabilities);
        comfy::worker::ReferenceWorker worker(runtime, std::move(pack));
        runtime.serve(worker);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "comfy-worker: %s\n", e.what());
        return 2;
    }
}
