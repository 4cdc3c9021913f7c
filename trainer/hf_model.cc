#include "trainer/hf_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "trainer/safetensors.h"

namespace verl::trainer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

enum class Family { kQwen2, kQwen3, kLlama, kMistral };

struct FamilyInfo {
  Family family;
  const char* prefix;      // architectures[0] = prefix + "ForCausalLM" (or "ForTokenClassification")
  const char* model_type;  // config.json model_type
  int64_t default_kv_heads;  // transformers' default when the key is absent; 0: num_attention_heads
  int64_t default_max_positions;
};

constexpr FamilyInfo kFamilies[] = {
    {Family::kQwen2, "Qwen2", "qwen2", 32, 32768},
    {Family::kQwen3, "Qwen3", "qwen3", 32, 32768},
    {Family::kLlama, "Llama", "llama", 0, 2048},
    {Family::kMistral, "Mistral", "mistral", 8, 4096 * 32},
};

constexpr const char* kSupported =
    "verlctl supports Qwen2ForCausalLM (Qwen2/Qwen2.5), Qwen3ForCausalLM, LlamaForCausalLM (Llama 2/3.x) and "
    "MistralForCausalLM";

const FamilyInfo& family_info(Family f) {
  for (const auto& i : kFamilies) {
    if (i.family == f) return i;
  }
  return kFamilies[2];
}

std::string config_path(const std::string& dir) { return (fs::path(dir) / "config.json").string(); }

Error config_error(const std::string& file, const std::string& key, const std::string& what, std::string hint = "") {
  return Error{ExitCode::kInvalidConfig, file + ": key '" + key + "' " + what, std::move(hint)};
}

// Typed access to config.json keys, every error naming the file and the key.
class ConfigReader {
 public:
  ConfigReader(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  bool present(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  int64_t integer(const char* key, c10::optional<int64_t> fallback = c10::nullopt) const {
    if (!present(key)) {
      if (fallback) return *fallback;
      throw config_error(file_, key, "is missing", "config.json of a transformers model always has it: is this file complete?");
    }
    const json& v = j_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) throw config_error(file_, key, "is not a non-negative integer: " + v.dump());
    return v.get<int64_t>();
  }
  double number(const char* key, double fallback) const {
    if (!present(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_number()) throw config_error(file_, key, "is not a number: " + v.dump());
    return v.get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!present(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_boolean()) throw config_error(file_, key, "is not true/false: " + v.dump());
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!present(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_string()) throw config_error(file_, key, "is not a string: " + v.dump());
    return v.get<std::string>();
  }

 private:
  const json& j_;
  std::string file_;
};

json parse_config(const std::string& dir) {
  const std::string file = config_path(dir);
  if (!fs::is_regular_file(file)) {
    throw Error{ExitCode::kInvalidConfig, "model directory " + dir + " has no config.json",
                "verlctl reads Hugging Face model directories (config.json + *.safetensors), as save_pretrained "
                "writes them"};
  }
  try {
    json j = json::parse(files::read_file(file));
    if (!j.is_object()) throw Error{ExitCode::kInvalidConfig, file + ": not a JSON object", ""};
    return j;
  } catch (const json::exception& e) {
    throw Error{ExitCode::kInvalidConfig, file + ": not JSON: " + e.what(), "re-download or re-save the model"};
  }
}

// architectures[0] (or model_type when there is none) -> family.
Family parse_family(const json& j, const std::string& file, std::string* architecture) {
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    const std::string arch = j["architectures"][0].get<std::string>();
    for (const auto& f : kFamilies) {
      for (const char* suffix : {"ForCausalLM", "ForTokenClassification"}) {
        if (arch == std::string(f.prefix) + suffix) {
          *architecture = arch;
          return f.family;
        }
      }
    }
    throw config_error(file, "architectures", "is '" + arch + "', which verlctl cannot run", kSupported);
  }
  if (j.contains("model_type") && j["model_type"].is_string()) {
    const std::string type = j["model_type"].get<std::string>();
    for (const auto& f : kFamilies) {
      if (type == f.model_type) {
        *architecture = std::string(f.prefix) + "ForCausalLM";
        return f.family;
      }
    }
    throw config_error(file, "model_type", "is '" + type + "', which verlctl cannot run", kSupported);
  }
  throw config_error(file, "architectures", "is missing (and so is model_type)", kSupported);
}

c10::optional<torch::Dtype> parse_hf_dtype(const std::string& name) {
  if (name == "float32" || name == "float") return torch::kFloat32;
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "float16" || name == "half") return torch::kFloat16;
  return c10::nullopt;
}

