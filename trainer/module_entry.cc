// The module's C ABI (module_api.h): parse the request, call the library, turn every
// exception into a VerlTrainerResult. Nothing else lives here.
#include <cstring>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/error.h"
#include "common/log.h"
#include "trainer/module_api.h"
#include "trainer/ppo_trainer.h"

namespace {

void fill(VerlTrainerResult* result, verl::ExitCode code, const std::string& message,
          const std::string& hint) {
  if (result == nullptr) return;
  result->exit_code = static_cast<int>(code);
  std::strncpy(result->message, message.c_str(), sizeof(result->message) - 1);
  result->message[sizeof(result->message) - 1] = '\0';
  std::strncpy(result->hint, hint.c_str(), sizeof(result->hint) - 1);
  result->hint[sizeof(result->hint) - 1] = '\0';
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int verl_trainer_run(const char* request_json,
                                                            VerlTrainerResult* result) {
  fill(result, verl::ExitCode::kOk, "", "");
  try {
    const auto request = nlohmann::json::parse(request_json ? request_json : "");
    if (!request.is_object() || !request.contains("config") || !request["config"].is_object()) {
      throw verl::Error{verl::ExitCode::kUsage, "trainer request has no \"config\" object",
                        "this is a bug in the caller of verl_trainer_run"};
    }
    if (request.contains("log_level") && request["log_level"].is_string()) {
      verl::log::set_level(verl::log::parse_level(request["log_level"].get<std::string>()));
    }
    const bool sft = request.value("sft", false);
    verl::trainer::run_trainer(request["config"], sft);
  } catch (const verl::Error& e) {
    fill(result, e.code(), e.what(), e.hint());
  } catch (const nlohmann::json::exception& e) {
    fill(result, verl::ExitCode::kUsage, std::string("trainer request is not valid JSON: ") + e.what(), "");
  } catch (const c10::Error& e) {
    fill(result, verl::ExitCode::kFailure, std::string("libtorch: ") + e.what_without_backtrace(),
         "run with --log-level debug for details");
  } catch (const std::exception& e) {
    fill(result, verl::ExitCode::kFailure, e.what(), "");
  } catch (...) {
    fill(result, verl::ExitCode::kFailure, "unknown exception in the trainer", "");
  }
  return result ? result->exit_code : 1;
}

__attribute__((visibility("default"))) const char* verl_trainer_info() {
  static const std::string info = [] {
    nlohmann::json j;
    j["abi"] = VERL_TRAINER_ABI_VERSION;
    j["torch"] = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                 std::to_string(TORCH_VERSION_PATCH);
    bool cuda = false;
    try {
      cuda = torch::cuda::is_available();
    } catch (...) {
    }
    j["cuda"] = cuda;
#if defined(USE_C10D_NCCL)
    j["nccl"] = cuda;
#else
    j["nccl"] = false;
#endif
    j["gloo"] = true;  // both libtorch builds we target ship Gloo
    return j.dump();
  }();
  return info.c_str();
}

}  // extern "C"
