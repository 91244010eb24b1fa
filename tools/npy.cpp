#include "npy.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

namespace onorm_tool {

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

const unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// A cursor over the header text; every accessor checks bounds.
struct Cursor {
  const char* p;
  const char* end;
  bool at_end() const { return p >= end; }
  char peek() const { return p < end ? *p : '\0'; }
  void skip_ws() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  }
  bool eat(char c) {
    skip_ws();
    if (p < end && *p == c) {
      ++p;
      return true;
    }
    return false;
  }
  bool eat_word(const char* w) {
    skip_ws();
    const size_t n = std::strlen(w);
    if (static_cast<size_t>(end - p) >= n && std::memcmp(p, w, n) == 0) {
      p += n;
      return true;
    }
    return false;
  }
};

bool parse_string(Cursor& c, std::string& out, std::string& err) {
  c.skip_ws();
  const char q = c.peek();
  if (q != '\'' && q != '"') {
    err = "expected a quoted string";
    return false;
  }
  ++c.p;
  out.clear();
  while (!c.at_end() && *c.p != q) {
    if (*c.p == '\\') {
      err = "escape sequences are not supported in header strings";
      return false;
    }
    if (out.size() > 64) {
      err = "header string too long";
      return false;
    }
    out.push_back(*c.p++);
  }
  if (c.at_end()) {
    err = "unterminated string";
    return false;
  }
  ++c.p;  // closing quote
  return true;
}

bool parse_shape(Cursor& c, std::vector<int64_t>& shape, std::string& err) {
  shape.clear();
  if (!c.eat('(')) {
    err = "'shape' is not a tuple";
    return false;
  }
  if (c.eat(')')) return true;
  for (;;) {
    c.skip_ws();
    if (c.at_end() || *c.p < '0' || *c.p > '9') {
      err = "'shape' holds something other than non-negative integers";
      return false;
    }
    int64_t v = 0;
    while (!c.at_end() && *c.p >= '0' && *c.p <= '9') {
      const int digit = *c.p - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        err = "a 'shape' dimension does not fit in 64 bits";
        return false;
      }
      v = v * 10 + digit;
      ++c.p;
    }
    if (!c.at_end() && *c.p == 'L') ++c.p;  // Python 2 long suffix
    if (shape.size() >= 32) {
      err = "'shape' has more than 32 dimensions";
      return false;
    }
    shape.push_back(v);
    if (c.eat(')')) return true;
    if (!c.eat(',')) {
      err = "malformed 'shape' tuple";
      return false;
    }
    if (c.eat(')')) return true;  // trailing comma, as in (5,)
  }
}

bool parse_descr(const std::string& d, char& kind, int& size, std::string& err) {
  if (d.size() < 3 || d.size() > 4) {
    err = "unsupported dtype '" + d + "'";
    return false;
  }
  const char order = d[0];
  kind = d[1];
  size = 0;
  for (size_t i = 2; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9') {
      err = "unsupported dtype '" + d + "'";
      return false;
    }
    size = size * 10 + (d[i] - '0');
  }
  if (kind != 'f' && kind != 'u' && kind != 'i' && kind != 'b') {
    err = "unsupported dtype '" + d + "' (numbers only: f, u, i, b)";
    return false;
  }
  if (!(size == 1 || size == 2 || size == 4 || size == 8) || (kind == 'f' && size == 1) ||
      (kind == 'b' && size != 1)) {
    err = "unsupported dtype '" + d + "' (element size)";
    return false;
  }
  if (order == '>' && size > 1) {
    err = "big-endian dtype '" + d + "' is not supported (save it little-endian: a.astype('<" +
          d.substr(1) + "'))";
    return false;
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') {
    err = "unsupported byte order in dtype '" + d + "'";
    return false;
  }
  return true;
}

bool parse_header(const char* text, size_t len, NpyArray& out, std::string& err) {
  Cursor c{text, text + len};
  if (!c.eat('{')) {
    err = "header is not a Python dict";
    return false;
  }
  bool have_descr = false, have_order = false, have_shape = false;
  bool fortran = false;
  std::string descr;
  std::vector<int64_t> shape;
  while (!c.eat('}')) {
    std::string key;
    if (!parse_string(c, key, err)) {
      err = "header dict: " + err;
      return false;
    }
    if (!c.eat(':')) {
      err = "header dict: expected ':' after '" + key + "'";
      return false;
    }
    if (key == "descr") {
      if (have_descr) { err = "header dict: 'descr' appears twice"; return false; }
      have_descr = true;
      if (!parse_string(c, descr, err)) {
        err = "header dict: 'descr' must be a simple dtype string (" + err + ")";
        return false;
      }
    } else if (key == "fortran_order") {
      if (have_order) { err = "header dict: 'fortran_order' appears twice"; return false; }
      have_order = true;
      if (c.eat_word("True")) fortran = true;
      else if (c.eat_word("False")) fortran = false;
      else { err = "header dict: 'fortran_order' is not True or False"; return false; }
    } else if (key == "shape") {
      if (have_shape) { err = "header dict: 'shape' appears twice"; return false; }
      have_shape = true;
      if (!parse_shape(c, shape, err)) {
        err = "header dict: " + err;
        return false;
      }
    } else {
      err = "header dict: unexpected key '" + key + "'";
      return false;
    }
    if (c.eat('}')) break;
    if (!c.eat(',')) {
      err = "header dict: expected ',' or '}'";
      return false;
    }
  }
  c.skip_ws();
  if (!c.at_end()) {
    err = "header: unexpected text after the dict";
    return false;
  }
  if (!have_descr || !have_order || !have_shape) {
    err = std::string("header dict: missing key '") +
          (!have_descr ? "descr" : !have_order ? "fortran_order" : "shape") + "'";
    return false;
  }
  if (fortran) {
    err = "Fortran-order arrays are not supported (save a C-order copy: np.ascontiguousarray)";
    return false;
  }
  if (!parse_descr(descr, out.kind, out.item_size, err)) return false;
  out.descr = descr;
  out.shape = shape;
  return true;
}

}  // namespace

