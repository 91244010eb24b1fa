// onlinenorm.compare: `onorm compare` (tools/compare.hpp) linked into the extension, not redone.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <map>
#include <optional>
#include <string>

namespace nb = nanobind;

// x in host memory, C order (nanobind copies another layout).
using CompareArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// The JSON document (schema onorm-compare/1) of onorm compare run with `options`, named as the
// tool's without "--"; x, when given, stands for the --input file (options["input"] names it).
// ValueError for a bad option or x (the tool's message), RuntimeError for an unavailable backend.
std::string compare_document(const std::map<std::string, std::string>& options, const std::optional<CompareArray>& x);
