// The .npy reader's error cases, and a deterministic mutation sweep over valid images: every
// input either parses into a self-consistent array or is rejected with a message.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "npy.hpp"

using onorm_tool::make_npy;
using onorm_tool::NpyArray;
using onorm_tool::parse_npy;

namespace {

std::vector<unsigned char> valid_f32(int64_t rows = 2, int64_t cols = 3) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 0.5f;
  return make_npy("<f4", {rows, cols}, v.data(), v.size() * 4);
}

// An image with a hand-written header dict (padded like numpy) and data bytes.
std::vector<unsigned char> with_header(const std::string& dict, size_t data_bytes, int major = 1) {
  std::string h = dict;
  const size_t pre = major == 1 ? 10 : 12;
  const size_t total = pre + h.size() + 1;
  h.append((total + 63) / 64 * 64 - total, ' ');
  h += '\n';
  std::vector<unsigned char> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), 0};
  const size_t n = h.size();
  out.push_back(static_cast<unsigned char>(n & 0xff));
  out.push_back(static_cast<unsigned char>((n >> 8) & 0xff));
  if (major != 1) {
    out.push_back(static_cast<unsigned char>((n >> 16) & 0xff));
    out.push_back(static_cast<unsigned char>((n >> 24) & 0xff));
  }
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data_bytes, 0x3f);
  return out;
}

std::string reject(const std::vector<unsigned char>& bytes) {
  NpyArray a;
  std::string err;
  EXPECT_FALSE(parse_npy(bytes.data(), bytes.size(), a, err));
  EXPECT_FALSE(err.empty());
  EXPECT_TRUE(a.data.empty());
  return err;
}

}  // namespace

TEST(Npy, ParsesValidVersion1) {
  const auto bytes = valid_f32();
  EXPECT_EQ(bytes.size() % 64, 24u);  // header padded to 64, then 24 data bytes
  NpyArray a;
  std::string err;
  ASSERT_TRUE(parse_npy(bytes.data(), bytes.size(), a, err)) << err;
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_EQ(a.kind, 'f');
  EXPECT_EQ(a.item_size, 4);
  ASSERT_EQ(a.shape.size(), 2u);
  EXPECT_EQ(a.shape[0], 2);
  EXPECT_EQ(a.shape[1], 3);
  ASSERT_EQ(a.data.size(), 24u);
  float v[6];
  std::memcpy(v, a.data.data(), 24);
  EXPECT_EQ(v[5], 5.5f);
}

TEST(Npy, ParsesVersions2And3AndVariants) {
  for (int major : {2, 3}) {
    const auto b = with_header("{'descr': '<f2', 'fortran_order': False, 'shape': (4, 2), }", 16, major);
    NpyArray a;
    std::string err;
    ASSERT_TRUE(parse_npy(b.data(), b.size(), a, err)) << err;
    EXPECT_EQ(a.item_size, 2);
    EXPECT_EQ(a.elements(), 8);
  }
  // Keys in another order, double quotes, no trailing comma, 1-d shape, '|' order for u1.
  for (const std::string dict : {"{\"shape\": (3,), \"descr\": \"<u2\", \"fortran_order\": False}",
                                 "{'fortran_order':False,'shape':(3,),'descr':'<u2'}"}) {
    const auto b = with_header(dict, 6);
    NpyArray a;
    std::string err;
    ASSERT_TRUE(parse_npy(b.data(), b.size(), a, err)) << dict << ": " << err;
    EXPECT_EQ(a.kind, 'u');
    EXPECT_EQ(a.elements(), 3);
  }
  // 0-d and empty arrays parse (the tool rejects them later as not 2-D / empty).
  const auto scalar = with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 8);
  NpyArray a;
  std::string err;
  ASSERT_TRUE(parse_npy(scalar.data(), scalar.size(), a, err)) << err;
  EXPECT_TRUE(a.shape.empty());
  const auto empty = with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", 0);
  ASSERT_TRUE(parse_npy(empty.data(), empty.size(), a, err)) << err;
  EXPECT_EQ(a.elements(), 0);
}

TEST(Npy, RejectsEveryTruncation) {
  const auto bytes = valid_f32();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<unsigned char> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    const std::string err = reject(cut);
    if (n >= 80) EXPECT_NE(err.find("truncated"), std::string::npos) << n << ": " << err;
  }
}

TEST(Npy, RejectsBadMagicAndVersion) {
  const auto good = valid_f32();
  for (size_t i = 0; i < 6; ++i) {
    auto b = good;
    b[i] ^= 0x20;
    EXPECT_NE(reject(b).find("magic"), std::string::npos);
  }
  for (auto v : {std::pair<int, int>{0, 0}, {4, 0}, {1, 1}, {255, 255}}) {
    auto b = good;
    b[6] = static_cast<unsigned char>(v.first);
    b[7] = static_cast<unsigned char>(v.second);
    EXPECT_NE(reject(b).find("version"), std::string::npos);
  }
}

