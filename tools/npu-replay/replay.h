// The register/memory trace replayer behind npu-replay (format: docs/replay.md), as a library
// so that the tool, its tests and the replay fuzzer (fuzz_replay.cc) run the same parser and
// executor.
//
// A trace is text: one command per line, executed in order through the user-mode driver
// (registers on the privileged REG_READ/REG_WRITE/RESET path, memory in buffer objects, jobs
// through SUBMIT/WAIT). Parsing is line by line as the replay goes, because values refer to
// variables that earlier lines define ($BO addresses, captured registers).
//
// Threading: one replay at a time per UmdDevice; the call blocks until the trace ends.
// Ownership: the replay creates its context and buffer objects on the device and destroys them
// before it returns, whatever the outcome.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "npu/driver/umd.h"

namespace npu::replay {

struct Options {
  // Echo every line, every BO's address and every job result on `out`.
  bool verbose = false;
  // Where `read`, `dump` (without FILE), `echo` and verbose output go; nullptr prints nothing.
  std::FILE* out = stdout;
  // Whether data arguments may name files and `dump` may write one. Off, such a line fails
  // with an error; the fuzzer runs with it off, so that no input touches the file system.
  bool allow_files = true;
  // Upper bound on any `wait-irq` timeout, in device cycles (a trace may ask for less).
  uint64_t max_wait_cycles = UINT64_MAX;
  // Wall-clock bound of one wait-irq on a device that makes no visible progress.
  std::chrono::milliseconds wall_clock_cap = std::chrono::seconds(600);
};

struct Outcome {
  // Empty when every check passed; otherwise "TRACE:LINE: what failed".
  std::string failure;
  int commands = 0;         // commands executed (blank lines and comments excluded)
  uint64_t device_cycles = 0;  // summed across resets
  bool passed() const { return failure.empty(); }
};

// Runs `text` (read from `path`, which names the trace in messages and is the base directory
// of relative data files) on `dev`. Stops at the first failed check or bad line. A trace
// without commands fails ("no commands"). Never throws for anything in the trace.
Outcome run_trace(driver::UmdDevice& dev, std::string_view text, const std::string& path,
                  const Options& options = {});

}  // namespace npu::replay
