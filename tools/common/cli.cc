#include "npu/tools/cli.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "npu/hal/number.h"

namespace npu::tools {

// CLI11's layout, with the tool's own synopsis lines first (the README's form of each command,
// "usage: tool ..."), then the description, then the options CLI11 generates from what parses.
class Cli::Formatter final : public CLI::Formatter {
 public:
  static constexpr size_t kWidth = 100;
  void set(const CLI::App* app, std::string synopsis, std::string description) {
    text_[app] = {std::move(synopsis), std::move(description)};
  }
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    std::stringstream out;
    const auto it = text_.find(app);
    if (it == text_.end()) {
      out << make_usage(app, name);
    } else {
      out << it->second.first;
      if (!it->second.second.empty()) out << it->second.second << "\n";
    }
    out << make_positionals(app) << make_groups(app, mode) << make_subcommands(app, mode);
    std::string help = out.str();
    if (help.empty() || help.back() != '\n') help += '\n';
    return help;
  }
  // Descriptions wrapped to kWidth columns (CLI11 indents each line under the first).
  std::string make_option_desc(const CLI::Option* opt) const override {
    return wrap(CLI::Formatter::make_option_desc(opt), kWidth - get_column_width());
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(), wrap(sub->get_description(), kWidth - get_column_width()),
                             get_column_width());
    return out.str();
  }

 private:
  static std::string wrap(const std::string& text, size_t width) {
    std::string out, line;
    std::istringstream words(text);
    for (std::string w; words >> w;) {
      if (!line.empty() && line.size() + 1 + w.size() > width) {
        out += line + "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + w;
    }
    return out + line;
  }
  std::map<const CLI::App*, std::pair<std::string, std::string>> text_;
};

Cli::Cli(std::string tool, std::string synopsis, std::string description)
    : tool_(std::move(tool)), formatter_(std::make_shared<Formatter>()), app_("", tool_) {
  formatter_->column_width(28);
  formatter_->set(&app_, std::move(synopsis), std::move(description));
  app_.formatter(formatter_);
  app_.set_help_flag("-h,--help", "print this help on stdout and exit 0");
}

CLI::App* Cli::add_subcommand(const std::string& name, const std::string& synopsis,
                              const std::string& description) {
  CLI::App* sub = app_.add_subcommand(name, description);
  sub->formatter(formatter_);
  formatter_->set(sub, synopsis, description);
  return sub;
}

namespace {

// The forms every tool's --device takes (a list "sim,accel:0" only where the runtime opens
// several devices); whether the device exists is the driver's to say when it opens it.
std::string check_device(const std::string& spec) {
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string d = spec.substr(start, comma - start);
    const bool digits = d.size() > 6 && d.find_first_not_of("0123456789", 6) == std::string::npos;
    if (d != "sim" && d != "rtl" && !(d.rfind("accel:", 0) == 0 && digits) && d.rfind("/dev/", 0) != 0)
      return "'" + d + "' is not a device: use sim, rtl, accel:N or /dev/accel/accelN";
    start = comma + 1;
  }
  return {};
}

}  // namespace

CLI::Option* Cli::add_device(std::string* spec, CLI::App* app, const std::string& when_absent) {
  return (app ? app : &app_)
      ->add_option("-d,--device", *spec,
                   "the device: sim (functional model), rtl (Verilator RTL), accel:N or "
                   "/dev/accel/accelN; default: " + when_absent)
      ->type_name("SPEC")
      ->check(CLI::Validator(check_device, ""));
}

CLI::Option* Cli::add_json(bool* json, const std::string& what, CLI::App* app) {
  return (app ? app : &app_)->add_flag("--json", *json, "the last line of stdout is one JSON object: " + what);
}

namespace {

// "npu-bench model" when the error is in that subcommand.
std::string command_of(const CLI::App& app, const std::string& tool) {
  std::string cmd = tool;
  const CLI::App* at = &app;
  for (;;) {
    const auto subs = at->get_subcommands();
    if (subs.empty()) break;
    at = subs.front();
    cmd += " " + at->get_name();
  }
  return cmd;
}

std::string one_line(std::string s) {
  for (size_t p; (p = s.find('\n')) != std::string::npos;) s.replace(p, 1, "; ");
  while (!s.empty() && (s.back() == ' ' || s.back() == ';')) s.pop_back();
  return s;
}

}  // namespace

std::optional<int> Cli::parse(int argc, const char* const* argv) {
  try {
    app_.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp&) {
    std::fputs(app_.help().c_str(), stdout);
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app_.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return kExitOk;
  } catch (const UsageError& e) {
    return usage_error(e.what());
  } catch (const CLI::ParseError& e) {
    // An unknown option or a stray argument is the problem to name first, also when CLI11
    // stopped earlier at a required argument it took for missing.
    const std::string see = "; see " + command_of(app_, tool_) + " --help";
    const auto extras = app_.remaining(true);
    if (!extras.empty()) {
      const std::string& first = extras.front();
      if (first.size() > 1 && first[0] == '-') return usage_error("unknown option '" + first + "'" + see);
      return usage_error("unexpected argument '" + first + "'" + see);
    }
    return usage_error(one_line(e.what()) + see);
  }
}

int Cli::error(const std::string& message, int code) const {
  std::fprintf(stderr, "%s: error: %s\n", tool_.c_str(), message.c_str());
  return code;
}

std::string device_spec(const std::string& flag, const std::string& fallback) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("NPU_DEVICE"); env != nullptr && *env != '\0') return env;
  return fallback;
}

std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string& spec) {
  const size_t eq = spec.find('=');
  const std::string bad = "input shape: --input-shape expects NAME=D0,D1,... with positive integers as "
                          "dimensions (got '" + spec + "')";
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) throw UsageError(bad);
  std::vector<int64_t> dims;
  size_t pos = eq + 1;
  while (pos <= spec.size()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    // Bounded here only against overflow; the compiler checks them against the model.
    const auto d = npu::parse_uint(std::string_view(spec).substr(pos, comma - pos), INT64_MAX);
    if (!d || *d == 0) throw UsageError(bad);
    dims.push_back(static_cast<int64_t>(*d));
    pos = comma + 1;
  }
  return {spec.substr(0, eq), std::move(dims)};
}

std::map<std::string, std::vector<int64_t>> parse_input_shapes(const std::vector<std::string>& specs) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& s : specs) {
    auto [name, dims] = parse_input_shape(s);
    shapes[name] = std::move(dims);
  }
  return shapes;
}

uint64_t parse_count(const std::string& option, const std::string& text, uint64_t min, uint64_t max) {
  const auto n = npu::parse_uint(text, max);
  if (!n || *n < min)
    throw UsageError(option + " '" + text + "' is not a number from " + std::to_string(min) + " to " +
                     (max == UINT64_MAX ? std::string("2^64-1") : std::to_string(max)));
  return *n;
}

std::string json_line(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

}  // namespace npu::tools
