// libFuzzer target for text/hf_tokenizer: loading tokenizer.json (+ tokenizer_config.json) and
// encoding/decoding with what loaded. Input: tokenizer.json, then tokenizer_config.json, then the
// text to encode, NUL-separated. A file it cannot use is a verl::Error (or nlohmann's parse
// error, which load_hf_tokenizer turns into one); a tokenizer that loads must encode any text
// without crashing and decode its own ids.
#include <string>

#include "common/error.h"
#include "tests/fuzz/fuzz_input.h"
#include "text/bpe.h"
#include "text/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = verl::fuzz::split_input(data, size, 3);
  std::unique_ptr<verl::text::HfTokenizer> tok;
  try {
    verl::text::hf::BpeTables tables;
    const nlohmann::json tj = verl::text::hf::parse_tokenizer_json(parts[0], tables);
    nlohmann::json config = nlohmann::json::parse(parts.size() > 1 ? parts[1] : "", nullptr, false);
    if (!config.is_object()) config = nlohmann::json::object();
    tok = std::make_unique<verl::text::HfTokenizer>(tj, std::move(tables), config, nullptr);
  } catch (const verl::Error&) {
    return 0;
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  const std::string text = parts.size() > 2 ? parts[2] : "Hello, world! 12345 ünïcödé 漢字\n\tx";
  try {
    const auto ids = tok->encode(text);
    for (const auto id : ids) VERL_FUZZ_CHECK(id >= 0 && id < tok->vocab_size());
    (void)tok->decode(ids, false);
    (void)tok->decode(ids, true);
  } catch (const verl::Error&) {
    // invalid UTF-8 in the text is an error naming its offset (hf_tokenizer.h)
  }
  return 0;
}
