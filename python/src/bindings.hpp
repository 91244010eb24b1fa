// The extension's functions of API version 2 part 2, each group in its own file; module.cpp
// registers them beside the version-1 ones.
#pragma once
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void bind_cross_entropy(nb::module_& m);  // cross_entropy.cpp
void bind_softmax_topk(nb::module_& m);   // softmax_topk.cpp
void bind_row_states(nb::module_& m);     // row_states.cpp
