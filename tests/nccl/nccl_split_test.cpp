// onlinenorm::nccl on every GPU of the machine, one process per GPU (tests/nccl/ranks.hpp): rows
// split by columns into uneven slices (one of them empty) give the single call's results within
// its bound against a float64 reference (softmax, log-softmax, LayerNorm, RMSNorm, cross-entropy),
// and mean, rstd, loss and lse bitwise the same on every rank.
// Rows: random, offset (1e4 + N(0,1)) with outliers at the slice boundaries, all -inf, one NaN.
// Exits 77 (skipped) with fewer than two GPUs.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "onlinenorm/onlinenorm_nccl.h"
#include "ranks.hpp"

namespace {

struct Result {
  int fails;
  int checks;
  uint64_t stats_hash;  // FNV-1a of every mean, rstd, loss and lse this rank wrote
  char first_failure[240];
};

uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

struct Shape {
  int64_t rows, cols;
};

// The columns of rank p: uneven cuts, and for the second shape rank 0's slice is empty.
std::vector<int64_t> cuts(int64_t cols, int ranks, int variant) {
  std::vector<int64_t> b(ranks + 1);
  for (int p = 0; p <= ranks; ++p) b[p] = cols * p * p / (ranks * ranks);  // growing slices
  if (variant == 1) b[1] = 0;
  return b;
}

std::vector<float> rows_of(const Shape& s, uint64_t seed, const std::vector<int64_t>& b) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(s.rows * s.cols));
  for (int64_t r = 0; r < s.rows; ++r) {
    float* row = &x[static_cast<size_t>(r * s.cols)];
    const int kind = static_cast<int>(r % 5);
    for (int64_t j = 0; j < s.cols; ++j) row[j] = kind == 1 ? 1e4f + n01(g) : 3.0f * n01(g);
    if (kind == 1)
      for (int64_t c : b)
        if (c < s.cols) row[c] = 1e4f + 300.0f;  // an outlier at each slice's first column
    if (kind == 3 && r == 3)
      for (int64_t j = 0; j < s.cols; ++j) row[j] = -std::numeric_limits<float>::infinity();
    if (kind == 4 && r == 4) row[s.cols / 2] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

struct Checker {
  Result& res;
  void fail(const std::string& what) {
    if (res.fails++ == 0) std::snprintf(res.first_failure, sizeof res.first_failure, "%s", what.c_str());
  }
  void check(bool ok, const std::string& what) {
    ++res.checks;
    if (!ok) fail(what);
  }
};

bool close_or_both_nan(double got, double ref, double bound) {
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isinf(ref)) return got == ref;
  return std::fabs(got - ref) <= bound;
}

