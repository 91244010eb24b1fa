// The SIMT emulator's fibers (simt.cpp): a context per emulated thread and one for the
// scheduler, switched in user space. On x86-64 (ELF) a switch saves the callee-saved registers
// and the stack pointer; glibc's swapcontext, used elsewhere, also saves the signal mask: a
// system call per switch, which was most of the emulator's run time.
#pragma once

#include <cstddef>

#if !(defined(__x86_64__) && defined(__ELF__))
#include <ucontext.h>
#endif

namespace onorm_sim {

struct FiberContext {
#if defined(__x86_64__) && defined(__ELF__)
  void* sp = nullptr;  // the saved registers lie on the fiber's stack from here
#else
  ucontext_t uc;
#endif
};

// Prepares `f` to run entry() on [stack, stack + bytes) from its first switch_fiber(.., f).
// entry must not return: it switches away for good.
void make_fiber(FiberContext& f, char* stack, size_t bytes, void (*entry)());

// Saves the running context into `from` and resumes `to`.
void switch_fiber(FiberContext& from, FiberContext& to);

}  // namespace onorm_sim
