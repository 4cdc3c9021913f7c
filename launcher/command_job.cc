#include "launcher/command_job.h"

#include <cctype>
#include <stdexcept>

#include "common/job_config_view.h"
#include "common/process.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string CommandSpec::display() const { return process::quote_argv(argv); }

void to_json(Json& j, const CommandSpec& c) {
  j = Json{{"argv", c.argv}, {"env", c.env}, {"ranks_per_node", c.ranks_per_node}};
  if (!c.working_dir.empty()) j["working_dir"] = {{"source", c.working_dir}, {"bytes", c.working_dir_bytes}};
}

void from_json(const Json& j, CommandSpec& c) {
  c = CommandSpec{};
  c.argv = j.at("argv").get<std::vector<std::string>>();
  c.env = j.value("env", std::vector<std::string>{});
  c.ranks_per_node = j.value("ranks_per_node", 0);
  if (j.contains("working_dir") && j["working_dir"].is_object()) {
    c.working_dir = j["working_dir"].value("source", std::string());
    c.working_dir_bytes = j["working_dir"].value("bytes", int64_t{0});
  }
}

const std::vector<std::string>& command_job_keys_list() {
  static const std::vector<std::string> keys = {job_keys::kNnodes, job_keys::kNGpusPerNode, job_keys::kMaxRestarts};
  return keys;
}

std::string command_job_keys() {
  std::string out;
  for (const auto& k : command_job_keys_list()) out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::string command_override_problem(const std::string& text) {
  size_t at = 0;
  while (at < text.size() && text[at] == '+') ++at;
  const auto eq = text.find('=');
  const std::string key = text.substr(at, eq == std::string::npos ? std::string::npos : eq - at);
  if (eq == std::string::npos || text[0] == '~')
    return "'" + text + "' is not key=value for a command job (it reads only " + command_job_keys() + ")";
  for (const auto& k : command_job_keys_list())
    if (key == k) return "";
  return "'" + key + "' does nothing for a command job: it reads only " + command_job_keys();
}

std::vector<config::Issue> command_job_issues(const std::vector<config::Issue>& issues) {
  std::vector<config::Issue> out;
  for (const auto& i : issues) {
    if (i.severity != config::Severity::kError) continue;
    for (const auto& k : command_job_keys_list())
      if (i.path == k) out.push_back(i);
  }
  return out;
}

Json command_job_config(const Json& resolved) {
  Json trainer = Json::object();
  for (const auto& k : command_job_keys_list()) {
    const Json* v = config::find(resolved, k);
    trainer[k.substr(std::string("trainer.").size())] = v ? *v : Json();
  }
  return Json{{"trainer", trainer}};
}

std::string env_entry_problem(const std::string& entry) {
  const auto eq = entry.find('=');
  if (eq == std::string::npos) return "'" + entry + "' is not NAME=value";
  const std::string name = entry.substr(0, eq);
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (const char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) return "'" + name + "' (in '" + entry + "') is not a variable name: letters, digits and _, not starting with a digit";
  if (entry.find('\0') != std::string::npos) return "'" + name + "' has a NUL byte in its value";
  return "";
}

std::string base64_encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_decode(const std::string& text) {
  if (text.size() % 4 != 0) throw std::invalid_argument("base64 text of " + std::to_string(text.size()) + " characters (not a multiple of 4)");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      int s = 0;
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
      } else {
        s = sextet(c);
        if (s < 0 || pad > 0) throw std::invalid_argument("base64: bad character at " + std::to_string(i + k));
      }
      v = (v << 6) | static_cast<uint32_t>(s);
    }
    out += static_cast<char>((v >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

}  // namespace verl::launcher
