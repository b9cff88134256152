/* SPDX-License-Identifier: MIT */
/*
 * npu_accel.h - user-space interface of the "npu" DRM accel driver.
 *
 * The device node is /dev/accel/accelN (major 261). User space first checks
 * DRM_IOCTL_VERSION: name "npu", major DRM_NPU_UAPI_MAJOR.
 *
 * Rules that hold for every ioctl below:
 *  - Only __u32/__u64/__s64; user pointers are carried in __u64; every struct is naturally
 *    aligned with explicit padding and a size that is a multiple of 8.
 *  - flags, pad and reserved fields must be zero; unknown flags are refused with EINVAL.
 *  - Structs only ever grow at the end. The kernel copies in the size encoded in the ioctl
 *    number by the caller, zero-fills the rest, and copies out the caller's size, so old
 *    binaries keep working and new fields read as zero from old callers.
 *  - Command numbers are append-only (table below, separate from the DRM_IOWR wrappers).
 *
 * errno contract (returned by ioctl() as -1 with errno):
 *  EINVAL     bad argument, flags, size, alignment, unknown ioctl number or query type
 *  ENOENT     unknown BO handle or context id (including ids of another open file)
 *  EFAULT     a user pointer could not be read or written
 *  EBUSY      the context's queue is full; wait for an older job and retry
 *  ENOSPC     the device-wide context limit is reached (DRM_NPU_PARAM_MAX_CONTEXTS)
 *  ENOMEM     device memory or NPU address space exhausted
 *  ETIMEDOUT  only from WAIT: the deadline passed before the job ended
 *  EBADFD     the context is banned after a page fault; destroy it and create a new one
 *  EIO        from WAIT: the job was aborted (reset caused by another job, context
 *             destroyed or banned); the job status is still written
 *  ENODEV     the device is gone (unplugged); close the file and reopen
 *  EOPNOTSUPP the capability is absent
 *  EACCES     privileged operation (REG_READ, REG_WRITE, RESET) without privilege
 *  ENOTTY     not an ioctl of this driver (foreign ioctl type)
 *
 * Job status (struct drm_npu_wait.status) is separate from errno; see DRM_NPU_JOB_*.
 */
#ifndef _UAPI_NPU_ACCEL_H_
#define _UAPI_NPU_ACCEL_H_

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

#define DRM_NPU_DRIVER_NAME "npu"
#define DRM_NPU_UAPI_MAJOR 1
#define DRM_NPU_UAPI_MINOR 0

/* Command numbers: append-only. */
#define DRM_NPU_GET_PARAM   0x00
#define DRM_NPU_QUERY       0x01
#define DRM_NPU_BO_CREATE   0x02
#define DRM_NPU_BO_INFO     0x03
#define DRM_NPU_BO_SYNC     0x04
#define DRM_NPU_BO_DESTROY  0x05
#define DRM_NPU_CTX_CREATE  0x06
#define DRM_NPU_CTX_DESTROY 0x07
#define DRM_NPU_SUBMIT      0x08
#define DRM_NPU_WAIT        0x09
#define DRM_NPU_CTX_QUERY   0x0a
#define DRM_NPU_PERF        0x0b
#define DRM_NPU_REG_READ    0x0c
#define DRM_NPU_REG_WRITE   0x0d
#define DRM_NPU_RESET       0x0e
#define DRM_NPU_NUM_IOCTLS  0x0f

/* ------------------------------------------------------------------------------------------ */
/* GET_PARAM: one 64-bit device parameter. */
#define DRM_NPU_PARAM_DEVICE_ID      0  /* ID register, 0x4E505531 */
#define DRM_NPU_PARAM_REVISION       1  /* VERSION register */
#define DRM_NPU_PARAM_PLATFORM       2  /* DRM_NPU_PLATFORM_* */
#define DRM_NPU_PARAM_CLOCK_MHZ      3
#define DRM_NPU_PARAM_MAX_CONTEXTS   4  /* device-wide context limit */
#define DRM_NPU_PARAM_CONTEXT_COUNT  5  /* contexts currently alive on the device */
#define DRM_NPU_PARAM_VA_START       6  /* first usable NPU virtual address */
#define DRM_NPU_PARAM_VA_SIZE        7  /* usable NPU virtual address bytes per open file */
#define DRM_NPU_PARAM_ISA_VERSION    8  /* major << 16 | minor */
#define DRM_NPU_PARAM_FW_VERSION     9  /* major << 16 | minor */
#define DRM_NPU_PARAM_CAPABILITIES  10  /* DRM_NPU_CAP_* */
#define DRM_NPU_PARAM_RESET_COUNT   11  /* device resets since the driver was loaded */
#define DRM_NPU_PARAM_ARRAY_DIM     12
#define DRM_NPU_PARAM_FINGERPRINT   13  /* hardware fingerprint */
#define DRM_NPU_PARAM_NUM_QUEUES    14
#define DRM_NPU_PARAM_DRAM_SIZE     15
#define DRM_NPU_PARAM_PAGE_SIZE     16
#define DRM_NPU_PARAM_QUEUE_DEPTH   17  /* jobs per context before SUBMIT returns EBUSY */
#define DRM_NPU_PARAM_NUM_COUNTERS  18
#define DRM_NPU_PARAM_MAX_BO_SIZE   19
#define DRM_NPU_PARAM_HANG_TIMEOUT_MS 20 /* no-progress time after which a job is hung */

