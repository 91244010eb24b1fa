// Vocabulary-parallel cross-entropy on every GPU of this machine with onlinenorm::nccl: each rank
// holds the logits of every token for its slice of the vocabulary (as a tensor-parallel output
// layer leaves them), calls onorm_nccl_cross_entropy once (one all-gather of per-row states), and
// gets every token's loss and its own slice of the gradient, in place over its logits. Rank 0
// then checks the loss against one GPU holding the whole vocabulary.
//
//   vocab_parallel_cross_entropy [tokens=4096] [vocab=131072]
//
// A training program gets its rank, the rank count and the NCCL id from its launcher (torchrun,
// MPI, ...); here one process per GPU is forked and rank 0 hands the id to the others.
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "onlinenorm/onlinenorm_nccl.h"

static int run_rank(int rank, int ranks, ncclUniqueId id, int64_t tokens, int64_t vocab) {
  cudaSetDevice(rank);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, ranks, id, rank) != ncclSuccess) return 1;
  onorm_context ctx;
  if (onorm_create(ONORM_BACKEND_CUDA, rank, &ctx) != ONORM_OK) return 1;
  // This rank's vocabulary slice; the whole logits drawn the same way on every rank.
  const int64_t v0 = vocab * rank / ranks, v1 = vocab * (rank + 1) / ranks, width = v1 - v0;
  std::mt19937_64 g(42);
  std::normal_distribution<float> n01(0.0f, 2.0f);
  std::vector<float> whole(static_cast<size_t>(tokens * vocab));
  for (float& v : whole) v = n01(g);
  std::vector<int64_t> targets(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) targets[t] = static_cast<int64_t>(g() % static_cast<uint64_t>(vocab));
  std::vector<float> slice(static_cast<size_t>(tokens * width));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < width; ++j) slice[t * width + j] = whole[t * vocab + v0 + j];

  void *logits, *tg, *loss;
  onorm_malloc(ctx, slice.size() * 4, &logits);
  onorm_malloc(ctx, targets.size() * 8, &tg);
  onorm_malloc(ctx, static_cast<size_t>(tokens) * 4, &loss);
  onorm_memcpy(ctx, logits, slice.data(), slice.size() * 4, ONORM_COPY_HOST_TO_DEVICE);
  onorm_memcpy(ctx, tg, targets.data(), targets.size() * 8, ONORM_COPY_HOST_TO_DEVICE);
  const onorm_rows x{logits, ONORM_F32, tokens, width, width};
  onorm_cross_entropy_args a;
  onorm_cross_entropy_args_init(&a);
  a.targets = static_cast<const int64_t*>(tg);
  a.loss = static_cast<float*>(loss);
  a.dlogits = &x;                   // the gradient replaces the logits
  a.grad_scale = 1.0 / tokens;      // of the mean loss
  const onorm_status s = onorm_nccl_cross_entropy(ctx, comm, &x, v0, &a);
  if (s != ONORM_OK) {
    std::fprintf(stderr, "rank %d: %s\n", rank, onorm_last_error());
    return 1;
  }
  std::vector<float> split_loss(static_cast<size_t>(tokens));
  onorm_memcpy(ctx, split_loss.data(), loss, split_loss.size() * 4, ONORM_COPY_DEVICE_TO_HOST);
  int status = 0;
  if (rank == 0) {
    // The same tokens with the whole vocabulary on this one GPU.
    void* all;
    onorm_malloc(ctx, whole.size() * 4, &all);
    onorm_memcpy(ctx, all, whole.data(), whole.size() * 4, ONORM_COPY_HOST_TO_DEVICE);
    const onorm_rows xa{all, ONORM_F32, tokens, vocab, vocab};
    a.dlogits = nullptr;
    std::vector<float> one_loss(static_cast<size_t>(tokens));
    onorm_cross_entropy(ctx, &xa, &a);
    onorm_memcpy(ctx, one_loss.data(), loss, one_loss.size() * 4, ONORM_COPY_DEVICE_TO_HOST);
    double mean = 0, worst = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      mean += split_loss[t] / tokens;
      worst = std::fmax(worst, std::fabs(split_loss[t] - one_loss[t]) / (std::fabs(one_loss[t]) + 1));
    }
    std::printf("%d GPUs, %lld tokens, vocabulary %lld: mean loss %.6f; largest difference from one GPU %.2e\n",
                ranks, static_cast<long long>(tokens), static_cast<long long>(vocab), mean, worst);
    status = worst <= 1e-5 ? 0 : 1;
    onorm_free(ctx, all);
  }
  for (void* p : {logits, tg, loss}) onorm_free(ctx, p);
  onorm_destroy(ctx);
  ncclCommDestroy(comm);
  return status;
}

int main(int argc, char** argv) {
  const int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 4096, vocab = argc > 2 ? std::atoll(argv[2]) : 131072;
  int ranks = 0;
  {  // count the GPUs in a child: a process that has used the runtime cannot fork usable children
    int fd[2];
    if (pipe(fd) != 0) return 1;
    if (fork() == 0) {
      int n = 0;
      cudaGetDeviceCount(&n);
      _exit(write(fd[1], &n, sizeof n) == sizeof n ? 0 : 1);
    }
    if (read(fd[0], &ranks, sizeof ranks) != sizeof ranks) ranks = 0;
    wait(nullptr);
  }
  if (ranks < 2) {
    std::printf("this example needs two or more GPUs; found %d\n", ranks);
    return 0;
  }
  std::vector<int> pipes(2 * ranks);
  for (int r = 0; r < ranks; ++r)
    if (pipe(&pipes[2 * r]) != 0) return 1;
  for (int r = 0; r < ranks; ++r) {
    if (fork() != 0) continue;
    ncclUniqueId id;
    if (r == 0) {
      ncclGetUniqueId(&id);
      for (int p = 1; p < ranks; ++p)
        if (write(pipes[2 * p + 1], &id, sizeof id) != sizeof id) _exit(1);
    } else if (read(pipes[2 * r], &id, sizeof id) != sizeof id) {
      _exit(1);
    }
    const int status = run_rank(r, ranks, id, tokens, vocab);
    std::fflush(stdout);  // _exit skips stdio's flush (stdout to a file or pipe is buffered)
    _exit(status);
  }
  int failed = 0;
  for (int r = 0; r < ranks; ++r) {
    int st = 0;
    wait(&st);
    failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  return failed ? 1 : 0;
}