const char* hf_dtype_name(torch::Dtype d) {
  if (d == torch::kBFloat16) return "bfloat16";
  if (d == torch::kFloat16) return "float16";
  return "float32";
}

// rope_theta and rope_scaling from either dialect (4.x: top-level rope_theta + rope_scaling;
// 5.x: rope_parameters holding both).
void read_rope(const json& j, const std::string& file, ModelConfig* c) {
  const ConfigReader top(j, file);
  c->rope_theta = top.number("rope_theta", 10000.0);
  const char* key = nullptr;
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    key = "rope_scaling";
  } else if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    key = "rope_parameters";
  }
  if (key == nullptr) return;
  const json& r = j[key];
  if (!r.is_object()) throw config_error(file, key, "is not an object: " + r.dump());
  const std::string prefix = std::string(key) + ".";
  const ConfigReader rr(r, file);
  if (r.contains("rope_theta")) c->rope_theta = rr.number("rope_theta", c->rope_theta);
  std::string type = rr.string("rope_type", rr.string("type", "default"));
  const std::string hint = "verlctl computes rope_type default, linear and llama3 (Llama 3.1+); yarn, dynamic, "
                           "longrope and the rest are not supported";
  const auto need = [&](const char* k) {
    if (!rr.present(k)) throw config_error(file, prefix + k, "is missing for rope_type '" + type + "'", hint);
    return rr.number(k, 0);
  };
  if (type == "default") {
    c->rope_scaling = RopeScaling{};
  } else if (type == "linear") {
    c->rope_scaling.type = RopeScalingType::kLinear;
    c->rope_scaling.factor = need("factor");
  } else if (type == "llama3") {
    c->rope_scaling.type = RopeScalingType::kLlama3;
    c->rope_scaling.factor = need("factor");
    c->rope_scaling.low_freq_factor = need("low_freq_factor");
    c->rope_scaling.high_freq_factor = need("high_freq_factor");
    c->rope_scaling.original_max_position_embeddings = static_cast<int64_t>(need("original_max_position_embeddings"));
    if (c->rope_scaling.high_freq_factor <= c->rope_scaling.low_freq_factor) {
      throw config_error(file, prefix + "high_freq_factor", "must be larger than low_freq_factor", hint);
    }
  } else {
    throw config_error(file, prefix + "rope_type", "is '" + type + "'", hint);
  }
  if (c->rope_scaling.type != RopeScalingType::kNone && c->rope_scaling.factor <= 0) {
    throw config_error(file, prefix + "factor", "must be positive", hint);
  }
}

