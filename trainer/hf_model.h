// Hugging Face model directories in and out: config.json + safetensors weights (one file or
// shards with model.safetensors.index.json) + tokenizer files, as transformers' save_pretrained
// writes them and from_pretrained reads them.
//
// Supported architectures (config.json "architectures"[0]; the *ForTokenClassification twin of
// each is read too, for a saved critic):
//   Qwen2ForCausalLM    q/k/v biases; sliding windows refused when use_sliding_window is on
//   Qwen3ForCausalLM    q_norm/k_norm, explicit head_dim (default 128), attention_bias on q/k/v/o
//   LlamaForCausalLM    attention_bias on q/k/v/o, mlp_bias, head_dim, rope_scaling llama3/linear
//   MistralForCausalLM  head_dim, sliding_window (default 4096 when the key is absent, as
//                       transformers; applied in the attention mask; ignored when it is at least
//                       max_position_embeddings, since no sequence can then reach past it)
// Defaults of absent keys are transformers' per architecture (tie_word_embeddings false,
// rope_theta 10000, rms_norm_eps 1e-6, num_key_value_heads: Llama = num_attention_heads,
// Qwen2/Qwen3 32, Mistral 8). hidden_act must be silu. Both config.json dialects are read:
// transformers 4.x (rope_theta + rope_scaling {rope_type|type, ...}, torch_dtype) and 5.x
// (rope_parameters {rope_theta, rope_type, ...}, dtype). Exports write both spellings of each
// (rope_theta + rope_scaling and rope_parameters; torch_dtype and dtype), consistent.
//
// Every failure is a verl::Error with ExitCode::kInvalidConfig naming the file and the key or
// tensor, and a hint saying what is supported. Loading is not thread-safe with respect to the
// module it fills; separate calls on separate modules are.
#pragma once

#include <c10/util/Optional.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "common/model_dir.h"
#include "trainer/model.h"

namespace verl::trainer {

// A model path from a job config to a directory: common/model_dir.h (torch-free, so that the
// job preflight on each node resolves it exactly as the ranks will).
inline std::string resolve_model_dir(const std::string& path, const std::string& key) {
  return model_dir::resolve(path, key);
}

// dir/config.json -> ModelConfig (architecture switches, hf_architecture, hf_config_json; the
// compute dtype left at float32). Throws kInvalidConfig naming the file and key.
ModelConfig read_hf_config(const std::string& dir);

// The dtype config.json declares (torch_dtype / dtype), float32 when absent.
torch::Dtype read_hf_dtype(const std::string& dir);

// A policy from dir: parameters built uninitialised on `device` in `param_dtype`, then every
// tensor copied from the mapped safetensors straight into its parameter (converting dtype on the
// way). compute_dtype defaults to param_dtype. Every parameter must be in the checkpoint with
// its shape; a tensor the model does not have is an error naming it, except rotary inv_freq
// buffers, and lm_head.weight when the embeddings are tied (transformers ignores it too).
CausalLm load_causal_lm(const std::string& dir, const torch::Device& device,
                        torch::Dtype param_dtype = torch::kFloat32,
                        c10::optional<torch::Dtype> compute_dtype = c10::nullopt);

// A critic (verl: AutoModelForTokenClassification, num_labels=1): the backbone from dir, the
// value head `score` [1, hidden] from dir when it has score.weight (a saved critic; score.bias
// too when present), else drawn fresh: Normal(0, initializer_range) from a CPU generator seeded
// with `seed`, like init_weights. lm_head.weight in dir is ignored.
CriticModel load_critic(const std::string& dir, const torch::Device& device, uint64_t seed,
                        torch::Dtype param_dtype = torch::kFloat32,
                        c10::optional<torch::Dtype> compute_dtype = c10::nullopt);

// The tokenizer and generation files save_hf copies when present.
const std::vector<std::string>& hf_tokenizer_files();

struct SaveHfOptions {
  int64_t max_shard_bytes = 5'000'000'000;  // save_pretrained's "5GB"
  torch::Dtype dtype = torch::kFloat32;      // tensors and config.json torch_dtype
};

// Writes a directory AutoModelForCausalLM.from_pretrained loads: config.json (the architecture
// the model was read as, or the one its switches imply for a from-scratch model; keys of the
// source config.json that verlctl does not model are kept), the weights (sharded past
// max_shard_bytes, with the index), and the tokenizer files of tokenizer_src_dir ("" for none).
// Each file is written atomically; out_dir is created. Throws verl::Error (kFailure on I/O).
void save_hf(const CausalLm& model, const std::string& out_dir, const std::string& tokenizer_src_dir,
             const SaveHfOptions& options = {});

// The HF architecture a ModelConfig is exported as: its hf_architecture when that can express
// the config, else Qwen3 (qk_norm), Qwen2 (q/k/v bias only), Mistral (sliding window) or Llama.
std::string hf_architecture_for(const ModelConfig& config);

// A LoRA adapter in PEFT's layout (what PeftModel.from_pretrained loads on top of base_model):
// adapter_config.json (r, lora_alpha, target_modules, ...) and adapter_model.safetensors with
// the adapters' tensors named base_model.model.<name>.lora_{A,B}.weight. Atomic per file.
void save_peft_adapter(const CausalLm& model, const LoraSpec& spec, const std::string& out_dir,
                       const std::string& base_model);
// Copies such an adapter's tensors into the model's adapters (add_lora first). Throws
// kInvalidConfig naming the file and tensor for a tensor the model lacks or a shape mismatch.
void load_peft_adapter(CausalLm& model, const std::string& dir);

}  // namespace verl::trainer
