#include "compare_binding.hpp"

#include <compare.hpp>  // tools/compare.hpp

#include <utility>

namespace {

// The tool's name of a DLPack dtype as numpy writes it ("<f4"), for its messages.
std::string descr_of(nb::dlpack::dtype d, char* kind) {
  switch (static_cast<nb::dlpack::dtype_code>(d.code)) {
    case nb::dlpack::dtype_code::Float: *kind = 'f'; break;
    case nb::dlpack::dtype_code::UInt: *kind = 'u'; break;
    case nb::dlpack::dtype_code::Int: *kind = 'i'; break;
    case nb::dlpack::dtype_code::Bool: *kind = 'b'; break;
    case nb::dlpack::dtype_code::Complex: *kind = 'c'; break;
    default: *kind = 'V'; break;  // bfloat and others: no .npy kind; the tool rejects it
  }
  return std::string("<") + *kind + std::to_string(d.bits / 8);
}

onorm_tool::NpyArray npy_of(const CompareArray& x) {
  onorm_tool::NpyArray a;
  a.descr = descr_of(x.dtype(), &a.kind);
  a.item_size = x.dtype().bits / 8;
  for (size_t i = 0; i < x.ndim(); ++i) a.shape.push_back(x.shape(i));
  const auto* data = static_cast<const unsigned char*>(x.data());
  a.data.assign(data, data + x.nbytes());
  return a;
}

// The tool's usage errors end with its usage text: here, an empty one.
std::string without_usage(const char* what) {
  std::string m = what;
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

}  // namespace

std::string compare_document(const std::map<std::string, std::string>& options, const std::optional<CompareArray>& x) {
  using namespace onorm_tool;
  std::optional<NpyArray> input;
  if (x) input = npy_of(*x);
  nb::gil_scoped_release release;
  CompareRequest request;
  try {
    request = compare_request(options, "", std::move(input));
  } catch (const UsageError& e) {
    throw nb::value_error(without_usage(e.what()).c_str());
  }  // a ToolError here is an unavailable backend: RuntimeError, as Context says it
  try {
    return compare_json(run_compare(std::move(request)));
  } catch (const ToolError& e) {  // the input does not fit the options
    throw nb::value_error(e.what());
  }
}
