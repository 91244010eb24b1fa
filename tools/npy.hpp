// A small, strict reader (and writer) of NumPy .npy files for the onorm tool.
// Accepted: format versions 1.0, 2.0 and 3.0; a header dict with exactly the keys 'descr',
// 'fortran_order' and 'shape'; little-endian (or byte-order-free) numeric dtypes; C order;
// a data section whose size is exactly the product of the shape times the element size.
// Everything else is rejected with a message, never a crash: the parser takes arbitrary bytes
// (it is fuzzed) and allocates nothing before it has checked the sizes against the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace onorm_tool {

struct NpyArray {
  std::string descr;            // as written in the header, e.g. "<f4"
  char kind = 0;                // 'f' (float), 'u' (unsigned), 'i' (signed), 'b' (bool)
  int item_size = 0;            // bytes per element
  std::vector<int64_t> shape;   // may be empty (a 0-d scalar)
  std::vector<unsigned char> data;  // little-endian elements, C order
  int64_t elements() const;
};

// Parses an in-memory .npy image. On failure returns false and sets err (no partial result).
bool parse_npy(const unsigned char* bytes, size_t size, NpyArray& out, std::string& err);

// Reads a file and parses it: the preamble and header first, then exactly the data bytes the
// header promises (a regular file's size must match; a pipe or device that ends early is a
// truncated file). max_bytes bounds the size accepted (default 16 GiB).
bool read_npy_file(const std::string& path, NpyArray& out, std::string& err,
                   uint64_t max_bytes = (uint64_t{1} << 34));

// Builds a version 1.0 .npy image (header padded to 64 bytes), for writing files and tests.
std::vector<unsigned char> make_npy(const std::string& descr, const std::vector<int64_t>& shape,
                                    const void* data, size_t data_bytes, bool fortran_order = false);
bool write_npy_file(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                    const void* data, size_t data_bytes, std::string& err);

}  // namespace onorm_tool
