#include "onednn_peer.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

namespace onorm_bench {

struct OneDnnCase::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive primitive;
  std::unordered_map<int, dnnl::memory> args;
  std::string error, impl;
};

OneDnnCase::OneDnnCase(PeerOp op, bool bf16, int64_t rows, int64_t cols, void* x, void* y, float* scale, float* shift)
    : impl_(new Impl) {
  using dnnl::memory;
  Impl& m = *impl_;
  try {
    const memory::desc data({rows, cols}, bf16 ? memory::data_type::bf16 : memory::data_type::f32,
                            memory::format_tag::ab);
    m.args = {{DNNL_ARG_SRC, memory(data, m.engine, x)}, {DNNL_ARG_DST, memory(data, m.engine, y)}};
    if (op == PeerOp::kLayerNorm) {
      const memory::desc column({cols}, memory::data_type::f32, memory::format_tag::a);
      const dnnl::layer_normalization_forward::desc d(
          dnnl::prop_kind::forward_inference, data, 1e-5f,
          dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
      const dnnl::layer_normalization_forward::primitive_desc pd(d, m.engine);
      m.impl = pd.impl_info_str();
      m.primitive = dnnl::layer_normalization_forward(pd);
      m.args.emplace(DNNL_ARG_SCALE, memory(column, m.engine, scale));
      m.args.emplace(DNNL_ARG_SHIFT, memory(column, m.engine, shift));
    } else {
      const dnnl::softmax_v2_forward::desc d(
          dnnl::prop_kind::forward_inference,
          op == PeerOp::kLogSoftmax ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, data, data, 1);
      const dnnl::softmax_v2_forward::primitive_desc pd(d, m.engine);
      m.impl = pd.impl_info_str();
      m.primitive = dnnl::softmax_v2_forward(pd);
    }
  } catch (const dnnl::error& e) {
    m.error = e.what();
  }
}

OneDnnCase::~OneDnnCase() = default;

bool OneDnnCase::ok() const { return impl_->error.empty(); }
const std::string& OneDnnCase::error() const { return impl_->error; }
const std::string& OneDnnCase::impl() const { return impl_->impl; }

void OneDnnCase::run() {
  impl_->primitive.execute(impl_->stream, impl_->args);
  impl_->stream.wait();
}

}  // namespace onorm_bench