// A model parameter (or buffer) name a checkpoint may carry that the model does not need.
using Ignorable = std::function<bool(const std::string&)>;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_str(c10::IntArrayRef s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

std::string list_some(const std::vector<std::string>& names) {
  std::string out;
  const size_t shown = std::min<size_t>(names.size(), 5);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += " (and " + std::to_string(names.size() - shown) + " more)";
  return out;
}

// Copies every parameter of module (but those in skip) from the checkpoint, converting device
// and dtype in the copy. Missing tensors, wrong shapes and tensors the module lacks are errors.
void load_into(torch::nn::Module& module, const safetensors::Checkpoint& ckpt, const std::string& arch,
               const std::set<std::string>& skip, const Ignorable& ignorable) {
  torch::NoGradGuard no_grad;
  const auto params = module.named_parameters(/*recurse=*/true);
  std::vector<std::string> missing;
  std::set<std::string> wanted;
  for (const auto& p : params) {
    wanted.insert(p.key());
    if (skip.count(p.key()) == 0 && !ckpt.contains(p.key())) missing.push_back(p.key());
  }
  const std::string hint = "do config.json and the weights come from the same model? The " + arch +
                           " model verlctl builds from config.json needs exactly the tensors transformers' "
                           "does";
  if (!missing.empty()) {
    throw Error{ExitCode::kInvalidConfig,
                ckpt.description() + ": no tensor '" + missing[0] + "'" +
                    (missing.size() > 1 ? " (missing: " + list_some(missing) + ")" : ""),
                hint};
  }
  std::vector<std::string> unexpected;
  for (const auto& name : ckpt.names()) {
    if (wanted.count(name) == 0 && !ignorable(name)) unexpected.push_back(name);
  }
  if (!unexpected.empty()) {
    throw Error{ExitCode::kInvalidConfig,
                ckpt.file_of(unexpected[0]) + ": tensor '" + unexpected[0] + "' has no place in the " + arch +
                    " model" + (unexpected.size() > 1 ? " (unexpected: " + list_some(unexpected) + ")" : ""),
                hint};
  }
  for (const auto& p : params) {
    if (skip.count(p.key()) != 0) continue;
    const auto& info = ckpt.info(p.key());
    if (!p.value().sizes().equals(info.shape)) {
      throw Error{ExitCode::kInvalidConfig,
                  ckpt.file_of(p.key()) + ": tensor '" + p.key() + "' has shape " + shape_str(info.shape) +
                      " but config.json makes it " + shape_str(p.value().sizes()),
                  hint};
    }
    p.value().copy_(ckpt.view(p.key()));
  }
}

bool is_rotary_buffer(const std::string& name) { return ends_with(name, "rotary_emb.inv_freq"); }

torch::Dtype checked_compute_dtype(torch::Dtype d) {
  if (d != torch::kFloat32 && d != torch::kBFloat16) {
    throw Error{ExitCode::kInvalidConfig, std::string("model compute dtype ") + c10::toString(d) + " is not supported",
                "choose float32 or bfloat16"};
  }
  return d;
}

}  // namespace


