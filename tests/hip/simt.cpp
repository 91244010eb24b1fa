// The SIMT emulator (simt.hpp): fibers, the scheduler, and the semantics of the collectives.
#include "simt.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "fiber.hpp"

namespace onorm_sim {

namespace {

enum class State { runnable, at_syncthreads, at_warp, done };

struct Thread {
  FiberContext ctx;
  dim3 tid;
  int linear = 0;
  State state = State::runnable;
  Collective* collective = nullptr;
};

constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kMaxErrors = 20;

}  // namespace

class Machine {
 public:
  int warp = 32;
  dim3 grid, block, block_index;
  std::vector<Thread> threads;
  std::vector<std::unique_ptr<char[]>> stacks;
  std::vector<unsigned char> dynamic;
  Thread* current = nullptr;
  FiberContext scheduler;
  std::vector<std::string> errors;
  const std::function<void()>* kernel = nullptr;
  bool abort_block = false;
  std::vector<Thread*> waiting;  // complete_warp's lanes at a collective

  void error(const std::string& what) {
    if (errors.size() < kMaxErrors) {
      std::ostringstream s;
      s << "block (" << block_index.x << "," << block_index.y << "," << block_index.z << ")";
      if (current) s << " thread " << current->linear << " (warp " << current->linear / warp << " lane " << current->linear % warp << ")";
      s << ": " << what;
      errors.push_back(s.str());
    } else if (errors.size() == kMaxErrors) {
      errors.push_back("... more errors");
    }
  }

  void block_on(State s) {
    current->state = s;
    switch_fiber(current->ctx, scheduler);
  }

  static void trampoline();

