// The small decoder the trainer's unit tests build: hidden 32, SwiGLU 48, two layers, four
// attention heads over two KV heads (GQA) — every part of a real block, milliseconds to run.
// Tests set what they test on top (vocabulary, biases, tied head, dtype).
#pragma once

#include <cstdint>

#include "trainer/model.h"

namespace verl::testing {

inline trainer::ModelConfig tiny_model_config(int64_t vocab) {
  trainer::ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  return c;
}

}  // namespace verl::testing
