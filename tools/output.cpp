#include "output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tool_common.hpp"

namespace onorm_tool {

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], r[i].size());
    }
  for (size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (size_t i = 0; i < rows[k].size(); ++i) {
      std::string cell = rows[k][i];
      if (i + 1 < rows[k].size()) cell.append(w[i] - cell.size() + 2, ' ');
      line += cell;
    }
    std::printf("%s\n", line.c_str());
    if (k == 0) {
      size_t total = 0;
      for (size_t i = 0; i < w.size(); ++i) total += w[i] + (i + 1 < w.size() ? 2 : 0);
      std::printf("%s\n", std::string(total, '-').c_str());
    }
  }
}

// ---------------------------------------------------------------- JSON

std::string json_escape(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += static_cast<char>(c);
        }
    }
  }
  return o + "\"";
}

void Json::sep() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) s_ += ",";
    first_.back() = false;
    s_ += "\n" + std::string(2 * first_.size(), ' ');
  }
}
Json& Json::begin_object() { sep(); s_ += "{"; first_.push_back(true); return *this; }
Json& Json::begin_array() { sep(); s_ += "["; first_.push_back(true); return *this; }
Json& Json::end_object() {
  const bool empty = first_.back();
  first_.pop_back();
  if (!empty) s_ += "\n" + std::string(2 * first_.size(), ' ');
  s_ += "}";
  if (first_.empty()) s_ += "\n";
  return *this;
}
Json& Json::end_array() {
  const bool empty = first_.back();
  first_.pop_back();
  if (!empty) s_ += "\n" + std::string(2 * first_.size(), ' ');
  s_ += "]";
  return *this;
}
Json& Json::key(const std::string& k) {
  sep();
  s_ += json_escape(k) + ": ";
  after_key_ = true;
  return *this;
}
Json& Json::value(const std::string& v) { sep(); s_ += json_escape(v); return *this; }
Json& Json::value(double d) {
  sep();
  if (!std::isfinite(d)) {
    s_ += "null";
  } else {
    // The shortest text that reads back as d (%.9g dropped digits of large counts).
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.15g", d);
    if (std::strtod(buf, nullptr) != d) std::snprintf(buf, sizeof buf, "%.17g", d);
    s_ += buf;
  }
  return *this;
}
Json& Json::value(int64_t i) { sep(); s_ += std::to_string(i); return *this; }
Json& Json::value(bool b) { sep(); s_ += b ? "true" : "false"; return *this; }
Json& Json::null() { sep(); s_ += "null"; return *this; }

void write_text_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw ToolError(path + ": cannot create (" + std::strerror(errno) + ")");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) throw ToolError(path + ": write failed");
}

OutputFile::OutputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ >= 0) {
    created_ = true;
  } else if (errno == EEXIST) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);  // not truncated until write()
  }
  if (fd_ < 0) throw ToolError(path + ": cannot write (" + std::strerror(errno) + ")");
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (created_ && !written_) ::unlink(path_.c_str());
}

void OutputFile::write(const std::string& text) {
  if (::ftruncate(fd_, 0) != 0 && errno != EINVAL)  // EINVAL: not a regular file (a pipe, /dev/stdout)
    throw ToolError(path_ + ": cannot truncate (" + std::strerror(errno) + ")");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == ESPIPE) {  // not seekable: plain writes
      const ssize_t m = ::write(fd_, text.data() + done, text.size() - done);
      if (m < 0 && errno == EINTR) continue;
      if (m <= 0) throw ToolError(path_ + ": write failed (" + std::strerror(errno) + ")");
      done += static_cast<size_t>(m);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw ToolError(path_ + ": write failed (" + std::strerror(errno) + ")");
    done += static_cast<size_t>(n);
  }
  written_ = true;
}

std::string fmt_sci(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string fmt_sig(double v, int digits) {
  if (!std::isfinite(v)) return fmt_sci(v);
  char buf[64];
  if (std::fabs(v) >= std::pow(10.0, digits)) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string fmt_fixed(double v, int digits) {
  if (!std::isfinite(v)) return fmt_sci(v);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace onorm_tool
