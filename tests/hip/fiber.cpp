#include "fiber.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__ELF__)
// onorm_sim_switch(save, load): pushes the System V callee-saved registers and the MXCSR and
// x87 control words, stores the stack pointer to *save, takes `load` as the stack pointer and
// pops the same frame from there. The frame, from the stack pointer up: MXCSR (4 bytes), x87
// control word (4), r15, r14, r13, r12, rbx, rbp, the return address.
extern "C" void onorm_sim_switch(void** save, void* load);
asm(R"(
    .text
    .p2align 4
    .globl onorm_sim_switch
    .hidden onorm_sim_switch
    .type onorm_sim_switch, @function
onorm_sim_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size onorm_sim_switch, .-onorm_sim_switch
)");
#endif

namespace onorm_sim {

#if defined(__x86_64__) && defined(__ELF__)
void make_fiber(FiberContext& f, char* stack, size_t bytes, void (*entry)()) {
  // A frame as onorm_sim_switch leaves it, whose return address is entry; above it a zero word
  // where a call would have left entry's own return address (entry starts, as after a call,
  // with the stack pointer 8 bytes past a 16-byte boundary).
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t(15);
  uint64_t* p = reinterpret_cast<uint64_t*>(top) - 9;
  std::memset(p, 0, 9 * sizeof(uint64_t));
  const uint32_t control[2] = {0x1f80u, 0x037fu};  // the ABI's initial MXCSR and x87 control word
  std::memcpy(p, control, sizeof control);
  p[7] = reinterpret_cast<uint64_t>(entry);
  f.sp = p;
}

void switch_fiber(FiberContext& from, FiberContext& to) { onorm_sim_switch(&from.sp, to.sp); }
#else
void make_fiber(FiberContext& f, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&f.uc);
  f.uc.uc_stack.ss_sp = stack;
  f.uc.uc_stack.ss_size = bytes;
  f.uc.uc_link = nullptr;
  makecontext(&f.uc, entry, 0);
}

void switch_fiber(FiberContext& from, FiberContext& to) { swapcontext(&from.uc, &to.uc); }
#endif

}  // namespace onorm_sim
