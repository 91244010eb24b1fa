// oneDNN's softmax, log-softmax and LayerNorm over the benchmark's own buffers: the CPU peer of
// issue 14, timed in the same process, on the same bytes, beside the same memcpy. oneDNN has no
// RMSNorm. Built when CMake finds oneDNN (Debian's libdnnl-dev).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace onorm_bench {

enum class PeerOp { kSoftmax, kLogSoftmax, kLayerNorm };

// One primitive made once (outside the timing); run() executes it and waits.
class OneDnnCase {
 public:
  // x, y: rows x cols row-major, f32 or (bf16) bf16 bits; scale, shift: cols floats (LayerNorm,
  // eps 1e-5 like the bench's own call).
  OneDnnCase(PeerOp op, bool bf16, int64_t rows, int64_t cols, void* x, void* y, float* scale, float* shift);
  ~OneDnnCase();
  OneDnnCase(const OneDnnCase&) = delete;
  OneDnnCase& operator=(const OneDnnCase&) = delete;
  bool ok() const;
  const std::string& error() const;  // why oneDNN refused the case
  const std::string& impl() const;   // the implementation oneDNN chose, e.g. "jit:avx512_core"
  void run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace onorm_bench
