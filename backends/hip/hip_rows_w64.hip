// Row kernels for warp width 64, instantiated from hip_rows.hpp.
#include "hip_rows.hpp"

namespace onorm {
namespace hip {
template onorm_status run_rows<64>(const HipDevice&, hipStream_t, const onorm_request&, char*, size_t);
}  // namespace hip
}  // namespace onorm
