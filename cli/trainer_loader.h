// Finds and loads the trainer module (libverlctl_trainer.so) with dlopen, so that libtorch is
// loaded by `verlctl train` alone. Search order: $VERLCTL_TRAINER_MODULE, the directory of the
// running binary, then <binary>/../lib/verlctl (the install layout).
#pragma once

#include <optional>
#include <string>

#include "trainer/module_api.h"

namespace verl::cli {

std::optional<std::string> find_trainer_module();

struct TrainerModule {
  std::string path;
  VerlTrainerRunFn run = nullptr;
  VerlTrainerInfoFn info = nullptr;
};

// Loads the module once per process; throws verl::Error (not compiled in, exit 6) naming the
// places it looked, or (failure) with dlerror() when the file is there but does not load.
const TrainerModule& load_trainer_module();

}  // namespace verl::cli
