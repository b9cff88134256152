// The trace replayer (docs/replay.md); see replay.h.
#include "replay.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "npu/driver/kmd.h"
#include "npu/hal/file.h"
#include "npu/hw/config.h"
#include "uapi/drm/npu_accel.h"

namespace npu::replay {
namespace {

using driver::JobResult;
using driver::UmdDevice;
namespace hw = npu::hw;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kDefaultTimeoutCycles = 100'000'000;

// A failed check or a bad line: the message already names TRACE:LINE.
struct Failure {
  std::string message;
};

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::map<std::string, uint32_t> register_names() {
  std::map<std::string, uint32_t> m;
  for (const auto& r : hw::reg::kNamedRegisters) m[std::string(r.name)] = r.offset;
  return m;
}

const char* const kJobStatus[] = {"SUCCESS", "ABORTED", "TIMEOUT", "PAGE_FAULT", "DEVICE_ERROR"};

struct Bo {
  std::string name;
  uint32_t handle = 0;
  uint64_t va = 0, size = 0;
  std::byte* ptr = nullptr;
};

class Replayer {
 public:
  Replayer(UmdDevice& dev, std::string path, const Options& options)
      : dev_(dev), path_(std::move(path)), opt_(options), verbose_(options.verbose && options.out != nullptr),
        regs_(register_names()) {
    const auto& i = dev_.info();
    vars_["ARRAY_DIM"] = i.array_dim;
    vars_["DEVICE_ID"] = i.device_id;
    vars_["ISA_VERSION"] = i.isa_version;
    vars_["FINGERPRINT_LO"] = static_cast<uint32_t>(i.fingerprint);
    vars_["FINGERPRINT_HI"] = static_cast<uint32_t>(i.fingerprint >> 32);
    vars_["NUM_QUEUES"] = i.num_queues;
    vars_["ACT_SP_ROWS"] = i.act_sp_rows;
    vars_["WGT_SP_TILES"] = i.wgt_sp_tiles;
    vars_["ACC_SP_ROWS"] = i.acc_sp_rows;
    vars_["PAGE_SIZE"] = i.page_size;
    const auto slash = path_.rfind('/');
    dir_ = slash == std::string::npos ? "." : path_.substr(0, slash);
  }
  ~Replayer() {
    if (ctx_ != 0) dev_.ctx_destroy(ctx_);
    for (const Bo& b : bos_) dev_.bo_destroy(b.handle);
  }

  // Runs the whole trace. Throws Failure on the first failed line.
  void run(std::istream& in) {
    std::string text;
    sample_cycles();
    while (std::getline(in, text)) {
      ++line_;
      const auto hash = text.find('#');
      if (hash != std::string::npos) text.resize(hash);
      std::istringstream ss(text);
      std::vector<std::string> t;
      for (std::string w; ss >> w;) t.push_back(w);
      if (t.empty()) continue;
      if (verbose_) print("%s:%d: %s\n", path_.c_str(), line_, text.c_str());
      execute(t);
      ++commands_;
      sample_cycles();
    }
  }

  int commands() const { return commands_; }
  uint64_t cycles() const { return cycles_; }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Failure{path_ + ":" + std::to_string(line_) + ": " + what};
  }

  void need(const std::vector<std::string>& t, size_t lo, size_t hi, const char* usage) const {
    if (t.size() < lo || t.size() > hi) fail(t[0] + ": expected '" + usage + "'");
  }

