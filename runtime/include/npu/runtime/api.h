// The runtime's C++ API. The C API is c_api.h.
#pragma once

#include "npu/runtime/host_ops.h"
#include "npu/runtime/model.h"
#include "npu/runtime/quantize.h"
#include "npu/runtime/runtime.h"
#include "npu/runtime/session.h"
