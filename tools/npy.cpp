#include "npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
constexpr size_t kMaxHeader = size_t{1} << 20;

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

// The fixed part before the header dict: magic, version, header length.
bool parse_preamble(const unsigned char* bytes, size_t size, size_t& preamble, size_t& header_len,
                    std::string& err) {
  if (size < 10) {
    err = "not a .npy file: shorter than the 10-byte preamble";
    return false;
  }
  if (std::memcmp(bytes, kMagic, sizeof kMagic) != 0) {
    err = "not a .npy file: bad magic (expected \\x93NUMPY)";
    return false;
  }
  const int major = bytes[6], minor = bytes[7];
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
  // A valid dict is at most a few hundred bytes plus padding (strings of 64 characters, 32
  // dimensions); this bound keeps a forged length from making the file reader buffer gigabytes.
  if (header_len > kMaxHeader) {
    err = "bad .npy header: " + std::to_string(header_len) + " bytes, more than the " +
          std::to_string(kMaxHeader) + " this reader accepts";
    return false;
  }
  return true;
}

// The header dict, and the data size it promises (overflow-checked).
bool parse_header_block(const unsigned char* text, size_t len, NpyArray& a, uint64_t& data_bytes,
                        std::string& err) {
  if (!parse_header(reinterpret_cast<const char*>(text), len, a, err)) {
    err = "bad .npy header: " + err;
    return false;
  }
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
  data_bytes = count * static_cast<uint64_t>(a.item_size);
  return true;
}

std::string data_size_error(uint64_t want, uint64_t have) {
  if (have < want)
    return "truncated .npy file: shape needs " + std::to_string(want) + " data bytes, file has " +
           std::to_string(have);
  return "mismatched .npy file: " + std::to_string(have - want) + " bytes beyond the data the shape describes";
}

// Reads up to n bytes, retrying short reads and EINTR; returns the count read (less at end of
// input), or -1 on a read error (errno set).
int64_t read_up_to(int fd, unsigned char* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, dst + got, std::min<size_t>(n - got, size_t{1} << 30));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return static_cast<int64_t>(got);
}

}  // namespace

bool parse_npy(const unsigned char* bytes, size_t size, NpyArray& out, std::string& err) {
  out = NpyArray{};
  NpyArray a;
  size_t preamble = 0, header_len = 0;
  if (!parse_preamble(bytes, size, preamble, header_len, err)) return false;
  if (header_len > size - preamble) {
    err = "truncated .npy file: header of " + std::to_string(header_len) + " bytes, file has " +
          std::to_string(size - preamble) + " after the preamble";
    return false;
  }
  uint64_t data_bytes = 0;
  if (!parse_header_block(bytes + preamble, header_len, a, data_bytes, err)) return false;
  const uint64_t have = size - preamble - header_len;
  if (have != data_bytes) {
    err = data_size_error(data_bytes, have);
    return false;
  }
  const unsigned char* data = bytes + preamble + header_len;
  a.data.assign(data, data + data_bytes);
  out = std::move(a);
  return true;
}

// The header is read and checked first, then exactly the data bytes it promises: a file that is
// not a .npy (or a device like /dev/zero) costs a few bytes of memory, not its size.
bool read_npy_file(const std::string& path, NpyArray& out, std::string& err, uint64_t max_bytes) {
  out = NpyArray{};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = path + ": cannot open (" + std::strerror(errno) + ")";
    return false;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  auto fail = [&](const std::string& why) {
    err = path + ": " + why;
    return false;
  };
  auto read_error = [&] { return fail(std::string("read error (") + std::strerror(errno) + ")"); };
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(std::string("cannot stat (") + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) return fail("is a directory, not a .npy file");
  const bool regular = S_ISREG(st.st_mode);
  const uint64_t file_size = regular ? static_cast<uint64_t>(st.st_size) : 0;

  unsigned char pre[12];
  int64_t n = read_up_to(fd, pre, 10);
  if (n < 0) return read_error();
  size_t got = static_cast<size_t>(n);
  if (got == 10 && (pre[6] == 2 || pre[6] == 3)) {
    if ((n = read_up_to(fd, pre + 10, 2)) < 0) return read_error();
    got += static_cast<size_t>(n);
  }
  size_t preamble = 0, header_len = 0;
  if (!parse_preamble(pre, got, preamble, header_len, err)) return fail(err);
  if (regular && header_len > file_size - preamble)
    return fail("truncated .npy file: header of " + std::to_string(header_len) + " bytes, file has " +
                std::to_string(file_size - preamble) + " after the preamble");
  std::vector<unsigned char> header(header_len);
  if ((n = read_up_to(fd, header.data(), header_len)) < 0) return read_error();
  if (static_cast<size_t>(n) < header_len)
    return fail("truncated .npy file: header of " + std::to_string(header_len) + " bytes, file has " +
                std::to_string(n) + " after the preamble");
  NpyArray a;
  uint64_t data_bytes = 0;
  if (!parse_header_block(header.data(), header_len, a, data_bytes, err)) return fail(err);
  const uint64_t offset = preamble + header_len;
  if (offset > max_bytes || data_bytes > max_bytes - offset)
    return fail("larger than " + std::to_string(max_bytes) + " bytes");
  if (regular && file_size - offset != data_bytes) return fail(data_size_error(data_bytes, file_size - offset));

  // A regular file's size is known to match, so its buffer is sized at once; a pipe or device
  // grows the buffer only as data arrives, so a header promising more than comes costs nothing.
  const size_t chunk = regular ? static_cast<size_t>(data_bytes) : size_t{1} << 26;
  size_t have = 0;
  while (have < data_bytes) {
    const size_t step = static_cast<size_t>(std::min<uint64_t>(chunk, data_bytes - have));
    a.data.resize(have + step);
    if ((n = read_up_to(fd, a.data.data() + have, step)) < 0) return read_error();
    have += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < step) return fail(data_size_error(data_bytes, have));
  }
  unsigned char extra;
  if ((n = read_up_to(fd, &extra, 1)) < 0) return read_error();
  if (n > 0) {
    return fail(regular ? "changed while being read (more data than its size said)"
                        : "mismatched .npy file: bytes beyond the data the shape describes");
  }
  out = std::move(a);
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
