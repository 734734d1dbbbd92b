//===- AmxGrant.h - Running a call with the AMX tile grant refused ------===//
//
// Kernels built with AMX tiles (tq-aot --amx) run only where Linux lent
// the process the tile state; their library's constructor asks with
// arch_prctl(ARCH_REQ_XCOMP_PERM). A grant lasts for the process, so the
// runtime and bridge tests run such calls in child processes: one as is,
// one under a seccomp filter that fails the request with EPERM.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_UNITTESTS_RUNTIME_AMXGRANT_H
#define TQ_UNITTESTS_RUNTIME_AMXGRANT_H

#if defined(__linux__) && defined(__x86_64__)
#define TQ_TEST_AMX_GRANT 1

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace tq::test {

/// A child's exit status when seccomp filters are not allowed here.
constexpr int kNoSeccomp = 77;

/// Makes arch_prctl(ARCH_REQ_XCOMP_PERM, ...) fail with EPERM in this
/// process; false where seccomp filters are not allowed.
inline bool refuseTileRequests() {
  constexpr unsigned kReqXcompPerm = 0x1023;
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_arch_prctl, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
               offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kReqXcompPerm, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & 0xffff)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

/// Whether this process already holds the tile data grant (a child would
/// inherit it).
inline bool tilesGranted() {
  constexpr unsigned kGetXcompPerm = 0x1022;
  constexpr int kXtileData = 18;
  unsigned long features = 0;
  return syscall(SYS_arch_prctl, kGetXcompPerm, &features) == 0 &&
         ((features >> kXtileData) & 1);
}

/// Whether the kernels.json in `dir` records a kernel built with AMX on.
inline bool libraryHasAmxKernels(const std::string &dir) {
  std::ifstream json(dir + "/kernels.json");
  std::stringstream text;
  text << json.rdbuf();
  return text.str().find("\"amx\": \"on\"") != std::string::npos;
}

/// Runs `body` in a child process, with tile requests refused or not;
/// its return value is the child's exit status (kNoSeccomp where the
/// refusal cannot be set up; 128 + signal where it died of one).
inline int runInChild(const std::function<int()> &body, bool refuse) {
  pid_t pid = fork();
  if (pid == 0) {
    if (refuse && !refuseTileRequests())
      _exit(kNoSeccomp);
    _exit(body());
  }
  int wstatus = 0;
  if (pid < 0 || waitpid(pid, &wstatus, 0) != pid)
    return -1;
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

/// Runs `call(false)` in a child allowed the grant and `call(true)` in one
/// refused it; both must exit 0 (`call` returns 0 where its call did what
/// it should: ran, or returned TQ_STATUS_UNAVAILABLE naming the kernel).
/// Skips the test where the refusal cannot be set up.
inline void expectGrantedRunsAndRefusedIsUnavailable(
    const std::function<int(bool refused)> &call, const char *who) {
  EXPECT_EQ(runInChild([&] { return call(false); }, /*refuse=*/false), 0)
      << who << ": the prefill with AMX tiles failed where Linux grants them";
  int refused = runInChild([&] { return call(true); }, /*refuse=*/true);
  if (refused == kNoSeccomp)
    GTEST_SKIP() << "seccomp filters are not allowed here, so the grant "
                    "cannot be refused";
  EXPECT_EQ(refused, 0) << who
                        << ": with the grant refused the call did "
                           "not return TQ_STATUS_UNAVAILABLE naming the "
                           "kernel (exit 4), or crashed (exit > 128)";
}

} // namespace tq::test

#endif
#endif // TQ_UNITTESTS_RUNTIME_AMXGRANT_H
