// The HAL public API: one header per concept.
//   device.h          opening devices by spec, DeviceInfo, allocation, contexts
//   buffer.h          reference-counted buffer objects with a CPU mapping
//   context.h         execution contexts (bounded job queues)
//   fence.h           job completion, deadlines, job status -> Status
//   command_buffer.h  one recorded job
//   executable.h      a loaded model image and its per-request instances
//   status.h          Status / Result
#pragma once

#include "npu/hal/buffer.h"
#include "npu/hal/command_buffer.h"
#include "npu/hal/context.h"
#include "npu/hal/device.h"
#include "npu/hal/executable.h"
#include "npu/hal/fence.h"
#include "npu/hal/status.h"