TEST(Npy, RejectsBadDtypes) {
  for (const std::string d : {"<c8", "<U4", "|O", "<f3", "<f1", "<f16", "<x4", "f4", "<f4 ", "<b2", "<i3", "<V8",
                              "?f4"}) {
    const std::string err = reject(with_header("{'descr': '" + d + "', 'fortran_order': False, 'shape': (1,), }", 4));
    EXPECT_NE(err.find("dtype"), std::string::npos) << d << ": " << err;
  }
  // Structured dtypes are a list, not a string.
  reject(with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4));
  const std::string big = reject(with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", 4));
  EXPECT_NE(big.find("big-endian"), std::string::npos) << big;
}

TEST(Npy, RejectsShapeSizeMismatch) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_NE(reject(with_header(dict, 20)).find("truncated"), std::string::npos);
  EXPECT_NE(reject(with_header(dict, 28)).find("beyond"), std::string::npos);
  EXPECT_NE(reject(with_header(dict, 0)).find("truncated"), std::string::npos);
}

TEST(Npy, RejectsHugeShapesWithoutAllocating) {
  for (const std::string shape : {"(4611686018427387904, 4611686018427387904)", "(9223372036854775807,)",
                                  "(99999999999999999999,)", "(4294967296, 4294967296, 2)",
                                  "(1152921504606846976,)", "(1099511627776, 1099511627776)"}) {
    const std::string err =
        reject(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }", 16));
    EXPECT_TRUE(err.find("large") != std::string::npos || err.find("64 bits") != std::string::npos ||
                err.find("truncated") != std::string::npos)
        << shape << ": " << err;
  }
  std::string dims = "(";
  for (int i = 0; i < 40; ++i) dims += "1, ";
  reject(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': " + dims + "), }", 4));
}

TEST(Npy, RejectsFortranOrder) {
  std::vector<float> v(6, 1.0f);
  const auto b = make_npy("<f4", {2, 3}, v.data(), 24, /*fortran_order=*/true);
  EXPECT_NE(reject(b).find("Fortran"), std::string::npos);
}

TEST(Npy, RejectsBadDicts) {
  const char* bad[] = {
      "",
      "[]",
      "{",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ",
      "{'descr': '<f4', 'fortran_order': False}",
      "{'descr': '<f4', 'shape': (2, 3)}",
      "{'fortran_order': False, 'shape': (2, 3)}",
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}",
      "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}",
      "{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3.0)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,, 3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}",
      "{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}",
      "{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3)}",
      "{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}",
      "{'descr': <f4, 'fortran_order': False, 'shape': (2, 3)}",
      "{'de\\scr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} junk",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}}",
  };
  for (const char* d : bad) {
    const std::string err = reject(with_header(d, 24));
    EXPECT_NE(err.find("header"), std::string::npos) << d << ": " << err;
  }
  // A header length pointing past the end of the file.
  auto b = valid_f32();
  b[8] = 0xff;
  b[9] = 0xff;
  EXPECT_NE(reject(b).find("truncated"), std::string::npos);
}

