// Command-line conventions shared by every tool (docs/architecture.md §7): arguments are parsed
// by CLI11, --json output is written by nlohmann::json, and every tool ends with the same exit
// statuses. Build-time only: no installed header includes this one.
//
//   exit 0  success
//   exit 1  the work, a device or a file failed ("TOOL: error: ..." on stderr)
//   exit 2  a usage error: an unknown option, a missing or malformed value, a missing
//           argument ("TOOL: error: ...; see TOOL --help", one line on stderr)
//
// --help and -h print the usage (the synopsis lines, then the options CLI11 knows, so the two
// cannot drift apart) on stdout and exit 0. `tests/tools/check_help.py` checks that the README
// lists the same options.
//
// Threading: everything here is for a tool's main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace npu::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A usage problem found after parsing (a value out of range, options that do not go together).
// Cli::run() turns it into the one-line message and exit 2. `what()` names the problem and the
// fix, without the "TOOL: error: " prefix.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The tool's command line: a CLI::App with the project's help layout and error messages.
class Cli {
 public:
  // `tool` is the program name in messages; `synopsis` the usage lines ("usage: tool ...\n"
  // "       tool ...\n"), printed first by --help; `description` follows them.
  Cli(std::string tool, std::string synopsis, std::string description = {});
  Cli(const Cli&) = delete;
  Cli& operator=(const Cli&) = delete;

  CLI::App& app() { return app_; }
  const std::string& tool() const { return tool_; }

  // A subcommand (`tool NAME ...`) with its own synopsis for `tool NAME --help`.
  CLI::App* add_subcommand(const std::string& name, const std::string& synopsis,
                           const std::string& description);

  // -d/--device SPEC on `app` (default: this app): sim, rtl, accel:N or /dev/accel/accelN,
  // with the same meaning in every tool; left empty when not given (see device_spec()).
  // `when_absent` is the help text's default.
  CLI::Option* add_device(std::string* spec, CLI::App* app = nullptr,
                          const std::string& when_absent = "$NPU_DEVICE, else sim");
  // --json on `app`: one JSON object on the last line of stdout.
  CLI::Option* add_json(bool* json, const std::string& what, CLI::App* app = nullptr);

  // Parses argv. Returns nullopt when the tool should go on; otherwise the exit status to end
  // with: 0 after --help (printed on stdout), 2 after a usage error (printed on stderr).
  std::optional<int> parse(int argc, const char* const* argv);

  // Prints "TOOL: error: MESSAGE" on stderr and returns `code`.
  int error(const std::string& message, int code = kExitFailure) const;
  int usage_error(const std::string& message) const { return error(message, kExitUsage); }

 private:
  class Formatter;
  std::string tool_;
  std::shared_ptr<Formatter> formatter_;
  CLI::App app_;
};

// Runs `body` (a tool's work after parsing) and maps what escapes it to an exit status:
// UsageError to 2 with its message, any other exception to 1 ("internal error: ... (please
// report it)"), which no correct run reaches.
template <typename Body>
int run_guarded(const Cli& cli, Body&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    return cli.usage_error(e.what());
  } catch (const std::exception& e) {
    return cli.error(std::string("internal error: ") + e.what() + " (please report it)", kExitFailure);
  }
}

// The device a tool opens: `flag` (--device) if given, else $NPU_DEVICE, else `fallback`.
std::string device_spec(const std::string& flag, const std::string& fallback = "sim");

// --input-shape NAME=D0,D1,...: the name and its dimensions (positive; their size against the
// model is the compiler's to check). Throws UsageError naming the expected form.
std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string& spec);
// Every --input-shape value of `specs` into a map (a later NAME replaces an earlier one).
std::map<std::string, std::vector<int64_t>> parse_input_shapes(
    const std::vector<std::string>& specs);

// A number option given as text (so that "-1" and "2^64" get a message naming the range):
// the value of `text` from `min` to `max`, decimal or 0x hex. Throws UsageError
// "OPTION 'TEXT' is not a number from MIN to MAX".
uint64_t parse_count(const std::string& option, const std::string& text, uint64_t min,
                     uint64_t max);

// `j` as one line of JSON. Strings that are not valid UTF-8 (names read from a corrupt file)
// have the bad bytes replaced by U+FFFD rather than failing the dump.
std::string json_line(const nlohmann::json& j);
// A finite double as a JSON number, anything else (NaN, infinity) as null.
nlohmann::json json_number(double v);

}  // namespace npu::tools
