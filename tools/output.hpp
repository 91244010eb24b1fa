// What the tool writes: aligned tables, numbers formatted for them, a small JSON writer, and
// output files checked before any work.
#pragma once

#include <string>
#include <vector>

namespace onorm_tool {

// Prints rows as columns aligned to their widest cell, a rule under the first (the header).
void print_table(const std::vector<std::vector<std::string>>& rows);

class Json {
 public:
  Json& begin_object();
  Json& end_object();
  Json& begin_array();
  Json& end_array();
  Json& key(const std::string& k);
  Json& value(const std::string& s);
  Json& value(const char* s) { return value(std::string(s)); }
  Json& value(double d);  // non-finite numbers are written as null
  Json& value(int64_t i);
  Json& value(int i) { return value(static_cast<int64_t>(i)); }
  Json& value(bool b);
  Json& null();
  const std::string& str() const { return s_; }

 private:
  void sep();
  std::string s_;
  std::vector<bool> first_;
  bool after_key_ = false;
};
std::string json_escape(const std::string& s);
void write_text_file(const std::string& path, const std::string& text);

// An output file opened when the command starts, so that an unwritable path is reported before
// any work, and written when the results are in. A file this created and never wrote is removed;
// an existing file keeps its content until write().
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);  // throws ToolError when it cannot be written
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void write(const std::string& text);  // replaces the content; throws ToolError
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool created_ = false, written_ = false;
};

// Formats a number for tables: "1.23e-07", "0", "inf".
std::string fmt_sci(double v);
std::string fmt_fixed(double v, int digits);
std::string fmt_sig(double v, int digits);  // significant digits: "0.004127", "1234"

}  // namespace onorm_tool
