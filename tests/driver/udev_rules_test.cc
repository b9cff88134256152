// Checks the shipped udev rules and limits file: with `udevadm verify` where this udev has it
// (systemd >= 253), and always with a strict parser of the rules syntax (udev(7)) plus the
// properties the NPU needs (render group, 0660, uaccess, by-path symlink, memlock).
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::string kRules = std::string(NPU_UDEV_DIR) + "/70-npu.rules";
const std::string kLimits = std::string(NPU_UDEV_DIR) + "/90-npu-memlock.conf";

struct Token {
  std::string key;   // without the {attr} part
  std::string attr;
  std::string op;
  std::string value;
};

// Parses one rule line into tokens; returns "" or an error.
std::string parse_rule(const std::string& line, std::vector<Token>* out) {
  static const std::set<std::string> kMatchOnly = {
      "ACTION", "DEVPATH", "KERNEL", "KERNELS", "SUBSYSTEM", "SUBSYSTEMS", "DRIVER",
      "DRIVERS", "ATTRS", "TAGS", "TEST", "PROGRAM", "RESULT", "SYSCTL", "CONST"};
  static const std::set<std::string> kAssignOnly = {"OWNER", "GROUP", "MODE", "RUN", "LABEL",
                                                    "GOTO", "IMPORT", "OPTIONS", "SECLABEL"};
  static const std::set<std::string> kBoth = {"NAME", "SYMLINK", "TAG", "ENV", "ATTR"};
  static const std::set<std::string> kWithAttr = {"ATTR", "ATTRS", "ENV", "IMPORT", "SYSCTL",
                                                  "CONST", "TEST", "RUN", "SECLABEL"};
  static const std::regex kTok(R"re(^\s*([A-Z]+)(\{([^}]*)\})?\s*(==|!=|\+=|-=|:=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$))re");
  std::string rest = line;
  out->clear();
  while (!rest.empty() && rest.find_first_not_of(" \t") != std::string::npos) {
    std::smatch m;
    if (!std::regex_search(rest, m, kTok)) return "cannot parse near: " + rest;
    Token t{m[1], m[3], m[4], m[5]};
    const bool has_attr = m[2].matched;
    if (!kMatchOnly.count(t.key) && !kAssignOnly.count(t.key) && !kBoth.count(t.key)) {
      return "unknown key " + t.key;
    }
    if (has_attr != (kWithAttr.count(t.key) > 0) && t.key != "TEST" && t.key != "RUN" &&
        t.key != "IMPORT") {
      return "key " + t.key + (has_attr ? " takes no {attr}" : " needs an {attr}");
    }
    const bool is_match = t.op == "==" || t.op == "!=";
    if (is_match && kAssignOnly.count(t.key)) return t.key + " cannot be matched";
    if (!is_match && kMatchOnly.count(t.key)) return t.key + " cannot be assigned";
    if (t.key == "MODE" && !std::regex_match(t.value, std::regex("0?[0-7]{3,4}"))) {
      return "MODE must be octal: " + t.value;
    }
    out->push_back(t);
    rest = m.suffix();
    if (m[6] == "" && !rest.empty() && rest.find_first_not_of(" \t") != std::string::npos) {
      return "missing comma before: " + rest;
    }
  }
  return "";
}

// Returns the rule lines (continuations joined, comments dropped), or fails the test.
std::vector<std::string> rule_lines(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<std::string> lines;
  std::string line, acc;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\\') {
      acc += line.substr(0, line.size() - 1);
      continue;
    }
    acc += line;
    const auto first = acc.find_first_not_of(" \t");
    if (first != std::string::npos && acc[first] != '#') lines.push_back(acc);
    acc.clear();
  }
  return lines;
}

TEST(UdevRules, StrictParserAcceptsEveryRule) {
  auto lines = rule_lines(kRules);
  ASSERT_FALSE(lines.empty());
  for (const auto& l : lines) {
    std::vector<Token> toks;
    EXPECT_EQ(parse_rule(l, &toks), "") << l;
  }
}

TEST(UdevRules, StrictParserRejectsBrokenRules) {
  std::vector<Token> toks;
  for (const char* bad : {
           R"(SUBSYSTEM=="accel" GROUP="render")",       // missing comma
           R"(SUBSYSTEM=="accel", GROUP=="render")",     // GROUP cannot be matched
           R"(SUBSYSTEM="accel")",                       // SUBSYSTEM cannot be assigned
           R"(SUBSYSTEM=="accel", MODE="rw")",           // MODE not octal
           R"(SUBSYSTM=="accel")",                       // unknown key
           R"(SUBSYSTEM=="accel, MODE="0660")",          // unbalanced quotes
           R"(ENV=="x")",                                // ENV needs {attr}
       }) {
    EXPECT_NE(parse_rule(bad, &toks), "") << bad;
  }
}

TEST(UdevRules, GrantsRenderGroupUaccessAndBypath) {
  bool perms = false, bypath = false;
  for (const auto& l : rule_lines(kRules)) {
    std::vector<Token> toks;
    ASSERT_EQ(parse_rule(l, &toks), "");
    std::map<std::string, std::string> kv;
    for (const auto& t : toks) kv[t.key + t.attr + t.op] = t.value;
    EXPECT_EQ(kv["SUBSYSTEM=="], "accel") << l;
    EXPECT_EQ(kv["KERNEL=="], "accel[0-9]*") << l;
    EXPECT_EQ(kv["DRIVERS=="], "npu") << l;
    if (kv["GROUP="] == "render" && kv["MODE="] == "0660" && kv["TAG+="] == "uaccess") perms = true;
    if (kv["IMPORTbuiltin="] == "path_id") {
      if (kv["SYMLINK+="].rfind("accel/by-path/", 0) == 0) bypath = true;
    }
  }
  EXPECT_TRUE(perms) << "need GROUP=\"render\", MODE=\"0660\", TAG+=\"uaccess\"";
  EXPECT_TRUE(bypath) << "need IMPORT{builtin}=\"path_id\" and SYMLINK+=\"accel/by-path/...\"";
}

TEST(UdevRules, UdevadmVerifyWhenAvailable) {
  if (system("udevadm verify --help >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "this udevadm has no 'verify' (systemd < 253); the strict parser covers it";
  }
  const std::string cmd = "udevadm verify --resolve-names=never " + kRules + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  const int rc = pclose(p);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << out;
}

TEST(UdevRules, MemlockLimitsFileIsWellFormed) {
  std::ifstream in(kLimits);
  ASSERT_TRUE(in.good()) << kLimits;
  std::string line;
  int entries = 0;
  bool soft = false, hard = false;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream ls(line);
    std::string domain, type, item, value, extra;
    ls >> domain >> type >> item >> value;
    EXPECT_FALSE(ls >> extra) << "extra field in: " << line;
    EXPECT_TRUE(type == "soft" || type == "hard" || type == "-") << line;
    EXPECT_EQ(item, "memlock") << line;
    EXPECT_TRUE(value == "unlimited" || value == "infinity" ||
                std::regex_match(value, std::regex("[0-9]+")))
        << line;
    if (domain == "@render") {
      soft |= type == "soft" || type == "-";
      hard |= type == "hard" || type == "-";
    }
    ++entries;
  }
  EXPECT_GT(entries, 0);
  EXPECT_TRUE(soft && hard) << "@render needs soft and hard memlock entries";
}

}  // namespace
