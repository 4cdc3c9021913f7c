#pragma once
// The host allocator's policy for a trainer that computes on the CPU.
//
// glibc serves every allocation over 32 MiB with a fresh mmap and unmaps it on free, so each
// [tokens, vocab] logits tensor (hundreds of MiB with a 150k vocabulary) is page-faulted in and
// zeroed by the kernel on every forward and backward: on a 2-core VM that was 4-6x the step time
// (docs/BENCHMARKS.md, "host allocator"). keep_freed_host_memory() makes glibc serve them from
// its heap and keep freed memory for the next step instead: the process's resident memory stays
// at its peak, which is what a training loop reaches every step anyway.
namespace verl::trainer {

// Idempotent; a no-op where the C library is not glibc. Returns whether the policy is in force.
bool keep_freed_host_memory();

}  // namespace verl::trainer
