// main() of the uAPI conformance suite run where process_vm_readv/writev are refused, as
// Docker's default seccomp profile and user-mode emulators (qemu-user) do: the kernel-driver
// model's copy_from_user/copy_to_user must then fall back to copying through a pipe with the
// same EFAULT behaviour. A seccomp filter makes both system calls fail with EPERM for the
// whole process before any test runs; the first check is that it did.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace {

bool refuse_process_vm_syscalls() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  sock_fprog prog = {static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

TEST(ProcessVmRefused, TheFilterIsInForce) {
  char a = 1, b = 0;
  iovec local = {&b, 1}, remote = {&a, 1};
  errno = 0;
  EXPECT_EQ(process_vm_readv(getpid(), &local, 1, &remote, 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
}

}  // namespace

int main(int argc, char** argv) {
  if (!refuse_process_vm_syscalls()) {
    std::perror("seccomp filter");
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
