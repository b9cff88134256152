// Context::submit validates, then dispatches to the backend and returns the job's fence.
#include "npu/hal/context.h"

#include "npu/hal/buffer.h"

namespace npu::hal {

std::string Context::name() const {
  return device().info().spec + ": context " + std::to_string(id());
}

Result<uint64_t> Context::submit_job_after(const CommandBuffer&, std::span<const Fence>) {
  return make_error(StatusCode::kUnsupported,
                    name() + ": this device cannot chain jobs on fences (no in_syncs); wait for "
                             "the fence on the host, then submit");
}

Result<Fence> Context::submit(const CommandBuffer& commands, std::span<const Fence> wait) {
  if (!commands.commands())
    return make_error(StatusCode::kInvalidArgument, name() + ": submit of an empty command buffer");
  if (&commands.commands()->device() != &device())
    return make_error(StatusCode::kInvalidArgument,
                      name() + ": command buffer belongs to another device");
  if (wait.size() > kMaxWaitFences)
    return make_error(StatusCode::kInvalidArgument,
                      name() + ": a submit waits for at most " + std::to_string(kMaxWaitFences) +
                          " fences, got " + std::to_string(wait.size()));
  for (const Fence& f : wait) {
    if (!f.valid() || &f.context()->device() != &device())
      return make_error(StatusCode::kInvalidArgument,
                        name() + ": a wait fence is empty or of another device");
  }
  if (!wait.empty() && !device().info().wait_fences)
    return submit_job_after(commands, wait).status();  // the backend's UNSUPPORTED message
  uint64_t seq = 0;
  if (wait.empty()) {
    NPU_ASSIGN_OR_RETURN(seq, submit_job(commands));
  } else {
    NPU_ASSIGN_OR_RETURN(seq, submit_job_after(commands, wait));
  }
  return Fence(shared_from_this(), seq, commands.keep_alive());
}

Status Context::execute(std::span<const Fence> wait, std::span<const CommandBuffer> commands,
                        std::vector<Fence>* signal) {
  if (signal == nullptr)
    return make_error(StatusCode::kInvalidArgument, name() + ": execute without a signal list");
  for (size_t i = 0; i < commands.size(); ++i) {
    std::span<const Fence> after = wait;
    if (i > 0) after = std::span<const Fence>(&signal->back(), 1);
    NPU_ASSIGN_OR_RETURN(Fence f, submit(commands[i], after));
    signal->push_back(std::move(f));
  }
  return Status::ok();
}

}  // namespace npu::hal