#define DRM_NPU_PLATFORM_SILICON    0
#define DRM_NPU_PLATFORM_RTL        1  /* RTL simulator */
#define DRM_NPU_PLATFORM_FUNCTIONAL 2  /* functional simulator */

#define DRM_NPU_CAP_IN_SYNCS   (1ull << 0)  /* SUBMIT honours in_syncs */
#define DRM_NPU_CAP_PERF       (1ull << 1)  /* PERF counters */
#define DRM_NPU_CAP_BO_RDONLY  (1ull << 2)  /* DRM_NPU_BO_DEVICE_RDONLY */
#define DRM_NPU_CAP_REG_ACCESS (1ull << 3)  /* REG_READ/REG_WRITE/RESET exist (privileged) */
/* CPU mappings of BOs are coherent with the device: BO_SYNC does no cache maintenance, and
 * user space may skip it (the simulators, and silicon behind a coherent interconnect). */
#define DRM_NPU_CAP_COHERENT   (1ull << 4)

struct drm_npu_get_param {
	__u32 param;   /* in: DRM_NPU_PARAM_* */
	__u32 index;   /* in: must be 0 */
	__u64 value;   /* out */
};

/* ------------------------------------------------------------------------------------------ */
/* QUERY: variable-size information. data == 0: only size is written (the full size).
 * Otherwise min(size, actual) bytes are copied to data and size is set to the actual size. */
#define DRM_NPU_QUERY_DEVICE_INFO 0  /* struct drm_npu_device_info */
#define DRM_NPU_QUERY_QUEUES      1  /* struct drm_npu_queues + queue_count drm_npu_queue_info */

struct drm_npu_query {
	__u32 type;    /* in: DRM_NPU_QUERY_* */
	__u32 size;    /* in: bytes at data; out: actual size of the answer */
	__u64 data;    /* in: user pointer or 0 */
	__u32 flags;   /* in: must be 0 */
	__u32 pad;     /* must be 0 */
};

struct drm_npu_device_info {
	__u32 device_id;
	__u32 isa_version;
	__u32 fw_version;
	__u32 platform;       /* DRM_NPU_PLATFORM_* */
	__u32 array_dim;
	__u32 num_queues;
	__u32 clock_mhz;
	__u32 max_contexts;
	__u32 context_count;
	__u32 queue_depth;
	__u32 act_sp_rows;
	__u32 wgt_sp_tiles;
	__u32 acc_sp_rows;
	__u32 num_counters;
	__u64 page_size;
	__u64 va_start;
	__u64 va_size;
	__u64 dram_size;
	__u64 max_bo_size;
	__u64 fingerprint;
	__u64 capabilities;   /* DRM_NPU_CAP_* */
	__u64 reset_count;
};

struct drm_npu_queue_info {
	__u32 queue;          /* hardware queue, 0 = highest priority */
	__u32 priority;       /* DRM_NPU_PRIORITY_* served by this queue */
	__u32 contexts;       /* contexts currently mapped to it */
	__u32 jobs_in_ring;   /* jobs written to the ring and not yet fenced */
	__u64 jobs_completed; /* jobs fenced on this queue since load */
};

struct drm_npu_queues {
	__u32 queue_count;        /* number of drm_npu_queue_info that follow */
	__u32 queue_struct_size;  /* stride of each element: sizeof(struct drm_npu_queue_info) */
	/* struct drm_npu_queue_info queues[queue_count], each queue_struct_size bytes */
};

/* ------------------------------------------------------------------------------------------ */
/* BO_CREATE: a buffer object in device memory, mapped into the file's NPU address space. */
#define DRM_NPU_BO_DEVICE_RDONLY (1u << 0)  /* the device may only read it (PTE not writable) */
#define DRM_NPU_BO_FLAGS         (DRM_NPU_BO_DEVICE_RDONLY)

struct drm_npu_bo_create {
	__u64 size;    /* in: bytes, > 0 and <= MAX_BO_SIZE; rounded up to PAGE_SIZE */
	__u32 flags;   /* in: DRM_NPU_BO_* */
	__u32 handle;  /* out: per-file handle, never 0 */
	__u64 npu_va;  /* out: NPU virtual address of the first byte */
	__u64 out_size;/* out: rounded size */
};