ModelConfig read_hf_config(const std::string& dir) {
  const json j = parse_config(dir);
  const std::string file = config_path(dir);
  const ConfigReader r(j, file);
  ModelConfig c;
  const Family family = parse_family(j, file, &c.hf_architecture);
  const FamilyInfo& info = family_info(family);
  c.hf_config_json = j.dump(2);

  const std::string act = r.string("hidden_act", "silu");
  if (act != "silu") {
    throw config_error(file, "hidden_act", "is '" + act + "'", "verlctl's MLP is SwiGLU: hidden_act must be silu");
  }
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.intermediate_size = r.integer("intermediate_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  if (c.num_attention_heads == 0) throw config_error(file, "num_attention_heads", "is 0");
  // A null num_key_value_heads means "as many as the query heads" in every family.
  const bool kv_key_absent = !j.contains("num_key_value_heads");
  const int64_t kv_default = kv_key_absent && info.default_kv_heads > 0 ? info.default_kv_heads : c.num_attention_heads;
  c.num_key_value_heads = r.integer("num_key_value_heads", kv_default);
  if (c.num_key_value_heads == 0 || c.num_attention_heads % c.num_key_value_heads != 0) {
    throw config_error(file, "num_key_value_heads",
                       "is " + std::to_string(c.num_key_value_heads) + ", which does not divide num_attention_heads " +
                           std::to_string(c.num_attention_heads));
  }
  const int64_t derived_head_dim = c.hidden_size / c.num_attention_heads;
  const bool head_dim_absent = !j.contains("head_dim");
  int64_t head_dim = r.integer("head_dim", family == Family::kQwen3 && head_dim_absent ? 128 : derived_head_dim);
  if (head_dim == 0 || head_dim % 2 != 0) throw config_error(file, "head_dim", "must be a positive even number");
  c.explicit_head_dim = head_dim == derived_head_dim ? 0 : head_dim;
  c.max_position_embeddings = r.integer("max_position_embeddings", info.default_max_positions);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.initializer_range = r.number("initializer_range", 0.02);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  read_rope(j, file, &c);

  switch (family) {
    case Family::kQwen2:
      c.attention_bias = true;  // Qwen2Attention: q/k/v always biased, o never
      c.attention_out_bias = false;
      break;
    case Family::kQwen3:
      c.qk_norm = true;
      c.attention_bias = c.attention_out_bias = r.boolean("attention_bias", false);
      break;
    case Family::kLlama:
      c.attention_bias = c.attention_out_bias = r.boolean("attention_bias", false);
      c.mlp_bias = r.boolean("mlp_bias", false);
      break;
    case Family::kMistral: {
      // transformers defaults an absent sliding_window to 4096; null turns it off.
      const int64_t window = j.contains("sliding_window") ? r.integer("sliding_window", 0) : 4096;
      c.sliding_window = window >= c.max_position_embeddings ? 0 : window;
      break;
    }
  }
  if ((family == Family::kQwen2 || family == Family::kQwen3) && r.boolean("use_sliding_window", false)) {
    const int64_t window = r.integer("sliding_window", 4096);
    const int64_t full_layers = r.integer("max_window_layers", 28);
    if (window < c.max_position_embeddings && full_layers < c.num_hidden_layers) {
      throw config_error(file, "use_sliding_window", "is true",
                         "verlctl runs Qwen2/Qwen3 with full attention in every layer: set use_sliding_window to "
                         "false (the released Qwen2.5/Qwen3 models have it false)");
    }
  }
  return c;
}

torch::Dtype read_hf_dtype(const std::string& dir) {
  const json j = parse_config(dir);
  const ConfigReader r(j, config_path(dir));
  const char* key = r.present("dtype") ? "dtype" : "torch_dtype";
  const std::string name = r.string(key, "float32");
  const auto d = parse_hf_dtype(name);
  if (!d) throw config_error(config_path(dir), key, "is '" + name + "'", "float32, bfloat16 or float16");
  return *d;
}

CausalLm load_causal_lm(const std::string& dir, const torch::Device& device, torch::Dtype param_dtype,
                        c10::optional<torch::Dtype> compute_dtype) {
  const auto start = std::chrono::steady_clock::now();
  ModelConfig config = read_hf_config(dir);
  config.compute_dtype = checked_compute_dtype(compute_dtype.value_or(param_dtype));
  const auto ckpt = safetensors::Checkpoint::open_dir(dir);
  CausalLm model(config, torch::TensorOptions().device(device).dtype(param_dtype));
  const bool tied = config.tie_word_embeddings;
  load_into(*model, ckpt, config.hf_architecture, /*skip=*/{},
            [tied](const std::string& n) { return is_rotary_buffer(n) || (tied && n == "lm_head.weight"); });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::Info() << "model: loaded " << config.hf_architecture << " (" << count_parameters(*model) << " parameters) from "
              << dir << " onto " << device.str() << " in " << secs << " s";
  return model;
}

CriticModel load_critic(const std::string& dir, const torch::Device& device, uint64_t seed, torch::Dtype param_dtype,
                        c10::optional<torch::Dtype> compute_dtype) {
  ModelConfig config = read_hf_config(dir);
  config.compute_dtype = checked_compute_dtype(compute_dtype.value_or(param_dtype));
  const auto ckpt = safetensors::Checkpoint::open_dir(dir);
  const bool saved_head = ckpt.contains("score.weight");
  const auto bias = saved_head && ckpt.contains("score.bias") ? ValueHeadBias::kLearned : ValueHeadBias::kNone;
  CriticModel critic(config, torch::TensorOptions().device(device).dtype(param_dtype), bias);
  std::set<std::string> skip;
  if (!saved_head) skip.insert("score.weight");
  load_into(*critic, ckpt, config.hf_architecture, skip,
            [](const std::string& n) { return is_rotary_buffer(n) || n == "lm_head.weight"; });
  if (!saved_head) {
    // HF's _init_weights for the fresh head of AutoModelForTokenClassification.
    torch::NoGradGuard no_grad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    critic->score->weight.copy_(torch::empty({1, config.hidden_size}).normal_(0.0, config.initializer_range, gen));
  }
  log::Info() << "model: critic backbone loaded from " << dir << (saved_head ? " with its value head" : ", value head fresh");
  return critic;
}

const std::vector<std::string>& hf_tokenizer_files() {
  static const std::vector<std::string> kFiles = {
      "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
      "vocab.json",     "merges.txt",            "tokenizer.model",         "added_tokens.json",
      "chat_template.jinja"};
  return kFiles;
}

std::string hf_architecture_for(const ModelConfig& c) {
  const bool qkv = c.attention_bias, out = c.attention_out_bias;
  const auto can = [&](Family f) {
    switch (f) {
      case Family::kQwen2:
        return qkv && !out && !c.qk_norm && !c.mlp_bias && c.sliding_window == 0;
      case Family::kQwen3:
        return qkv == out && c.qk_norm && !c.mlp_bias && c.sliding_window == 0;
      case Family::kLlama:
        return qkv == out && !c.qk_norm && c.sliding_window == 0;
      case Family::kMistral:
        return !qkv && !out && !c.qk_norm && !c.mlp_bias;
    }
    return false;
  };
  for (const auto& f : kFamilies) {
    if (c.hf_architecture.rfind(f.prefix, 0) == 0 && can(f.family)) return std::string(f.prefix) + "ForCausalLM";
  }
  for (Family f : {Family::kQwen3, Family::kQwen2, Family::kMistral, Family::kLlama}) {
    if (f == Family::kMistral && c.sliding_window == 0) continue;
    if (can(f)) return std::string(family_info(f).prefix) + "ForCausalLM";
  }
  throw Error{ExitCode::kInvalidConfig,
              "no Hugging Face architecture has this model's combination of biases, q/k norms and sliding window",
              kSupported};
}

void save_hf(const CausalLm& model, const std::string& out_dir, const std::string& tokenizer_src_dir,
             const SaveHfOptions& options) {
  const ModelConfig& c = model->config();
  const std::string arch = hf_architecture_for(c);
  Family family = Family::kLlama;
  for (const auto& f : kFamilies) {
    if (arch.rfind(f.prefix, 0) == 0) family = f.family;
  }
  json j = json::object();
  if (!c.hf_config_json.empty()) {
    try {
      j = json::parse(c.hf_config_json);
    } catch (const json::exception&) {
      j = json::object();
    }
  }
  // Rewritten below; a stale copy of any of them would contradict the model.
  for (const char* k : {"rope_parameters", "dtype", "rope_scaling", "rope_theta", "head_dim", "sliding_window",
                        "use_sliding_window", "max_window_layers", "layer_types", "attention_bias", "mlp_bias",
                        "num_labels", "id2label", "label2id"}) {
    j.erase(k);
  }
  j["architectures"] = {arch};
  j["model_type"] = family_info(family).model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim();
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["initializer_range"] = c.initializer_range;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  // Both dialects: 4.x reads rope_theta + rope_scaling, 5.x prefers rope_scaling when set and
  // reads rope_parameters otherwise; they say the same thing.
  const RopeScaling& rs = c.rope_scaling;
  json rope = {{"rope_type", "default"}};
  if (rs.type == RopeScalingType::kLinear) {
    rope = {{"rope_type", "linear"}, {"factor", rs.factor}};
  } else if (rs.type == RopeScalingType::kLlama3) {
    rope = {{"rope_type", "llama3"},
            {"factor", rs.factor},
            {"low_freq_factor", rs.low_freq_factor},
            {"high_freq_factor", rs.high_freq_factor},
            {"original_max_position_embeddings", rs.original_max_position_embeddings}};
  }
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rs.type == RopeScalingType::kNone ? json(nullptr) : rope;
  j["rope_parameters"] = rope;
  j["rope_parameters"]["rope_theta"] = c.rope_theta;
  switch (family) {
    case Family::kQwen2:
      j["use_sliding_window"] = false;
      break;
    case Family::kQwen3:
      j["attention_bias"] = c.attention_bias;
      j["use_sliding_window"] = false;
      break;
    case Family::kLlama:
      j["attention_bias"] = c.attention_bias;
      j["mlp_bias"] = c.mlp_bias;
      break;
    case Family::kMistral:
      j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
      break;
  }
  j["torch_dtype"] = hf_dtype_name(options.dtype);  // 4.x
  j["dtype"] = hf_dtype_name(options.dtype);        // 4.56+ and 5.x
  if (!j.contains("use_cache")) j["use_cache"] = true;

  files::make_dirs(out_dir);
  std::vector<safetensors::NamedTensor> tensors;
  // With LoRA adapters, the merged weights (W + B A alpha / r) under the base names.
  for (const auto& [name, t] : merged_lora_parameters(*model)) tensors.push_back({name, t});
  safetensors::WriteOptions wo;
  wo.max_shard_bytes = options.max_shard_bytes;
  wo.dtype = options.dtype;
  safetensors::write_checkpoint(out_dir, tensors, wo);
  if (!tokenizer_src_dir.empty()) {
    for (const auto& name : hf_tokenizer_files()) {
      const fs::path src = fs::path(tokenizer_src_dir) / name;
      if (fs::is_regular_file(src)) files::write_atomic((fs::path(out_dir) / name).string(), files::read_file(src.string()));
    }
  }
  // config.json last: a directory with a config.json is a complete export.
  files::write_atomic(config_path(out_dir), j.dump(2) + "\n");
  log::Info() << "model: exported " << arch << " (" << hf_dtype_name(options.dtype) << ") to " << out_dir;
}

namespace {
constexpr const char* kPeftPrefix = "base_model.model.";
}  // namespace

void save_peft_adapter(const CausalLm& model, const LoraSpec& spec, const std::string& out_dir,
                       const std::string& base_model) {
  std::vector<safetensors::NamedTensor> tensors;
  for (const auto& p : model->named_parameters(/*recurse=*/true)) {
    const std::string& name = p.key();
    if (name.find(".lora_A.") == std::string::npos && name.find(".lora_B.") == std::string::npos) continue;
    tensors.push_back({kPeftPrefix + name, p.value()});
  }
  if (tensors.empty()) {
    throw Error{ExitCode::kFailure, "save_peft_adapter: the model has no LoRA adapters", "set actor_rollout_ref.model.lora_rank > 0"};
  }
  files::make_dirs(out_dir);
  safetensors::write_file((fs::path(out_dir) / "adapter_model.safetensors").string(), tensors);
  json targets = json::array();
  for (const auto& t : spec.target_modules) targets.push_back(t);
  const json config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model},
      {"r", spec.rank},
      {"lora_alpha", spec.alpha},
      {"lora_dropout", 0.0},
      {"bias", "none"},
      {"target_modules", spec.target_modules.size() == 1 && spec.target_modules[0] == "all-linear" ? json("all-linear") : targets},
      {"exclude_modules", spec.exclude_modules.empty() ? json(nullptr) : json(spec.exclude_modules)},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"modules_to_save", nullptr},
      {"use_rslora", false},
      {"use_dora", false},
  };
  files::write_atomic((fs::path(out_dir) / "adapter_config.json").string(), config.dump(2) + "\n");
  log::Info() << "model: exported the LoRA adapter (r=" << spec.rank << ", " << tensors.size() << " tensors) to " << out_dir;
}

