// Context::submit validates, then dispatches to the backend and returns the job's fence.
#include "npu/hal/context.h"

#include "npu/hal/buffer.h"

namespace npu::hal {

std::string Context::name() const {
  return device().info().spec + ": context " + std::to_string(id());
}

Result<Fence> Context::submit(const CommandBuffer& commands) {
  if (!commands.commands())
    return make_error(StatusCode::kInvalidArgument, name() + ": submit of an empty command buffer");
  if (&commands.commands()->device() != &device())
    return make_error(StatusCode::kInvalidArgument,
                      name() + ": command buffer belongs to another device");
  NPU_ASSIGN_OR_RETURN(uint64_t seq, submit_job(commands));
  std::vector<std::shared_ptr<Buffer>> keep(commands.uses().begin(), commands.uses().end());
  keep.push_back(commands.commands());
  return Fence(shared_from_this(), seq, std::move(keep));
}

}  // namespace npu::hal