/* BO_INFO: the fake mmap offset of a BO (pass it to mmap() on this file). An offset is
 * never reused: once its BO is destroyed, mmap() with it fails with EINVAL. */
struct drm_npu_bo_info {
	__u32 handle;      /* in */
	__u32 flags;       /* in: must be 0 */
	__u64 mmap_offset; /* out */
	__u64 size;        /* out */
	__u64 npu_va;      /* out */
};

/* BO_SYNC: cache maintenance over [offset, offset + size) of a BO. */
#define DRM_NPU_SYNC_TO_DEVICE   (1u << 0)
#define DRM_NPU_SYNC_FROM_DEVICE (1u << 1)

struct drm_npu_bo_sync {
	__u32 handle;     /* in */
	__u32 direction;  /* in: non-zero combination of DRM_NPU_SYNC_* */
	__u64 offset;     /* in */
	__u64 size;       /* in: > 0, offset + size <= BO size */
};

/* BO_DESTROY: releases a handle (same as DRM_IOCTL_GEM_CLOSE). The memory stays alive while
 * jobs or CPU mappings still reference it. */
struct drm_npu_bo_destroy {
	__u32 handle;  /* in */
	__u32 pad;     /* must be 0 */
};

/* ------------------------------------------------------------------------------------------ */
/* Contexts. A context owns a bounded queue of jobs; its priority selects the hardware queue
 * (REALTIME -> queue 0 ... LOW -> queue 3). Contexts of the same priority are served round
 * robin. The context id is device-wide unique and only valid on the file that created it. */
#define DRM_NPU_PRIORITY_LOW      0
#define DRM_NPU_PRIORITY_NORMAL   1
#define DRM_NPU_PRIORITY_HIGH     2
#define DRM_NPU_PRIORITY_REALTIME 3

struct drm_npu_ctx_create {
	__u32 priority;  /* in: DRM_NPU_PRIORITY_* */
	__u32 flags;     /* in: must be 0 */
	__u32 ctx_id;    /* out: never 0 */
	__u32 pad;       /* must be 0 */
};

/* CTX_DESTROY: jobs of the context that have not ended end ABORTED. */
struct drm_npu_ctx_destroy {
	__u32 ctx_id;  /* in */
	__u32 pad;     /* must be 0 */
};

/* ------------------------------------------------------------------------------------------ */
/* SUBMIT: one job = one EXEC of cmd_size bytes at cmd_offset in cmd_handle, then a FENCE. */
struct drm_npu_sync {
	__u32 ctx_id;  /* context of the job to wait for (same file) */
	__u32 pad;     /* must be 0 */
	__u64 seq;     /* its sequence number, 1 <= seq <= last submitted */
};

struct drm_npu_submit {
	__u32 ctx_id;            /* in */
	__u32 flags;             /* in: must be 0 */
	__u64 bo_handles;        /* in: user pointer to __u32[bo_count], BOs the job uses */
	__u32 bo_count;          /* in: <= 4096 */
	__u32 cmd_handle;        /* in: BO holding the instructions */
	__u64 cmd_offset;        /* in: multiple of 32 */
	__u64 cmd_size;          /* in: multiple of 32, > 0, cmd_offset + cmd_size <= BO size */
	__u64 in_syncs;          /* in: user pointer to in_sync_count elements, or 0 */
	__u32 in_sync_count;     /* in: <= 64 */
	__u32 in_sync_struct_size; /* in: stride, >= sizeof(struct drm_npu_sync) when count > 0 */
	__u64 seq;               /* out: per-context sequence number, monotonic from 1 */
};

/* ------------------------------------------------------------------------------------------ */
/* WAIT: blocks until job seq of ctx_id has ended or deadline_ns (absolute CLOCK_MONOTONIC)
 * has passed. Returns 0 when the job ended on its own terms (SUCCESS, PAGE_FAULT,
 * DEVICE_ERROR, TIMEOUT), EIO when it was ABORTED (the out fields are written in both cases),
 * ETIMEDOUT when the deadline passed first (a deadline in the past only polls). */
#define DRM_NPU_JOB_SUCCESS      0  /* ran to its FENCE */
#define DRM_NPU_JOB_ABORTED      1  /* did not complete: reset caused by another job, context
                                       destroyed, banned or the device unplugged */
#define DRM_NPU_JOB_TIMEOUT      2  /* made no progress for HANG_TIMEOUT_MS; the device was reset */
#define DRM_NPU_JOB_PAGE_FAULT   3  /* device PAGE_FAULT at error_addr; the context is banned */
#define DRM_NPU_JOB_DEVICE_ERROR 4  /* other device error (device_error = ERROR_CODE) */

