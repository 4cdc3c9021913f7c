// A tensor storage's memory freed (0 bytes; the tensors over it keep their shapes and identity)
// and allocated again, as torch's FSDP resizes storages: the sharded engine's gathered units
// exist only while in use (trainer/fsdp.cc), and an engine's training state leaves the device
// while the rollout generates (ModuleEngine::sleep).
#pragma once

#include <c10/core/StorageImpl.h>

#include <cstddef>

namespace verl::trainer {

inline void free_storage(c10::StorageImpl& s) {
  s.set_data_ptr_noswap(at::DataPtr(nullptr, s.device()));
  s.set_nbytes(0);
}

inline void alloc_storage(c10::StorageImpl& s, size_t bytes) {
  s.set_data_ptr_noswap(s.allocator()->allocate(bytes));
  s.set_nbytes(bytes);
}

}  // namespace verl::trainer
