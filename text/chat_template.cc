#include "text/chat_template.h"

#include <ctime>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common/error.h"
#include "text/jinja.h"
#include "text/jinja_internal.h"

namespace verl::text {

namespace {

using jinja::Value;

// The parsed templates of the last few sources: a trainer renders one template for every sample.
std::shared_ptr<const jinja::Template> parsed(const std::string& source) {
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<const jinja::Template>>> cache;  // most recent first
  constexpr size_t kCacheSize = 8;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (it->first == source) {
        cache.splice(cache.begin(), cache, it);
        return it->second;
      }
    }
  }
  auto t = std::make_shared<const jinja::Template>(source, jinja::Options{}, "chat template");
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace_front(source, t);
  if (cache.size() > kCacheSize) cache.pop_back();
  return t;
}

Value raise_exception(const jinja::Args& a) {
  jinja::internal::Failure f;
  f.message = a.positional.empty() ? std::string("raise_exception() called") : a.positional[0].to_string();
  f.raised = true;
  throw f;
}

// transformers: datetime.now().strftime(format), in the local time zone.
Value strftime_now(const jinja::Args& a) {
  if (a.positional.size() != 1 || !a.positional[0].is_string())
    jinja::internal::throw_failure("strftime_now() takes one format string");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[256];
  size_t n = std::strftime(buf, sizeof buf, a.positional[0].as_string().c_str(), &local);
  return Value(std::string(buf, n));
}

}  // namespace

namespace {

template <typename Json>
std::string render(const std::string& source, const Json& messages, bool add_generation_prompt,
                   const Json& extra_context) {
  if (!extra_context.is_null() && !extra_context.is_object())
    throw Error(ExitCode::kInvalidConfig, "chat template: the extra context must be a JSON object, got " +
                                              std::string(extra_context.type_name()));
  std::map<std::string, Value> globals;
  if (extra_context.is_object())
    for (auto it = extra_context.begin(); it != extra_context.end(); ++it) globals[it.key()] = Value::from_json(it.value());
  globals["messages"] = Value::from_json(messages);
  globals["add_generation_prompt"] = Value(add_generation_prompt);
  globals["raise_exception"] = Value::function(raise_exception);
  globals["strftime_now"] = Value::function(strftime_now);
  return parsed(source)->render(globals);
}

}  // namespace

std::string render_chat_template(const std::string& source, const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra_context) {
  return render(source, messages, add_generation_prompt, extra_context);
}

std::string render_chat_template_ordered(const std::string& source, const nlohmann::ordered_json& messages,
                                         bool add_generation_prompt, const nlohmann::ordered_json& extra_context) {
  return render(source, messages, add_generation_prompt, extra_context);
}

}  // namespace verl::text
