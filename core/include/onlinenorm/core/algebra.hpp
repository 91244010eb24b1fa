// The whole backend-neutral algebra in one include.
#pragma once

#include "onlinenorm/core/convert.hpp"
#include "onlinenorm/core/max_sum.hpp"
#include "onlinenorm/core/norm_stats.hpp"
#include "onlinenorm/core/pairwise.hpp"
#include "onlinenorm/core/sum_sq.hpp"
#include "onlinenorm/core/welford.hpp"