struct drm_npu_wait {
	__u32 ctx_id;        /* in */
	__u32 flags;         /* in: must be 0 */
	__u64 seq;           /* in */
	__s64 deadline_ns;   /* in: absolute CLOCK_MONOTONIC */
	__u32 status;        /* out: DRM_NPU_JOB_* */
	__u32 device_error;  /* out: raw ERROR_CODE (0 unless PAGE_FAULT/DEVICE_ERROR) */
	__u64 error_addr;    /* out: raw ERROR_ADDR */
	__u64 device_cycles; /* out: device cycle at the FENCE minus cycle at EXEC start */
};

/* ------------------------------------------------------------------------------------------ */
/* CTX_QUERY */
#define DRM_NPU_CTX_STATE_ACTIVE 0
#define DRM_NPU_CTX_STATE_BANNED 1  /* after a page fault: SUBMIT returns EBADFD */
#define DRM_NPU_CTX_STATE_LOST   2  /* the device is gone */

struct drm_npu_ctx_query {
	__u32 ctx_id;             /* in */
	__u32 flags;              /* in: must be 0 */
	__u32 state;              /* out: DRM_NPU_CTX_STATE_* */
	__u32 priority;           /* out */
	__u32 reset_count;        /* out: resets that affected this context */
	__u32 pending;            /* out: jobs submitted and not ended */
	__u64 last_submitted_seq; /* out */
	__u64 last_completed_seq; /* out: highest seq that has ended (any status) */
	__u32 fault_code;         /* out: device error that banned the context */
	__u32 pad;
	__u64 fault_addr;         /* out */
};

/* ------------------------------------------------------------------------------------------ */
/* PERF: the 64-bit device performance counters in register order. values == 0: only count is
 * written. Otherwise min(count, available) values are copied and count is set to available. */
struct drm_npu_perf {
	__u32 count;   /* in: room at values; out: counters available */
	__u32 flags;   /* in: must be 0 */
	__u64 values;  /* in: user pointer to __u64[count], or 0 */
};

/* ------------------------------------------------------------------------------------------ */
/* Privileged bring-up path: EACCES unless the opener has CAP_SYS_ADMIN. */
struct drm_npu_reg {
	__u32 offset;  /* in: register byte offset, 4-byte aligned, inside the register space */
	__u32 value;   /* REG_READ out, REG_WRITE in */
};

/* RESET: resets the device; jobs in the hardware rings end ABORTED, queued jobs run after. */
struct drm_npu_reset {
	__u32 flags;  /* in: must be 0 */
	__u32 pad;    /* must be 0 */
};

/* ------------------------------------------------------------------------------------------ */
#define DRM_IOCTL_NPU_GET_PARAM   DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_GET_PARAM, struct drm_npu_get_param)
#define DRM_IOCTL_NPU_QUERY       DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_QUERY, struct drm_npu_query)
#define DRM_IOCTL_NPU_BO_CREATE   DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_BO_CREATE, struct drm_npu_bo_create)
#define DRM_IOCTL_NPU_BO_INFO     DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_BO_INFO, struct drm_npu_bo_info)
#define DRM_IOCTL_NPU_BO_SYNC     DRM_IOW(DRM_COMMAND_BASE + DRM_NPU_BO_SYNC, struct drm_npu_bo_sync)
#define DRM_IOCTL_NPU_BO_DESTROY  DRM_IOW(DRM_COMMAND_BASE + DRM_NPU_BO_DESTROY, struct drm_npu_bo_destroy)
#define DRM_IOCTL_NPU_CTX_CREATE  DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_CTX_CREATE, struct drm_npu_ctx_create)
#define DRM_IOCTL_NPU_CTX_DESTROY DRM_IOW(DRM_COMMAND_BASE + DRM_NPU_CTX_DESTROY, struct drm_npu_ctx_destroy)
#define DRM_IOCTL_NPU_SUBMIT      DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_SUBMIT, struct drm_npu_submit)
#define DRM_IOCTL_NPU_WAIT        DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_WAIT, struct drm_npu_wait)
#define DRM_IOCTL_NPU_CTX_QUERY   DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_CTX_QUERY, struct drm_npu_ctx_query)
#define DRM_IOCTL_NPU_PERF        DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_PERF, struct drm_npu_perf)
#define DRM_IOCTL_NPU_REG_READ    DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_REG_READ, struct drm_npu_reg)
#define DRM_IOCTL_NPU_REG_WRITE   DRM_IOW(DRM_COMMAND_BASE + DRM_NPU_REG_WRITE, struct drm_npu_reg)
#define DRM_IOCTL_NPU_RESET       DRM_IOW(DRM_COMMAND_BASE + DRM_NPU_RESET, struct drm_npu_reset)

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_NPU_ACCEL_H_ */