  // number | $NAME, joined by + and -.
  uint64_t expr(const std::string& s) const {
    if (s.empty()) fail("empty value");
    uint64_t total = 0;
    size_t pos = 0;
    bool negate = false;
    while (pos <= s.size()) {
      size_t end = pos + 1;
      while (end < s.size() && s[end] != '+' && s[end] != '-') ++end;
      const std::string term = s.substr(pos, std::min(end, s.size()) - pos);
      uint64_t v = 0;
      if (term.empty()) fail("bad value '" + s + "'");
      if (term[0] == '$') {
        auto it = vars_.find(term.substr(1));
        if (it == vars_.end())
          fail("unknown variable '" + term + "' (defined by bo, capture, set, or built in; see docs/replay.md)");
        v = it->second;
      } else {
        char* e = nullptr;
        errno = 0;
        v = std::strtoull(term.c_str(), &e, 0);
        if (e == term.c_str() || *e != '\0' || errno != 0 || term[0] == '-')
          fail("bad number '" + term + "' in '" + s + "' (decimal, 0x hex, or $VAR)");
      }
      total = negate ? total - v : total + v;
      if (end >= s.size()) break;
      negate = s[end] == '-';
      pos = end + 1;
    }
    return total;
  }

  uint32_t expr32(const std::string& s) const {
    const uint64_t v = expr(s);
    if (v > 0xFFFFFFFFull) fail("value '" + s + "' = " + hex(v) + " does not fit in 32 bits");
    return static_cast<uint32_t>(v);
  }

