// Input files and JSON text within bounds: only a regular file is read (a FIFO neither
// blocks nor is read, /dev/zero is not read forever), never more than its cap; JSON nested
// deeper than kMaxJsonDepth, or holding a number no double holds, is refused with its
// place; and a value shown in a message costs what is shown, however large or deep.
#include <catch2/catch.hpp>

#include "shared/input_file.hpp"
#include "shared/json_errors.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace comfy;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;

namespace {

// A scratch folder, removed when the test ends.
class Scratch {
public:
    Scratch() : path_(fs::temp_directory_path() / ("comfy-input-test-" + std::to_string(::getpid()))) {
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~Scratch() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(path_ / name, std::ios::binary) << text;
        return (path_ / name).string();
    }
    std::string fifo(const std::string& name) const {
        const auto file = path_ / name;
        REQUIRE(::mkfifo(file.c_str(), 0600) == 0);
        return file.string();
    }
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

std::string read_error(const std::string& path, std::uint64_t max_bytes) {
    try {
        read_input_file(path, max_bytes);
    } catch (const InputFileError& error) {
        return error.what();
    }
    FAIL("read: " << path);
    return {};
}

JsonTextError parse_error(const std::string& text) {
    try {
        parse_json<nlohmann::json>(text);
    } catch (const JsonTextError& error) {
        return error;
    }
    FAIL("parsed: " << text.substr(0, 80));
    throw;
}

std::string nested(std::size_t depth, const std::string& inside = "") {
    return std::string(depth, '[') + inside + std::string(depth, ']');
}

}  // namespace

TEST_CASE("a regular file is read whole, up to its cap") {
    const Scratch scratch;
    const auto file = scratch.write("a.json", "{\"a\": 1}");
    CHECK(read_input_file(file, 8) == "{\"a\": 1}");
    CHECK(read_error(file, 7) == file + ": cannot read: expected a file of at most 7B, found 8 bytes");
    CHECK(read_error((scratch.path() / "missing").string(), 8) ==
          (scratch.path() / "missing").string() + ": cannot read: No such file or directory");
}

TEST_CASE("a FIFO, a character device or a directory is refused at once, never read") {
    const Scratch scratch;
    // Before: the open of a FIFO without a writer blocked forever, and /dev/zero was read
    // until memory ran out.
    const auto fifo = scratch.fifo("config.json");
    CHECK(read_error(fifo, kMaxJsonFileBytes) == fifo + ": cannot read: expected a regular file, found a FIFO (named pipe)");
    CHECK(read_error("/dev/zero", kMaxJsonFileBytes) ==
          "/dev/zero: cannot read: expected a regular file, found a character device");
    CHECK(read_error(scratch.path().string(), kMaxJsonFileBytes) ==
          scratch.path().string() + ": cannot read: expected a regular file, found a directory");
    // A link to a regular file is read as the file.
    fs::create_symlink(scratch.write("real.json", "1"), scratch.path() / "link.json");
    CHECK(read_input_file((scratch.path() / "link.json").string(), 8) == "1");
}

TEST_CASE("a file past its cap is refused from its size, without reading it") {
    const Scratch scratch;
    const auto file = (scratch.path() / "big.json").string();
    {
        std::ofstream create(file);
    }
    fs::resize_file(file, kMaxJsonFileBytes + 1);  // sparse: nothing written
    CHECK(read_error(file, kMaxJsonFileBytes) == file + ": cannot read: expected a file of at most 16MiB, found 16777217 bytes");
}

TEST_CASE("a file that grows past its cap while being read is refused") {
    const Scratch scratch;
    const auto path = scratch.write("growing.jsonl", std::string(100, 'a'));
    InputFile file(path, 150);
    std::ofstream(path, std::ios::app) << std::string(100, 'b');
    char buffer[1024];
    CHECK_THROWS_WITH(file.read(buffer, sizeof buffer),
                      path + ": cannot read: expected a file of at most 150B, found more (it grew while being read)");
}

TEST_CASE("a stream over an input file reads lines, and its cap leaves the reading call as an InputFileError") {
    const Scratch scratch;
    const auto path = scratch.write("trace.jsonl", "one\ntwo\n");
    InputFileStream lines(path, 100);
    std::string line;
    CHECK(std::getline(lines, line));
    CHECK(line == "one");
    CHECK(std::getline(lines, line));
    CHECK(line == "two");
    CHECK_FALSE(std::getline(lines, line));

    InputFileStream growing(path, 8);
    std::ofstream(path, std::ios::app) << "three\n";
    CHECK_THROWS_AS(std::getline(growing, line), InputFileError);
    CHECK_THROWS_AS(InputFileStream("/dev/zero", 8), InputFileError);
}

TEST_CASE("JSON nested deeper than the limit is refused with its place, however deep") {
    CHECK(parse_json<nlohmann::json>(nested(kMaxJsonDepth)).is_array());
    // Before: 65,000 levels overflowed the stack (and a message dumped the whole value).
    for (const std::size_t depth : {kMaxJsonDepth + 1, std::size_t{65000}, std::size_t{1'000'000}}) {
        const auto error = parse_error(nested(depth));
        CHECK_FALSE(error.syntax());
        CHECK(error.byte() == kMaxJsonDepth + 1);
        CHECK(std::string(error.what()) ==
              "at line 1, column 65: expected arrays and objects nested at most 64 deep, found one nested deeper");
    }
    // Objects count as arrays do; the column is counted on the line.
    const std::string objects = "{\"a\":\n  " + std::string(64, '{');
    CHECK_THAT(parse_error(objects).what(), StartsWith("at line 2, column 66: expected arrays and objects"));
    // Brackets inside strings are text, escaped quotes included.
    CHECK(parse_json<nlohmann::json>("[\"" + std::string(100, '[') + "\\\"" + std::string(100, '{') + "\"]").size() == 1);
}

TEST_CASE("a number no double holds is refused with its place, and one that underflows reads as 0") {
    // Before: nlohmann threw out_of_range with no place, which replay did not catch (exit 134).
    const auto error = parse_error("{\"a\": [1,\n 1E400]}");
    CHECK_FALSE(error.syntax());
    CHECK(std::string(error.what()) ==
          "at line 2, column 2: expected a number a double holds (at most about 1.8E308), found 1E400");
    CHECK_THAT(parse_error("-1.5e+999").what(), Contains("found -1.5e+999"));
    CHECK_THAT(parse_error("1" + std::string(400, '0')).what(), Contains("expected a number a double holds"));
    CHECK(parse_json<nlohmann::json>("1E308").get<double>() == 1e308);
    CHECK(parse_json<nlohmann::json>("1E-400").get<double>() == 0.0);
    CHECK(parse_json<nlohmann::json>("[\"1E400\"]")[0] == "1E400");
}

TEST_CASE("text that is not JSON is refused as nlohmann says, with the byte") {
    const auto error = parse_error("{\"a\": x}");
    CHECK(error.syntax());
    CHECK(error.byte() == 7);
    CHECK_THAT(error.what(), StartsWith("not valid JSON: parse error at line 1, column 7: syntax error"));
    CHECK(parse_json<nlohmann::ordered_json>("{\"b\": 1, \"a\": 2}").begin().key() == "b");
}

TEST_CASE("a value shown in a message is cut, and only what is shown is visited") {
    nlohmann::json deep = nlohmann::json::array();
    nlohmann::json* inner = &deep;
    for (int i = 0; i < 1'000'000; ++i) {
        inner->push_back(nlohmann::json::array());
        inner = &inner->back();
    }
    // Before: dump() recursed a million levels and overflowed the stack.
    CHECK(describe_json_value(deep) == std::string(57, '[') + "...");
    nlohmann::json wide = nlohmann::json::array();
    for (int i = 0; i < 100; ++i) wide.push_back(i);
    CHECK(describe_json_value(wide) == wide.dump().substr(0, 57) + "...");
    CHECK(describe_json_value(nlohmann::json{{"a", 1}, {"b", {true, nullptr, "x"}}}) == R"({"a":1,"b":[true,null,"x"]})");
    CHECK(describe_json_value(nlohmann::ordered_json{{"b", 1}, {"a", 2}}) == R"({"b":1,"a":2})");
    CHECK(describe_json_value(std::string(1'000'000, 'k')) == "\"" + std::string(56, 'k') + "...");
    CHECK(describe_json_value(std::string("caf\xc3\xa9")) == "\"caf\\u00e9\"");
}