void load_peft_adapter(CausalLm& model, const std::string& dir) {
  const auto file = (fs::path(dir) / "adapter_model.safetensors").string();
  if (!fs::is_regular_file(file)) {
    throw Error{ExitCode::kInvalidConfig, "actor_rollout_ref.model.lora_adapter_path: " + file + " does not exist",
                "point it at a PEFT adapter directory (adapter_config.json + adapter_model.safetensors)"};
  }
  const auto ckpt = safetensors::Checkpoint::open_file(file);
  auto params = model->named_parameters(/*recurse=*/true);
  torch::NoGradGuard no_grad;
  int64_t loaded = 0;
  for (const auto& stored : ckpt.names()) {
    std::string name = stored.rfind(kPeftPrefix, 0) == 0 ? stored.substr(std::string(kPeftPrefix).size()) : stored;
    // PEFT's live names carry the adapter's name (lora_A.default.weight); the saved ones do not.
    for (const char* ab : {".lora_A.default.", ".lora_B.default."}) {
      const auto at = name.find(ab);
      if (at != std::string::npos) name.replace(at, std::string(ab).size(), std::string(ab).substr(0, 8));
    }
    auto* dst = params.find(name);
    if (dst == nullptr) {
      throw Error{ExitCode::kInvalidConfig,
                  "actor_rollout_ref.model.lora_adapter_path: " + file + " holds " + stored +
                      ", which the model's adapters do not have",
                  "the adapter's target_modules and rank must match actor_rollout_ref.model.lora_rank / target_modules"};
    }
    const auto src = ckpt.view(stored);
    if (src.sizes() != dst->sizes()) {
      throw Error{ExitCode::kInvalidConfig,
                  "actor_rollout_ref.model.lora_adapter_path: " + stored + " in " + file + " has shape " +
                      c10::str(src.sizes()) + ", the model's is " + c10::str(dst->sizes()) +
                      " (the adapter's r is not actor_rollout_ref.model.lora_rank?)",
                  "set actor_rollout_ref.model.lora_rank to the adapter's r"};
    }
    dst->copy_(src);
    ++loaded;
  }
  log::Info() << "model: loaded " << loaded << " LoRA tensors from " << file;
}

}  // namespace verl::trainer