// Deterministic mutation sweep: flip, insert and delete bytes of valid images, as a fuzzer
// would. Under the sanitizer build this also checks memory safety.
TEST(Npy, MutationSweepNeverMisbehaves) {
  std::vector<std::vector<unsigned char>> seeds = {
      valid_f32(), valid_f32(1, 1), with_header("{'descr': '<u2', 'fortran_order': False, 'shape': (3, 2), }", 12, 2),
      with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 8, 3)};
  uint64_t s = 12345;
  auto rnd = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s >> 33);
  };
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 40000; ++iter) {
    std::vector<unsigned char> b = seeds[rnd() % seeds.size()];
    const int edits = 1 + static_cast<int>(rnd() % 4);
    for (int e = 0; e < edits && !b.empty(); ++e) {
      const size_t at = rnd() % b.size();
      switch (rnd() % 5) {
        case 0: b[at] = static_cast<unsigned char>(rnd()); break;
        case 1: b[at] ^= static_cast<unsigned char>(1u << (rnd() % 8)); break;
        case 2: b.insert(b.begin() + static_cast<long>(at), static_cast<unsigned char>("(),:'{} 0123456789<fuTF"[rnd() % 23])); break;
        case 3: b.erase(b.begin() + static_cast<long>(at)); break;
        case 4: b.resize(at); break;
      }
    }
    NpyArray a;
    std::string err;
    if (parse_npy(b.data(), b.size(), a, err)) {
      ++parsed;
      ASSERT_EQ(static_cast<size_t>(a.elements()) * static_cast<size_t>(a.item_size), a.data.size());
    } else {
      ++rejected;
      ASSERT_FALSE(err.empty());
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(parsed, 10);  // harmless mutations (data bytes, padding) still parse
}

TEST(Npy, FileErrors) {
  NpyArray a;
  std::string err;
  EXPECT_FALSE(onorm_tool::read_npy_file("/nonexistent/x.npy", a, err));
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
  EXPECT_FALSE(onorm_tool::read_npy_file("/", a, err));
  EXPECT_FALSE(err.empty());
  // Round trip through a file, and the size cap.
  const std::string path = ::testing::TempDir() + "/npy_test_roundtrip.npy";
  std::vector<float> v = {1, 2, 3, 4};
  ASSERT_TRUE(onorm_tool::write_npy_file(path, "<f4", {2, 2}, v.data(), 16, err)) << err;
  ASSERT_TRUE(onorm_tool::read_npy_file(path, a, err)) << err;
  EXPECT_EQ(a.elements(), 4);
  EXPECT_FALSE(onorm_tool::read_npy_file(path, a, err, 32));
  EXPECT_NE(err.find("larger"), std::string::npos) << err;
  std::remove(path.c_str());
}

namespace {

// Writes bytes into a FIFO from another thread while the reader reads it (a non-regular file).
bool read_through_fifo(const std::vector<unsigned char>& bytes, NpyArray& a, std::string& err) {
  const std::string path = ::testing::TempDir() + "/npy_test_fifo." + std::to_string(getpid());
  std::remove(path.c_str());
  signal(SIGPIPE, SIG_IGN);  // a reader that stops early must not kill the test
  if (mkfifo(path.c_str(), 0600) != 0) {
    ADD_FAILURE() << "mkfifo failed";
    return false;
  }
  std::thread writer([&] {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return;
    std::fwrite(bytes.data(), 1, bytes.size(), f);  // may stop early when the reader is done
    std::fclose(f);
  });
  const bool ok = onorm_tool::read_npy_file(path, a, err);
  writer.join();
  std::remove(path.c_str());
  return ok;
}

}  // namespace

// The header is checked before the data is read: a device that never ends fails on its first
// bytes (the whole-file reader read up to max_bytes and said "larger than" instead).
TEST(Npy, FileHeaderCheckedFirst) {
  NpyArray a;
  std::string err;
  EXPECT_FALSE(onorm_tool::read_npy_file("/dev/zero", a, err, uint64_t{1} << 20));
  EXPECT_NE(err.find("bad magic"), std::string::npos) << err;
  EXPECT_FALSE(onorm_tool::read_npy_file("/", a, err));
  EXPECT_NE(err.find("is a directory"), std::string::npos) << err;
  // A header whose shape is beyond max_bytes is refused before the data is read.
  const std::string path = ::testing::TempDir() + "/npy_test_big.npy";
  std::vector<unsigned char> img = with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1024, 1024), }", 0);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(img.data(), 1, img.size(), f);
  std::fclose(f);
  EXPECT_FALSE(onorm_tool::read_npy_file(path, a, err, 4096));
  EXPECT_NE(err.find("larger"), std::string::npos) << err;
  EXPECT_FALSE(onorm_tool::read_npy_file(path, a, err));  // the size does not match the shape
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  std::remove(path.c_str());
}

// Pipes: exactly the promised bytes are read; fewer is a truncated file, more is refused.
TEST(Npy, FileFromPipe) {
  NpyArray a;
  std::string err;
  const std::vector<unsigned char> good = valid_f32(3, 5);
  ASSERT_TRUE(read_through_fifo(good, a, err)) << err;
  EXPECT_EQ(a.elements(), 15);
  EXPECT_EQ(a.data.size(), 60u);
  float v;
  std::memcpy(&v, a.data.data() + 4 * 7, 4);
  EXPECT_EQ(v, 7.5f);
  std::vector<unsigned char> shortened(good.begin(), good.end() - 1);
  EXPECT_FALSE(read_through_fifo(shortened, a, err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  // A header promising 4 GB followed by a few bytes: a truncated file, not a 4 GB buffer.
  EXPECT_FALSE(read_through_fifo(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824,), }", 16),
                                 a, err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  std::vector<unsigned char> longer = good;
  longer.push_back(0);
  EXPECT_FALSE(read_through_fifo(longer, a, err));
  EXPECT_NE(err.find("beyond"), std::string::npos) << err;
  EXPECT_TRUE(a.data.empty());
}