  uint32_t reg(const std::string& s) const {
    std::string up = s;
    for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (auto it = regs_.find(up); it != regs_.end()) return it->second;
    if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '$')) {
      const uint32_t off = expr32(s);
      if (off % 4 != 0 || off >= hw::reg::REGISTER_SPACE_BYTES)
        fail("register offset " + hex(off) + " is not 4-byte aligned inside the register space (0.." +
             hex(hw::reg::REGISTER_SPACE_BYTES - 4) + ")");
      return off;
    }
    fail("unknown register '" + s + "' (use a name such as STATUS, RING_TAIL2, CYCLES_LO, or a byte offset)");
  }

  std::string reg_name(uint32_t off) const {
    for (const auto& [name, o] : regs_)
      if (o == off) return name;
    return hex(off);
  }

  void check_errno(int err, const std::string& what) const {
    if (err != 0) fail(what + ": " + dev_.describe_error(err));
  }

  // The CPU view of [va, va + len) inside one BO of this trace.
  std::byte* mem(uint64_t va, uint64_t len) const {
    for (const Bo& b : bos_)
      if (va >= b.va && va - b.va <= b.size && len <= b.size - (va - b.va)) return b.ptr + (va - b.va);
    fail("address range " + hex(va) + "+" + hex(len) + " is not inside one buffer object of this trace ('bo NAME SIZE' "
         "allocates one and defines $NAME)");
  }

  // load/check data: even-length hex bytes, 0x/$ 32-bit little-endian words, or a file path.
  std::vector<std::byte> data(const std::vector<std::string>& t, size_t first) const {
    std::vector<std::byte> out;
    for (size_t i = first; i < t.size(); ++i) {
      const std::string& s = t[i];
      const bool is_hex = s.size() % 2 == 0 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
      if (s.rfind("0x", 0) == 0 || s.rfind("0X", 0) == 0 || s[0] == '$') {
        const uint32_t w = expr32(s);
        for (int b = 0; b < 4; ++b) out.push_back(static_cast<std::byte>((w >> (8 * b)) & 0xFF));
      } else if (is_hex) {
        for (size_t k = 0; k < s.size(); k += 2)
          out.push_back(static_cast<std::byte>(std::stoul(s.substr(k, 2), nullptr, 16)));
      } else {
        if (!opt_.allow_files) fail("'" + s + "': data from files is not allowed in this replay");
        const std::string file = (s[0] == '/' ? s : dir_ + "/" + (s[0] == '@' ? s.substr(1) : s));
        auto bytes = npu::read_file(file, npu::kMaxTextFileBytes, "data");
        if (!bytes.is_ok())
          fail("cannot read file '" + file + "': " + bytes.status().message() +
               " (data is even-length hex bytes, 0x words, $VARs, or a file path)");
        for (uint8_t c : bytes.value()) out.push_back(static_cast<std::byte>(c));
      }
    }
    if (out.empty()) fail(t[0] + ": no data");
    return out;
  }

  // Device cycles, summed across resets (the CYCLES counter restarts at every reset).
  void sample_cycles() {
    std::vector<uint64_t> c;
    if (dev_.read_counters(&c) != 0 || c.empty()) return;
    const uint64_t now = c[static_cast<size_t>(hw::Counter::kCycles)];
    cycles_ += now >= last_cycles_ ? now - last_cycles_ : now;
    last_cycles_ = now;
  }

  void ensure_context() {
    if (ctx_ == 0) check_errno(dev_.ctx_create(priority_, &ctx_), "creating a context");
  }

  void execute(const std::vector<std::string>& t) {
    const std::string& op = t[0];
    if (op == "write") {
      need(t, 3, 3, "write REG VALUE");
      const uint32_t off = reg(t[1]), v = expr32(t[2]);
      check_errno(dev_.reg_write(off, v), "write " + reg_name(off));
    } else if (op == "read") {
      need(t, 2, 4, "read REG [MASK EXPECTED]");
      if (t.size() == 3) fail("read: give both MASK and EXPECTED, or neither");
      const uint32_t off = reg(t[1]);
      uint32_t v = 0;
      check_errno(dev_.reg_read(off, &v), "read " + reg_name(off));
      if (t.size() == 2) {
        print("%s = 0x%08x\n", reg_name(off).c_str(), v);
        return;
      }
      const uint32_t mask = expr32(t[2]), want = expr32(t[3]);
      if ((v & mask) != (want & mask)) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "read %s: got 0x%08x, expected 0x%08x under mask 0x%08x (differing bits 0x%08x)",
                      reg_name(off).c_str(), v, want & mask, mask, (v ^ want) & mask);
        fail(buf);
      }
    } else if (op == "capture") {
      need(t, 3, 3, "capture NAME REG");
      const uint32_t off = reg(t[2]);
      uint32_t v = 0;
      check_errno(dev_.reg_read(off, &v), "read " + reg_name(off));
      vars_[t[1]] = v;
    } else if (op == "set") {
      need(t, 3, 3, "set NAME VALUE");
      vars_[t[1]] = expr(t[2]);
    } else if (op == "bo") {
      need(t, 3, 4, "bo NAME SIZE [ro]");
      if (t.size() == 4 && t[3] != "ro") fail("bo: the optional flag is 'ro' (device read-only)");
      if (vars_.count(t[1])) fail("bo: $" + t[1] + " is already defined");
      Bo b;
      b.name = t[1];
      npu::driver::BoInfo info;
      check_errno(dev_.bo_create(expr(t[2]), t.size() == 4 ? DRM_NPU_BO_DEVICE_RDONLY : 0u, &info), "bo " + t[1]);
      b.handle = info.handle;
      b.va = info.npu_va;
      b.size = info.size;
      void* p = nullptr;
      if (int err = dev_.bo_map(b.handle, &p); err != 0) {
        dev_.bo_destroy(b.handle);
        check_errno(err, "mapping bo " + t[1]);
      }
      b.ptr = static_cast<std::byte*>(p);
      vars_[b.name] = b.va;
      vars_[b.name + "_SIZE"] = b.size;
      bos_.push_back(b);
      if (verbose_) print("bo %s: NPU VA 0x%" PRIx64 ", %" PRIu64 " bytes\n", b.name.c_str(), b.va, b.size);
    } else if (op == "load") {
      need(t, 3, 1u << 20, "load ADDR DATA...");
      const uint64_t va = expr(t[1]);
      const auto bytes = data(t, 2);
      std::memcpy(mem(va, bytes.size()), bytes.data(), bytes.size());
    } else if (op == "check") {
      need(t, 3, 1u << 20, "check ADDR DATA...");
      const uint64_t va = expr(t[1]);
      const auto bytes = data(t, 2);
      const std::byte* m = mem(va, bytes.size());
      for (size_t i = 0; i < bytes.size(); ++i)
        if (m[i] != bytes[i]) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "check: byte at 0x%" PRIx64 " is 0x%02x, expected 0x%02x", va + i,
                        static_cast<unsigned>(m[i]), static_cast<unsigned>(bytes[i]));
          fail(buf);
        }
    } else if (op == "dump") {
      need(t, 3, 4, "dump ADDR LEN [FILE]");
      const uint64_t va = expr(t[1]), len = expr(t[2]);
      const std::byte* m = mem(va, len);
      if (t.size() == 4) {
        if (!opt_.allow_files) fail("dump: writing files is not allowed in this replay");
        const std::string file = t[3][0] == '/' ? t[3] : dir_ + "/" + t[3];
        std::ofstream f(file, std::ios::binary);
        f.write(reinterpret_cast<const char*>(m), static_cast<std::streamsize>(len));
        if (!f) fail("dump: cannot write '" + file + "'");
        return;
      }
      if (opt_.out == nullptr) return;
      for (uint64_t i = 0; i < len; i += 16) {
        print("%08" PRIx64 ":", va + i);
        for (uint64_t k = i; k < std::min(len, i + 16); ++k) print(" %02x", static_cast<unsigned>(m[k]));
        print("\n");
      }
    } else if (op == "context") {
      need(t, 1, 2, "context [PRIORITY]");
      const uint32_t p = t.size() == 2 ? expr32(t[1]) : DRM_NPU_PRIORITY_NORMAL;
      if (p > DRM_NPU_PRIORITY_REALTIME) fail("context: priority is 0 (LOW) .. 3 (REALTIME)");
      if (ctx_ != 0) dev_.ctx_destroy(ctx_);
      ctx_ = 0;
      priority_ = p;
      ensure_context();
    } else if (op == "submit") {
      need(t, 3, 3, "submit CMD_ADDR LEN");
      ensure_context();
      const uint64_t va = expr(t[1]), len = expr(t[2]);
      mem(va, len);  // must lie in one BO
      const Bo* cmd = nullptr;
      for (const Bo& b : bos_)
        if (va >= b.va && va < b.va + b.size) cmd = &b;
      std::vector<uint32_t> handles;
      for (const Bo& b : bos_) handles.push_back(b.handle);
      uint64_t seq = 0;
      check_errno(dev_.submit(ctx_, handles, cmd->handle, va - cmd->va, len, &seq), "submit");
      pending_.push_back(seq);
    } else if (op == "wait-irq") {
      need(t, 1, 2, "wait-irq [TIMEOUT_CYCLES]");
      wait_irq(std::min(t.size() == 2 ? expr(t[1]) : kDefaultTimeoutCycles, opt_.max_wait_cycles));
    } else if (op == "job") {
      need(t, 2, 4, "job STATUS [ERROR_CODE [ERROR_ADDR]]");
      check_job(t);
    } else if (op == "reset") {
      need(t, 1, 1, "reset");
      check_errno(dev_.reset(), "reset");
    } else if (op == "echo") {
      std::string s;
      for (size_t i = 1; i < t.size(); ++i) s += (i > 1 ? " " : "") + t[i];
      print("%s\n", s.c_str());
    } else {
      fail("unknown command '" + op + "' (write, read, capture, set, bo, load, check, dump, context, submit, "
           "wait-irq, job, reset, echo; see docs/replay.md)");
    }
  }

  // Waits until every submitted job has ended: the driver's interrupt handler ends a job on its
  // FENCE interrupt, or on the error interrupt (after which it resets the device).
  void wait_irq(uint64_t timeout_cycles) {
    if (pending_.empty()) fail("wait-irq: no job is outstanding (submit one first)");
    const uint64_t start_cycles = cycles_;
    const auto start = Clock::now();
    while (!pending_.empty()) {
      JobResult r;
      const int err = dev_.wait(ctx_, pending_.front(), npu::driver::deadline_after_ms(50), &r);
      sample_cycles();
      if (err == ETIMEDOUT) {
        if (cycles_ - start_cycles > timeout_cycles)
          fail("wait-irq: no interrupt ended job " + std::to_string(pending_.front()) + " within " +
               std::to_string(timeout_cycles) + " device cycles");
        if (Clock::now() - start > opt_.wall_clock_cap)
          fail("wait-irq: the device made no visible progress for " +
               std::to_string(opt_.wall_clock_cap.count() / 1000) + " s of wall-clock time");
        continue;
      }
      if (err != 0 && err != EIO) check_errno(err, "wait");
      last_ = r;
      have_last_ = true;
      if (verbose_ || r.status != DRM_NPU_JOB_SUCCESS) {
        std::string detail;
        if (r.device_error != 0) {
          detail = hw::error_name(static_cast<hw::ErrorCode>(r.device_error));
          detail.append(" at ").append(hex(r.error_addr));
        }
        print("job %" PRIu64 ": %s %s, %" PRIu64 " device cycles\n", pending_.front(),
                    r.status < 5 ? kJobStatus[r.status] : "?", detail.c_str(), r.device_cycles);
      }
      pending_.erase(pending_.begin());
    }
  }

  void check_job(const std::vector<std::string>& t) {
    if (!have_last_) fail("job: no job has ended yet (submit, then wait-irq)");
    uint32_t status = 99;
    for (uint32_t s = 0; s < 5; ++s)
      if (t[1] == kJobStatus[s]) status = s;
    if (status == 99) fail("job: unknown status '" + t[1] + "' (SUCCESS, ABORTED, TIMEOUT, PAGE_FAULT, DEVICE_ERROR)");
    std::string got = std::string(last_.status < 5 ? kJobStatus[last_.status] : "?") + " " +
                      std::string(hw::error_name(static_cast<hw::ErrorCode>(last_.device_error))) + " " +
                      hex(last_.error_addr);
    if (last_.status != status) fail("job: ended " + got + ", expected " + t[1]);
    if (t.size() >= 3) {
      uint32_t code = 99;
      for (uint32_t c = 0; c <= 6; ++c)
        if (t[2] == hw::error_name(static_cast<hw::ErrorCode>(c))) code = c;
      if (code == 99) code = expr32(t[2]);
      if (last_.device_error != code) fail("job: ended " + got + ", expected error " + t[2]);
    }
    if (t.size() == 4 && last_.error_addr != expr(t[3]))
      fail("job: ended " + got + ", expected error address " + hex(expr(t[3])));
  }

  // printf to Options::out (nothing when it is null); `this` is argument 1.
  __attribute__((format(printf, 2, 3))) void print(const char* fmt, ...) const {
    if (opt_.out == nullptr) return;
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(opt_.out, fmt, ap);
    va_end(ap);
  }

  UmdDevice& dev_;
  std::string path_, dir_;
  Options opt_;
  bool verbose_;
  std::map<std::string, uint32_t> regs_;
  std::map<std::string, uint64_t> vars_;
  std::vector<Bo> bos_;
  uint32_t ctx_ = 0;
  uint32_t priority_ = DRM_NPU_PRIORITY_NORMAL;
  std::vector<uint64_t> pending_;
  JobResult last_;
  bool have_last_ = false;
  int line_ = 0;
  int commands_ = 0;
  uint64_t cycles_ = 0, last_cycles_ = 0;
};

}  // namespace

Outcome run_trace(UmdDevice& dev, std::string_view text, const std::string& path, const Options& options) {
  Outcome out;
  std::istringstream in{std::string(text)};
  Replayer r(dev, path, options);
  try {
    r.run(in);
  } catch (const Failure& f) {
    out.failure = f.message;
  }
  out.commands = r.commands();
  out.device_cycles = r.cycles();
  if (out.passed() && out.commands == 0)
    out.failure = path + ": no commands (only blank lines and comments); see docs/replay.md";
  return out;
}

}  // namespace npu::replay
