// Partial row states on the CPU (API.md, "partial row states"): a row op's statistics into
// state records (stats), records merged over parts (merge), and the SIMD finish of rows from
// given records. The finishes the SIMD kernels do not take (f64, mixed dtypes, the norms'
// parameter dtypes, offsets and static quantization) run the portable kernels, which read the
// given records in place of their own statistics (scalar_rows.hpp: row_state).
#pragma once

#include <cstddef>
#include <cstring>

#include "backend_interface.h"
#include "onlinenorm/core/pairwise.hpp"

namespace onorm {
namespace cpu {

// Whether the SIMD finish takes a FINISH request on target `target_index`.
bool simd_finish_fits(size_t target_index, const onorm_request& q);

// Runs a validated STATS or MERGE request, or a FINISH request that simd_finish_fits, on
// `threads` threads; opts as for simd_run_rows.
void partial_states_run(size_t target_index, const onorm_request& q, int threads, unsigned opts);

// Rows [r0, r1) of a MERGE request whose records are Record (trivially copyable, with identity()
// and combine()): part p's record of row r at state_in[p * state_rows + r], folded left to right
// in the fixed pairwise tree into state_out[r]. Every part is read before the merged record is
// written (out may be in); records move through memcpy (any alignment).
template <typename Record>
void merge_parts(const onorm_request& q, int64_t r0, int64_t r1) {
  const char* in = static_cast<const char*>(q.state_in);
  char* out = static_cast<char*>(q.state_out);
  const int64_t size = static_cast<int64_t>(sizeof(Record));
  for (int64_t r = r0; r < r1; ++r) {
    core::PairwiseFold<Record> fold;
    for (int64_t p = 0; p < q.state_parts; ++p) {
      Record part;
      std::memcpy(&part, in + (p * q.state_rows + r) * size, sizeof part);
      fold.push(part);
    }
    const Record merged = fold.result();
    std::memcpy(out + r * size, &merged, sizeof merged);
  }
}

}  // namespace cpu
}  // namespace onorm
