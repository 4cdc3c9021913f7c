// The C ABI between `verlctl` and the trainer module (libverlctl_trainer.so). Only this header
// is shared: cli/ never includes torch headers, so the binary starts without loading libtorch
// and loads the module with dlopen for `verlctl train` alone.
//
// The request is a JSON object:
//   {"config": {...the resolved, validated job config (templates/job.yaml shape)...},
//    "sft": false,            // run only the supervised warm start (verlctl train --sft)
//    "log_level": "info"}
// Rank and world come from the environment as torchrun hands them over: RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT (absent -> a single rank).
#pragma once

#include <stddef.h>

#define VERL_TRAINER_ABI_VERSION 1

extern "C" {

struct VerlTrainerResult {
  int exit_code;        // verl::ExitCode value
  char message[4096];   // what went wrong, when exit_code != 0
  char hint[1024];      // what to try
};

// Runs the trainer to completion. Never throws; errors come back in *result.
int verl_trainer_run(const char* request_json, VerlTrainerResult* result);
// JSON: {"abi": 1, "torch": "2.11.0", "cuda": true|false, "nccl": true|false, "gloo": true}
const char* verl_trainer_info();

typedef int (*VerlTrainerRunFn)(const char*, VerlTrainerResult*);
typedef const char* (*VerlTrainerInfoFn)();

}  // extern "C"
