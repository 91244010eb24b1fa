#include "checking.hpp"

#include <cmath>
#include <cstring>

namespace onorm_tool {

onorm_ref::Report check_outcome(const Problem& p, const onorm_ref::Result& ref, const Outcome& o) {
  const onorm_rows y{const_cast<unsigned char*>(o.y.data()), p.out, p.rows, p.cols, p.cols};
  return onorm_ref::check(p.op, ref, y, p.gamma.empty() ? nullptr : p.gamma.data(), p.in,
                          o.mean.empty() ? nullptr : o.mean.data(), o.rstd.empty() ? nullptr : o.rstd.data());
}

onorm_ref::Result reference_of(const Problem& p) {
  const onorm_rows in[2] = {{const_cast<unsigned char*>(p.x.data()), p.in, p.rows, p.cols, p.cols},
                            {const_cast<unsigned char*>(p.dy.data()), p.in, p.rows, p.cols, p.cols}};
  return onorm_ref::compute(p.op, in, p.inputs(), p.gamma.empty() ? nullptr : p.gamma.data(),
                            p.beta.empty() ? nullptr : p.beta.data(), p.eps);
}

void perturb(const Problem& p, const onorm_ref::Result& ref, std::vector<unsigned char>& y, int64_t ulps) {
  int64_t at = -1;
  double best = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(ref.y.size()); ++i) {
    const double a = std::fabs(ref.y[i]);
    if (std::isfinite(a) && a > best) {
      best = a;
      at = i;
    }
  }
  if (at < 0) return;
  const size_t sz = dtype_size(p.out);
  unsigned char* e = y.data() + at * sz;
  if (sz == 2) {
    uint16_t v;
    std::memcpy(&v, e, 2);
    v = static_cast<uint16_t>(v + ulps);
    std::memcpy(e, &v, 2);
  } else if (sz == 4) {
    uint32_t v;
    std::memcpy(&v, e, 4);
    v = static_cast<uint32_t>(v + ulps);
    std::memcpy(e, &v, 4);
  } else {
    uint64_t v;
    std::memcpy(&v, e, 8);
    v = static_cast<uint64_t>(v + ulps);
    std::memcpy(e, &v, 8);
  }
}

int64_t bitwise_diff(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, size_t elem) {
  int64_t n = 0;
  for (size_t i = 0; i + elem <= a.size() && i + elem <= b.size(); i += elem)
    if (std::memcmp(a.data() + i, b.data() + i, elem) != 0) ++n;
  return n;
}

std::string shape_text(const Problem& p) {
  return std::string(onorm_ref::op_name(p.op)) + " " + std::to_string(p.rows) + "x" + std::to_string(p.cols) + " " +
         dtype_name(p.in) + " -> " + dtype_name(p.out);
}

std::string bound_text(const onorm_ref::Report& r) {
  return r.ok() ? "ok" : "FAIL(" + std::to_string(r.violations) + ")";
}

}  // namespace onorm_tool