bool parse_npy(const unsigned char* bytes, size_t size, NpyArray& out, std::string& err) {
  out = NpyArray{};
  NpyArray a;
  if (size < 10) {
    err = "not a .npy file: shorter than the 10-byte preamble";
    return false;
  }
  if (std::memcmp(bytes, kMagic, sizeof kMagic) != 0) {
    err = "not a .npy file: bad magic (expected \\x93NUMPY)";
    return false;
  }
  const int major = bytes[6], minor = bytes[7];
  size_t header_len = 0, preamble = 0;
  if (major == 1) {
    header_len = static_cast<size_t>(bytes[8]) | (static_cast<size_t>(bytes[9]) << 8);
    preamble = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      err = "truncated .npy file: preamble of version 2/3 needs 12 bytes";
      return false;
    }
    header_len = static_cast<size_t>(bytes[8]) | (static_cast<size_t>(bytes[9]) << 8) |
                 (static_cast<size_t>(bytes[10]) << 16) | (static_cast<size_t>(bytes[11]) << 24);
    preamble = 12;
  } else {
    err = "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor);
    return false;
  }
  if (minor != 0) {
    err = "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor);
    return false;
  }
  if (header_len > size - preamble) {
    err = "truncated .npy file: header of " + std::to_string(header_len) + " bytes, file has " +
          std::to_string(size - preamble) + " after the preamble";
    return false;
  }
  if (!parse_header(reinterpret_cast<const char*>(bytes + preamble), header_len, a, err)) {
    err = "bad .npy header: " + err;
    return false;
  }
  // Size of the data section, with overflow checks, before anything is allocated.
  uint64_t count = 1;
  for (int64_t d : a.shape) {
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) {
      err = "shape is too large (element count overflows 64 bits)";
      return false;
    }
    count *= static_cast<uint64_t>(d);
  }
  if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / 8) {
    err = "shape is too large";
    return false;
  }
  const uint64_t data_bytes = count * static_cast<uint64_t>(a.item_size);
  const uint64_t have = size - preamble - header_len;
  if (have < data_bytes) {
    err = "truncated .npy file: shape needs " + std::to_string(data_bytes) + " data bytes, file has " +
          std::to_string(have);
    return false;
  }
  if (have > data_bytes) {
    err = "mismatched .npy file: " + std::to_string(have - data_bytes) +
          " bytes beyond the data the shape describes";
    return false;
  }
  const unsigned char* data = bytes + preamble + header_len;
  a.data.assign(data, data + data_bytes);
  out = std::move(a);
  return true;
}

bool read_npy_file(const std::string& path, NpyArray& out, std::string& err, uint64_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    err = path + ": cannot open (" + std::strerror(errno) + ")";
    return false;
  }
  std::vector<unsigned char> bytes;
  unsigned char buf[1 << 16];
  size_t n;
  bool too_big = false;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (bytes.size() + n > max_bytes) {
      too_big = true;
      break;
    }
    bytes.insert(bytes.end(), buf, buf + n);
  }
  const bool read_error = std::ferror(f) != 0;
  std::fclose(f);
  if (read_error) {
    err = path + ": read error";
    return false;
  }
  if (too_big) {
    err = path + ": larger than " + std::to_string(max_bytes) + " bytes";
    return false;
  }
  if (!parse_npy(bytes.data(), bytes.size(), out, err)) {
    err = path + ": " + err;
    return false;
  }
  return true;
}

std::vector<unsigned char> make_npy(const std::string& descr, const std::vector<int64_t>& shape,
                                    const void* data, size_t data_bytes, bool fortran_order) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                     ", 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  const size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  std::vector<unsigned char> out(kMagic, kMagic + 6);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<unsigned char>(dict.size() & 0xff));
  out.push_back(static_cast<unsigned char>(dict.size() >> 8));
  out.insert(out.end(), dict.begin(), dict.end());
  const unsigned char* d = static_cast<const unsigned char*>(data);
  if (data_bytes) out.insert(out.end(), d, d + data_bytes);
  return out;
}

bool write_npy_file(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                    const void* data, size_t data_bytes, std::string& err) {
  const std::vector<unsigned char> bytes = make_npy(descr, shape, data, data_bytes);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    err = path + ": cannot create (" + std::strerror(errno) + ")";
    return false;
  }
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) {
    err = path + ": write failed";
    return false;
  }
  return true;
}

}  // namespace onorm_tool
