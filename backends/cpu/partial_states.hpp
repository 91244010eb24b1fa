// Partial row states on the CPU (API.md, "partial row states"): a row op's statistics into
// state records (stats), records merged over parts (merge), and the SIMD finish of rows from
// given records. The finishes the SIMD kernels do not take (f64, mixed dtypes, the norms'
// parameter dtypes, offsets and static quantization) run the portable kernels, which read the
// given records in place of their own statistics (scalar_rows.hpp: row_state).
#pragma once

#include <cstddef>

#include "backend_interface.h"

namespace onorm {
namespace cpu {

// Whether the SIMD finish takes a FINISH request on target `target_index`.
bool simd_finish_fits(size_t target_index, const onorm_request& q);

// Runs a validated STATS or MERGE request, or a FINISH request that simd_finish_fits, on
// `threads` threads; opts as for simd_run_rows.
void partial_states_run(size_t target_index, const onorm_request& q, int threads, unsigned opts);

}  // namespace cpu
}  // namespace onorm