Result run_rank(int rank, int ranks, ncclComm_t comm) {
  Result res{};
  Checker ck{res};
  onorm_context ctx = nullptr;
  if (onorm_create(ONORM_BACKEND_CUDA, rank, &ctx) != ONORM_OK) {
    ck.fail(std::string("onorm_create: ") + onorm_last_error());
    return res;
  }
  uint64_t hash = 1469598103934665603ull;
  const Shape shapes[] = {{40, 1000}, {7, 131073}, {300, 9}, {3, 1 << 20}};
  for (int si = 0; si < 4; ++si) {
    const Shape s = shapes[si];
    const std::vector<int64_t> b = cuts(s.cols, ranks, si % 2);
    const std::vector<float> x = rows_of(s, 0x5eed0000u + si, b);
    const int64_t c0 = b[rank], cn = b[rank + 1] - b[rank];
    const size_t n = x.size();
    // Every rank holds the whole matrix and passes its slice as a strided view.
    void *dx = nullptr, *dy = nullptr, *dg = nullptr, *dbeta = nullptr, *dm = nullptr, *dr = nullptr;
    onorm_malloc(ctx, n * 4, &dx);
    onorm_malloc(ctx, n * 4, &dy);
    onorm_malloc(ctx, static_cast<size_t>(s.cols) * 4, &dg);
    onorm_malloc(ctx, static_cast<size_t>(s.cols) * 4, &dbeta);
    onorm_malloc(ctx, static_cast<size_t>(s.rows) * 4, &dm);
    onorm_malloc(ctx, static_cast<size_t>(s.rows) * 4, &dr);
    std::vector<float> gamma(static_cast<size_t>(s.cols)), beta(static_cast<size_t>(s.cols));
    for (int64_t j = 0; j < s.cols; ++j) {
      gamma[j] = 0.5f + static_cast<float>(j % 7) * 0.25f;
      beta[j] = static_cast<float>(j % 3) - 1.0f;
    }
    onorm_memcpy(ctx, dx, x.data(), n * 4, ONORM_COPY_HOST_TO_DEVICE);
    onorm_memcpy(ctx, dg, gamma.data(), gamma.size() * 4, ONORM_COPY_HOST_TO_DEVICE);
    onorm_memcpy(ctx, dbeta, beta.data(), beta.size() * 4, ONORM_COPY_HOST_TO_DEVICE);
    const onorm_rows xs{static_cast<float*>(dx) + c0, ONORM_F32, s.rows, cn, s.cols};
    const onorm_rows ys{static_cast<float*>(dy) + c0, ONORM_F32, s.rows, cn, s.cols};
    std::vector<float> y(static_cast<size_t>(s.rows * cn)), mean(static_cast<size_t>(s.rows)),
        rstd(static_cast<size_t>(s.rows));
    auto fetch_y = [&]() {
      onorm_synchronize(ctx);
      for (int64_t r = 0; r < s.rows; ++r)
        onorm_memcpy(ctx, y.data() + r * cn, static_cast<float*>(dy) + r * s.cols + c0, static_cast<size_t>(cn) * 4,
                     ONORM_COPY_DEVICE_TO_HOST);
    };
    const std::string where = " shape " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + " rank " +
                              std::to_string(rank) + " cols [" + std::to_string(c0) + ", +" + std::to_string(cn) + ")";
    // softmax and log-softmax against float64
    for (int log = 0; log < 2; ++log) {
      const onorm_status st = onorm_nccl_softmax(ctx, comm, &xs, log, &ys);
      ck.check(st == ONORM_OK, std::string("onorm_nccl_softmax: ") + onorm_last_error() + where);
      fetch_y();
      for (int64_t r = 0; r < s.rows; ++r) {
        const float* row = &x[static_cast<size_t>(r * s.cols)];
        double m = -INFINITY;
        bool nan = false;
        for (int64_t j = 0; j < s.cols; ++j) {
          nan = nan || std::isnan(row[j]);
          m = std::max(m, static_cast<double>(row[j]));
        }
        double d = 0;
        if (m != -INFINITY)
          for (int64_t j = 0; j < s.cols; ++j) d += std::exp(static_cast<double>(row[j]) - m);
        for (int64_t j = 0; j < cn; ++j) {
          const double v = row[c0 + j];
          double ref, bound;
          if (log) {
            ref = nan ? NAN : m == -INFINITY ? -INFINITY : (v - m) - std::log(d);
            bound = 2e-5 + 1e-6 * std::fabs(ref);
            if (ref < -80) continue;
          } else {
            ref = nan ? NAN : m == -INFINITY ? 0.0 : std::exp(v - m) / d;
            bound = 1e-5 * ref + 1e-30;
          }
          const double got = y[static_cast<size_t>(r * cn + j)];
          if (!close_or_both_nan(got, ref, bound)) {
            ck.check(false, (log ? "log_softmax" : "softmax") + std::string(" row ") + std::to_string(r) + " col " +
                                std::to_string(c0 + j) + ": " + std::to_string(got) + " vs " + std::to_string(ref) + where);
            break;
          }
        }
      }
    }
    // LayerNorm (gamma, beta, mean, rstd) and RMSNorm (gamma, rstd) against float64
    for (int kind = 0; kind < 2; ++kind) {
      onorm_norm_args a;
      onorm_norm_args_init(&a, kind == 0 ? ONORM_LAYER_NORM : ONORM_RMS_NORM);
      a.gamma = static_cast<float*>(dg) + c0;
      a.beta = kind == 0 ? static_cast<float*>(dbeta) + c0 : nullptr;
      a.param_dtype = ONORM_F32;
      a.eps = 1e-5;
      a.mean = kind == 0 ? static_cast<float*>(dm) : nullptr;
      a.rstd = static_cast<float*>(dr);
      const onorm_status st = onorm_nccl_norm(ctx, comm, &xs, &a, &ys);
      ck.check(st == ONORM_OK, std::string("onorm_nccl_norm: ") + onorm_last_error() + where);
      fetch_y();
      onorm_memcpy(ctx, rstd.data(), dr, rstd.size() * 4, ONORM_COPY_DEVICE_TO_HOST);
      if (kind == 0) onorm_memcpy(ctx, mean.data(), dm, mean.size() * 4, ONORM_COPY_DEVICE_TO_HOST);
      hash = fnv(hash, rstd.data(), rstd.size() * 4);
      if (kind == 0) hash = fnv(hash, mean.data(), mean.size() * 4);
      for (int64_t r = 0; r < s.rows; ++r) {
        const float* row = &x[static_cast<size_t>(r * s.cols)];
        long double sum = 0;
        for (int64_t j = 0; j < s.cols; ++j) sum += row[j];
        const double mu = kind == 0 ? static_cast<double>(sum / s.cols) : 0.0;
        long double ss = 0;
        for (int64_t j = 0; j < s.cols; ++j) ss += (static_cast<long double>(row[j]) - mu) * (static_cast<long double>(row[j]) - mu);
        const double rs = 1.0 / std::sqrt(static_cast<double>(ss / s.cols) + 1e-5);
        // RMSNorm of a row holding an infinity: NaN through the moments (docs/API.md, "Infinities
        // in moments"), rstd 0 in the single call.
        bool inf = false;
        for (int64_t j = 0; j < s.cols; ++j) inf = inf || std::isinf(row[j]);
        if (kind == 1 && inf) continue;
        if (std::isfinite(rs) && !std::isnan(mu)) {
          ck.check(std::fabs(rstd[r] - rs) <= 1e-5 * rs, "rstd row " + std::to_string(r) + ": " +
                                                             std::to_string(rstd[r]) + " vs " + std::to_string(rs) + where);
          if (kind == 0)
            ck.check(std::fabs(mean[r] - mu) <= 1e-6 * (std::fabs(mu) + 1 / rs),
                     "mean row " + std::to_string(r) + where);
        }
        for (int64_t j = 0; j < cn; ++j) {
          const double gj = gamma[c0 + j], bj = kind == 0 ? beta[c0 + j] : 0.0;
          const double ref = (row[c0 + j] - mu) * rs * gj + bj;
          const double bound = 1e-5 * std::fabs(ref) + 1e-6 + std::ldexp(1.0, -20) * std::fabs(mu) * rs * std::fabs(gj);
          const double got = y[static_cast<size_t>(r * cn + j)];
          if (!(std::isnan(ref) ? std::isnan(got) : std::fabs(got - ref) <= bound)) {
            ck.check(false, (kind == 0 ? "layer_norm" : "rms_norm") + std::string(" row ") + std::to_string(r) +
                                " col " + std::to_string(c0 + j) + ": " + std::to_string(got) + " vs " +
                                std::to_string(ref) + where);
            break;
          }
        }
      }
    }
    // cross-entropy: targets of the whole row, one ignored row, one out of range; every rank
    // gets the whole loss (bitwise the same: the hash) and its slice of the gradient.
    {
      const double ls = 0.1, z = 1e-4, gs = 1.0 / static_cast<double>(s.rows);
      std::vector<int64_t> t(static_cast<size_t>(s.rows));
      for (int64_t r = 0; r < s.rows; ++r) t[r] = r == 2 ? -100 : r == 5 ? s.cols : (r * 7919) % s.cols;
      void *dt = nullptr, *dl = nullptr, *dlse = nullptr;
      onorm_malloc(ctx, t.size() * 8, &dt);
      onorm_malloc(ctx, t.size() * 4, &dl);
      onorm_malloc(ctx, t.size() * 4, &dlse);
      onorm_memcpy(ctx, dt, t.data(), t.size() * 8, ONORM_COPY_HOST_TO_DEVICE);
      onorm_cross_entropy_args a;
      onorm_cross_entropy_args_init(&a);
      a.targets = static_cast<const int64_t*>(dt);
      a.label_smoothing = ls;
      a.z_loss = z;
      a.grad_scale = gs;
      a.loss = static_cast<float*>(dl);
      a.lse = static_cast<float*>(dlse);
      a.dlogits = &ys;
      const onorm_status st = onorm_nccl_cross_entropy(ctx, comm, &xs, c0, &a);
      ck.check(st == ONORM_OK, std::string("onorm_nccl_cross_entropy: ") + onorm_last_error() + where);
      fetch_y();
      std::vector<float> loss(t.size()), lse(t.size());
      onorm_memcpy(ctx, loss.data(), dl, loss.size() * 4, ONORM_COPY_DEVICE_TO_HOST);
      onorm_memcpy(ctx, lse.data(), dlse, lse.size() * 4, ONORM_COPY_DEVICE_TO_HOST);
      hash = fnv(hash, loss.data(), loss.size() * 4);
      hash = fnv(hash, lse.data(), lse.size() * 4);
      for (int64_t r = 0; r < s.rows; ++r) {
        const float* row = &x[static_cast<size_t>(r * s.cols)];
        double m = -INFINITY, sum = 0;
        bool nan = false;
        for (int64_t j = 0; j < s.cols; ++j) {
          nan = nan || std::isnan(row[j]);
          m = std::max(m, static_cast<double>(row[j]));
          sum += row[j];
        }
        if (nan || m == -INFINITY) continue;  // NaN and all -inf rows: their rules are the single call's tests'
        double d = 0;
        for (int64_t j = 0; j < s.cols; ++j) d += std::exp(static_cast<double>(row[j]) - m);
        const double l = m + std::log(d);
        ck.check(std::fabs(lse[r] - l) <= 1e-6 * (std::fabs(l) + 1), "lse row " + std::to_string(r) + where);
        const bool ignored = t[r] == -100, out = t[r] >= s.cols;
        if (ignored) {
          ck.check(loss[r] == 0.0f, "ignored row's loss" + where);
        } else if (out) {
          ck.check(std::isnan(loss[r]), "out-of-range target's loss" + where);
        } else {
          const double ref = l - (1 - ls) * row[t[r]] - ls * sum / s.cols + z * l * l;
          ck.check(std::fabs(loss[r] - ref) <= 1e-6 * (std::fabs(l) + 1) + 1e-6 * std::fabs(ref),
                   "loss row " + std::to_string(r) + ": " + std::to_string(loss[r]) + " vs " + std::to_string(ref) + where);
        }
        for (int64_t j = 0; j < cn; ++j) {
          const double got = y[static_cast<size_t>(r * cn + j)];
          if (ignored) {
            if (got != 0.0) {
              ck.check(false, "ignored row's gradient" + where);
              break;
            }
            continue;
          }
          const double sm = std::exp(static_cast<double>(row[c0 + j]) - l);
          const double q = (1 - ls) * (c0 + j == t[r]) + ls / s.cols;
          const double ref = out ? NAN : gs * ((1 + 2 * z * l) * sm - q);
          const double bound = std::fabs(gs) * (1e-5 * (1 + 2 * z * (std::fabs(l) + 1)) * sm + 1e-30) + 1e-6 * std::fabs(gs);
          if (!close_or_both_nan(got, ref, bound)) {
            ck.check(false, "dlogits row " + std::to_string(r) + " col " + std::to_string(c0 + j) + ": " +
                                std::to_string(got) + " vs " + std::to_string(ref) + where);
            break;
          }
        }
      }
      for (void* p : {dt, dl, dlse}) onorm_free(ctx, p);
    }
    for (void* p : {dx, dy, dg, dbeta, dm, dr}) onorm_free(ctx, p);
  }
  // Refused before the collective (every rank alike), with nothing to wait for.
  ck.check(onorm_nccl_softmax(ctx, nullptr, nullptr, 0, nullptr) == ONORM_ERROR_INVALID_ARGUMENT, "NULL comm accepted");
  res.stats_hash = hash;
  onorm_destroy(ctx);
  return res;
}

}  // namespace

int main() {
  const int gpus = onorm_nccl_test::count_gpus();
  if (gpus < 2) {
    std::printf("skipped: %d CUDA device(s), the split needs 2 or more\n", gpus);
    return 77;
  }
  std::vector<Result> results;
  const bool ran = onorm_nccl_test::run_ranks<Result>(gpus, run_rank, results);
  int fails = ran ? 0 : 1;
  for (int r = 0; r < gpus; ++r) {
    std::printf("rank %d: %d checks, %d failed%s%s\n", r, results[r].checks, results[r].fails,
                results[r].fails ? ": " : "", results[r].first_failure);
    fails += results[r].fails;
    if (results[r].stats_hash != results[0].stats_hash) {
      std::printf("rank %d: mean, rstd, loss or lse differ from rank 0's\n", r);
      ++fails;
    }
  }
  std::printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}
