// The programs' command lines through the real binaries: --help, -h and --version for
// every program and subcommand, `--opt=VALUE` as `--opt VALUE`, and one-line errors with
// status 2 naming which --help to read. Each defect found before Boost.Program_options has
// a case here.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <algorithm>
#include <string>

#ifndef COMFY_SOAK_PATH
#error "COMFY_SOAK_PATH must name the comfy-soak binary (set in tests/CMakeLists.txt)"
#endif

using namespace comfy::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// stdout and stderr apart: `out` gets stdout, `err` stderr (through a file in `folder`).
struct Run {
    int status;
    std::string out;
    std::string err;
};

Run run(const std::string& binary, const std::string& arguments, const TempFolder& folder) {
    const auto err = folder.path() / "stderr.txt";
    const auto ran = run_and_capture(binary + " " + arguments + " 2>" + err.string());
    REQUIRE(ran.started);
    return {ran.status, ran.output, read_file(err)};
}

std::size_t lines(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

TEST_CASE("every program and subcommand prints its help with -h and --help, its exit statuses included") {
    TempFolder folder("cli");
    const std::vector<std::pair<std::string, std::string>> helps = {
        {supervisor_binary(), "--help"},     {supervisor_binary(), "-h"},       {supervisor_binary(), "run --help"},
        {supervisor_binary(), "run -h"},     {supervisor_binary(), "replay --help"},
        {supervisor_binary(), "replay -h"},  {supervisor_binary(), "check --help"}, {supervisor_binary(), "check -h"},
        {worker_binary(), "--help"},       {worker_binary(), "-h"},
        {COMFY_SOAK_PATH, "--help"},         {COMFY_SOAK_PATH, "-h"},           {comfyctl_binary(), "-h"}};
    for (const auto& [binary, arguments] : helps) {
        INFO(binary << " " << arguments);
        const auto help = run(binary, arguments, folder);
        CHECK(help.status == 0);
        CHECK(help.err.empty());
        CHECK_THAT(help.out, StartsWith("usage: "));
        CHECK_THAT(help.out, Contains("exit status"));
    }
    // Before: "--help needs a value", and replay opened a file named --help.
    CHECK_THAT(run(supervisor_binary(), "run --help", folder).out, Contains("--config FILE"));
    CHECK_THAT(run(supervisor_binary(), "replay --help", folder).out, Contains("usage: comfy-supervisor replay TRACE"));
    CHECK_THAT(run(supervisor_binary(), "check --help", folder).out, Contains("usage: comfy-supervisor check CONFIG"));
}

TEST_CASE("every program and subcommand prints the project's version") {
    TempFolder folder("cli");
    const std::vector<std::pair<std::string, std::string>> versions = {
        {supervisor_binary(), "--version comfy-supervisor"}, {supervisor_binary(), "run --version comfy-supervisor"},
        {supervisor_binary(), "replay --version comfy-supervisor"},
        {supervisor_binary(), "check --version comfy-supervisor"}, {worker_binary(), "--version comfy-worker"},
        {COMFY_SOAK_PATH, "--version comfy-soak"},             {comfyctl_binary(), "--version comfyctl"}};
    for (const auto& [binary, arguments_and_name] : versions) {
        const auto space = arguments_and_name.rfind(' ');
        const auto arguments = arguments_and_name.substr(0, space);
        INFO(binary << " " << arguments);
        const auto version = run(binary, arguments, folder);
        CHECK(version.status == 0);
        CHECK(version.out == arguments_and_name.substr(space + 1) + " " + COMFY_PROJECT_VERSION + "\n");
    }
}

TEST_CASE("every program reads an option's value after an equals sign as well as after a space") {
    TempFolder folder("cli");
    // Before: the supervisor refused --config=FILE as an unknown option. A config it reads
    // and finds wrong proves it took the file.
    const auto config = folder.write("config.json", "{\"packs\": []}");
    const auto supervisor = run(supervisor_binary(), "run --config=" + config.string() + " --instance=cli-x", folder);
    CHECK(supervisor.status == 2);
    CHECK_THAT(supervisor.err, Contains(config.string()));
    CHECK_THAT(supervisor.err, Contains("/packs"));
    const auto short_form = run(supervisor_binary(), "run -c " + config.string(), folder);
    CHECK_THAT(short_form.err, Contains(config.string()));
    // check takes its config as run does, as well as on its own.
    const auto check = run(supervisor_binary(), "check --config=" + config.string(), folder);
    CHECK(check.status == 2);
    CHECK(check.err == run(supervisor_binary(), "check " + config.string(), folder).err);
    CHECK_THAT(check.err, Contains(config.string() + ": at /packs: expected at least one pack, or a comfyui section"));
    const auto worker = run(worker_binary(), "--pack=/nonexistent/pack.json", folder);
    CHECK(worker.status == 2);
    CHECK_THAT(worker.err, Contains("/nonexistent/pack.json"));
    const auto soak = run(COMFY_SOAK_PATH, "--seconds=5", folder);
    CHECK(soak.status == 2);
    CHECK_THAT(soak.err, Contains("--seconds expects a whole number from 10 to 86400, found '5'"));
}

TEST_CASE("a bad command line is one line with status 2 that says which help to read") {
    TempFolder folder("cli");
    struct Bad {
        std::string binary;
        std::string arguments;
        std::string message;
    };
    const std::vector<Bad> bad = {
        {supervisor_binary(), "run --x", "comfy-supervisor: unknown option '--x'; see comfy-supervisor run --help"},
        {supervisor_binary(), "run --config", "--config needs a FILE; see comfy-supervisor run --help"},
        {supervisor_binary(), "run", "--config is required; see comfy-supervisor run --help"},
        {supervisor_binary(), "run --conf x", "unknown option '--conf'"},  // no abbreviations
        {supervisor_binary(), "run --config a --keep-running", "--keep-running needs --workload"},
        {supervisor_binary(), "run --config a stray", "unexpected argument 'stray'"},
        {supervisor_binary(), "replay", "replay takes one trace file; see comfy-supervisor replay --help"},
        {supervisor_binary(), "replay a b", "replay takes one trace file"},
        {supervisor_binary(), "check", "check takes one config file; see comfy-supervisor check --help"},
        {supervisor_binary(), "check a b", "check takes one config file"},
        {supervisor_binary(), "dance", "unknown command 'dance'"},
        {supervisor_binary(), "", "no command given"},
        {worker_binary(), "--bogus", "comfy-worker: unknown option '--bogus'"},
        {worker_binary(), "", "comfy-worker: no pack given"},
        {worker_binary(), "--pack", "--pack needs a FILE"},
        {COMFY_SOAK_PATH, "--seeds 1", "comfy-soak: unknown option '--seeds'"},
        {COMFY_SOAK_PATH, "--json=yes", "--json takes no value"},
        {comfyctl_binary(), "stop", "comfyctl: stop needs a pack NAME; see comfyctl stop --help"},
    };
    for (const auto& row : bad) {
        INFO(row.binary << " " << row.arguments);
        const auto ran = run(row.binary, row.arguments, folder);
        CHECK(ran.status == 2);
        CHECK(ran.out.empty());
        CHECK(lines(ran.err) == 1);
        CHECK_THAT(ran.err, Contains(row.message));
    }
    // A trace whose name starts with a dash goes after `--`, and is then a file like any other.
    const auto dashed = run(supervisor_binary(), "replay -- --help", folder);
    CHECK(dashed.status == 2);
    CHECK_THAT(dashed.err, Contains("--help: cannot read"));
}