  void run_block();
  bool complete_warp(int w);
};

namespace {
Machine* g_machine = nullptr;

// Fiber stacks kept from launch to launch (a fresh one costs page faults as it is first touched).
std::vector<std::unique_ptr<char[]>>& stack_pool() {
  static std::vector<std::unique_ptr<char[]>> pool;
  return pool;
}
}  // namespace

Machine& machine() { return *g_machine; }

void Machine::trampoline() {
  Machine& m = *g_machine;
  (*m.kernel)();
  m.current->state = State::done;
  switch_fiber(m.current->ctx, m.scheduler);
}

// Completes the collective that warp w's waiting lanes reached, if every live lane of w waits.
bool Machine::complete_warp(int w) {
  const int n = static_cast<int>(threads.size());
  const int first = w * warp;
  const int last = first + warp < n ? first + warp : n;
  std::vector<Thread*>& at = waiting;  // reused: an allocation per collective was a tenth of the run
  at.clear();
  for (int i = first; i < last; ++i) {
    if (threads[i].state == State::runnable) return false;
    if (threads[i].state == State::at_warp) at.push_back(&threads[i]);
  }
  if (at.empty()) return false;
  Thread* saved = current;
  const Collective& c0 = *at[0]->collective;
  auto participates = [&](int lane) {
    const int i = first + lane;
    return i < last && threads[i].state == State::at_warp;
  };
  for (Thread* t : at) {
    current = t;
    const Collective& c = *t->collective;
    if (c.kind != c0.kind || c.width != c0.width || c.bytes != c0.bytes || c.has_mask != c0.has_mask ||
        (c.has_mask && c.mask != c0.mask)) {
      error("lanes of one warp reached different collectives (or different widths/masks) at once");
    }
  }
  uint64_t ballot = 0;
  for (Thread* t : at) {
    if (t->collective->kind == CollectiveKind::ballot && t->collective->predicate)
      ballot |= uint64_t(1) << (t->linear - first);
  }
  for (Thread* t : at) {
    current = t;
    Collective& c = *t->collective;
    const int lane = t->linear - first;
    if (c.has_mask) {
      if (warp < 64 && (c.mask >> warp) != 0) error("mask names lanes beyond the warp width");
      if (!((c.mask >> lane) & 1)) error("the calling lane is not in its own *_sync mask");
      for (int l = 0; l < warp; ++l) {
        if (((c.mask >> l) & 1) && !participates(l)) {
          std::ostringstream s;
          s << "*_sync mask names lane " << l << ", which does not take part (exited, elsewhere, or beyond the block)";
          error(s.str());
          break;
        }
      }
    }
    if (c.kind == CollectiveKind::ballot) {
      c.ballot = c.has_mask ? (ballot & c.mask) : ballot;
      continue;
    }
    if (c.kind == CollectiveKind::syncwarp) continue;
    if (c.width <= 0 || c.width > warp || (c.width & (c.width - 1)) != 0) {
      std::ostringstream s;
      s << "shuffle width " << c.width << " is not a power of two <= the warp width " << warp;
      error(s.str());
      std::memset(c.out, 0xff, sizeof c.out);
      continue;
    }
    const int base = lane & ~(c.width - 1);
    int src = lane;
    switch (c.kind) {
      case CollectiveKind::shfl_idx: src = base + (((c.arg % c.width) + c.width) % c.width); break;
      case CollectiveKind::shfl_up: src = (lane - base) >= c.arg ? lane - c.arg : lane; break;
      case CollectiveKind::shfl_down: src = (lane - base) + c.arg < c.width ? lane + c.arg : lane; break;
      case CollectiveKind::shfl_xor: {
        // As CUDA and HIP define it: a lane beyond the caller's group returns the caller's value.
        const int x = lane ^ c.arg;
        src = x >= base + c.width ? lane : x;
        if (x < 0 || x >= warp) src = lane;
        break;
      }
      default: break;
    }
    if (!participates(src)) {
      std::ostringstream s;
      s << "shuffle reads lane " << src << ", which does not take part (exited, elsewhere, or beyond the block)";
      error(s.str());
      std::memset(c.out, 0xff, sizeof c.out);
    } else {
      std::memcpy(c.out, threads[first + src].collective->in, c.bytes);
    }
  }
  current = saved;
  for (Thread* t : at) t->state = State::runnable;
  return true;
}

void Machine::run_block() {
  const int n = static_cast<int>(threads.size());
  for (int i = 0; i < n; ++i) {
    Thread& t = threads[i];
    t.state = State::runnable;
    t.collective = nullptr;
    make_fiber(t.ctx, stacks[i].get(), kStackBytes, &Machine::trampoline);
  }
  const int warps = (n + warp - 1) / warp;
  for (;;) {
    bool progressed = false;
    for (int i = 0; i < n; ++i) {
      if (threads[i].state != State::runnable) continue;
      current = &threads[i];
      switch_fiber(scheduler, threads[i].ctx);
      current = nullptr;
      progressed = true;
    }
    bool all_done = true;
    for (const Thread& t : threads) all_done = all_done && t.state == State::done;
    if (all_done) return;
    for (int w = 0; w < warps; ++w) progressed = complete_warp(w) || progressed;
    if (progressed) continue;
    // No warp collective pending: a barrier completes once every live thread waits at it.
    bool all_at_barrier = true;
    for (const Thread& t : threads) all_at_barrier = all_at_barrier && (t.state == State::at_syncthreads || t.state == State::done);
    if (all_at_barrier) {
      for (Thread& t : threads)
        if (t.state == State::at_syncthreads) t.state = State::runnable;
      continue;
    }
    error("deadlock: no thread can proceed (a collective or barrier that some threads never reach)");
    return;  // the fibers left behind are abandoned with their stacks
  }
}

int warp_size() { return g_machine->warp; }
const dim3& thread_idx() { return g_machine->current->tid; }
const dim3& block_idx() { return g_machine->block_index; }
const dim3& block_dim() { return g_machine->block; }
const dim3& grid_dim() { return g_machine->grid; }
unsigned lane_id() { return static_cast<unsigned>(g_machine->current->linear % g_machine->warp); }
void* dynamic_shared() { return g_machine->dynamic.data(); }
void record_error(const std::string& what) { g_machine->error(what); }

void syncthreads() { g_machine->block_on(State::at_syncthreads); }

void warp_collective(Collective& c) {
  g_machine->current->collective = &c;
  g_machine->block_on(State::at_warp);
  g_machine->current->collective = nullptr;
}

uint64_t ballot(bool predicate) {
  Collective c{};
  c.kind = CollectiveKind::ballot;
  c.width = g_machine->warp;
  c.predicate = predicate;
  warp_collective(c);
  return c.ballot;
}
uint64_t ballot_sync(uint64_t mask, bool predicate) {
  Collective c{};
  c.kind = CollectiveKind::ballot;
  c.has_mask = true;
  c.mask = mask;
  c.width = g_machine->warp;
  c.predicate = predicate;
  warp_collective(c);
  return c.ballot;
}
void syncwarp(uint64_t mask) {
  Collective c{};
  c.kind = CollectiveKind::syncwarp;
  c.has_mask = true;
  c.mask = mask;
  c.width = g_machine->warp;
  warp_collective(c);
}

std::vector<std::string> launch(int warp_width, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                                const std::function<void()>& kernel) {
  Machine m;
  if (warp_width != 32 && warp_width != 64 && warp_width != 16) {
    return {"emulator: warp width must be 16, 32 or 64"};
  }
  m.warp = warp_width;
  m.grid = grid;
  m.block = block;
  m.kernel = &kernel;
  m.dynamic.assign(dynamic_shared_bytes + 16, 0xa5);  // poisoned, like uninitialized memory
  const size_t n = static_cast<size_t>(block.x) * block.y * block.z;
  if (n == 0 || n > 1024) return {"emulator: block size must be 1..1024 threads"};
  m.threads.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto& pool = stack_pool();
    if (pool.empty()) {
      m.stacks.emplace_back(new char[kStackBytes]);
    } else {
      m.stacks.push_back(std::move(pool.back()));
      pool.pop_back();
    }
    Thread& t = m.threads[i];
    t.linear = static_cast<int>(i);
    t.tid = dim3(static_cast<unsigned>(i % block.x), static_cast<unsigned>((i / block.x) % block.y),
                 static_cast<unsigned>(i / (static_cast<size_t>(block.x) * block.y)));
  }
  Machine* saved = g_machine;
  g_machine = &m;
  for (unsigned z = 0; z < grid.z && m.errors.empty(); ++z)
    for (unsigned y = 0; y < grid.y && m.errors.empty(); ++y)
      for (unsigned x = 0; x < grid.x && m.errors.empty(); ++x) {
        m.block_index = dim3(x, y, z);
        m.run_block();
      }
  g_machine = saved;
  for (auto& stack : m.stacks) stack_pool().push_back(std::move(stack));
  return m.errors;
}

}  // namespace onorm_sim
