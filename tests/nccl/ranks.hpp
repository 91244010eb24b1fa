// One process per GPU for the multi-GPU layer's test and benchmark: the parent never touches
// the GPU runtime (a process that has cannot fork usable children); it forks one child per rank,
// rank 0 makes the NCCL id and hands it to the others through pipes, and each child reports a
// fixed-size result back through its own pipe.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "onlinenorm/onlinenorm.h"

namespace onorm_nccl_test {

// The number of CUDA devices, counted in a child (the parent stays free of the runtime).
inline int count_gpus() {
  int fd[2];
  if (pipe(fd) != 0) return 0;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    const int n = onorm_backend_device_count(ONORM_BACKEND_CUDA);
    if (write(fd[1], &n, sizeof n) != static_cast<ssize_t>(sizeof n)) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  int n = 0;
  if (read(fd[0], &n, sizeof n) != static_cast<ssize_t>(sizeof n)) n = 0;
  close(fd[0]);
  waitpid(pid, nullptr, 0);
  return n;
}

// Runs body(rank, ranks, comm) in `ranks` child processes, rank r on GPU r, and returns each
// child's Result (false when a child failed to report). Result is trivially copyable.
template <typename Result>
bool run_ranks(int ranks, const std::function<Result(int, int, ncclComm_t)>& body, std::vector<Result>& results) {
  std::vector<int> id_pipe(2 * ranks), out_pipe(2 * ranks);
  for (int r = 0; r < ranks; ++r)
    if (pipe(&id_pipe[2 * r]) != 0 || pipe(&out_pipe[2 * r]) != 0) return false;
  std::vector<pid_t> pids(ranks);
  for (int r = 0; r < ranks; ++r) {
    pids[r] = fork();
    if (pids[r] != 0) continue;
    ncclUniqueId id;
    if (r == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess) _exit(2);
      for (int p = 1; p < ranks; ++p)
        if (write(id_pipe[2 * p + 1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(2);
    } else if (read(id_pipe[2 * r], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
      _exit(2);
    }
    // The communicator of rank r lives on GPU r, current for the rest of the child.
    if (cudaSetDevice(r) != cudaSuccess) _exit(3);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, ranks, id, r) != ncclSuccess) _exit(4);
    const Result res = body(r, ranks, comm);
    ncclCommDestroy(comm);
    if (write(out_pipe[2 * r + 1], &res, sizeof res) != static_cast<ssize_t>(sizeof res)) _exit(5);
    _exit(0);
  }
  bool ok = true;
  results.assign(ranks, Result{});
  for (int r = 0; r < ranks; ++r) {
    close(out_pipe[2 * r + 1]);
    if (read(out_pipe[2 * r], &results[r], sizeof(Result)) != static_cast<ssize_t>(sizeof(Result))) ok = false;
  }
  for (int r = 0; r < ranks; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "rank %d exited with status %d\n", r, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      ok = false;
    }
  }
  return ok;
}

}  // namespace onorm_nccl_test
