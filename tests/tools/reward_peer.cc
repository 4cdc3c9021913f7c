// verl_reward_peer: scores JSON lines with trainer/rewards and trainer/val_metrics for the peer
// test against verl's own Python (tests/integration/reward_peer_test.sh). A test tool, not a
// verlctl command. Reads stdin, one request per line, writes one JSON line per request:
//   {"op": "score", "data_source": ..., "response": ..., "ground_truth": ...}
//       -> {"score": x, "extra": {...}, "pred": "..."}   (extra and pred for dict rewards)
//   {"op": "val_metrics", "seed": 42, "samples": [{"data_source", "uid", "vars": [[name, x]...],
//    "pred"?}...]}
//       -> {"val-core/...": x, "val-aux/...": y, ...}
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "trainer/rewards.h"
#include "trainer/val_metrics.h"

namespace {

using nlohmann::json;
namespace rewards = verl::trainer::rewards;
namespace vm = verl::trainer::val_metrics;

json score(const json& req) {
  json out;
  try {
    const auto s = rewards::score(req.at("data_source").get<std::string>(), req.at("response").get<std::string>(),
                                  req.at("ground_truth"));
    out["score"] = s.score;
    if (!s.extra.empty()) out["extra"] = s.extra;
    if (s.pred) out["pred"] = *s.pred;
  } catch (const verl::Error& e) {
    out["error"] = "unsupported";
  }
  return out;
}

json val_metrics(const json& req) {
  std::vector<vm::Sample> samples;
  for (const auto& j : req.at("samples")) {
    vm::Sample s;
    s.data_source = j.at("data_source").get<std::string>();
    s.uid = j.at("uid").get<std::string>();
    for (const auto& v : j.at("vars")) s.vars.emplace_back(v.at(0).get<std::string>(), v.at(1).get<double>());
    if (j.contains("pred")) s.pred = j["pred"].get<std::string>();
    samples.push_back(std::move(s));
  }
  const auto seed = req.value("seed", 42u);
  return json(vm::metric_dict(vm::process_validation_metrics(samples, seed)));
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    const json req = json::parse(line);
    const std::string op = req.at("op").get<std::string>();
    const json out = op == "score" ? score(req) : val_metrics(req);
    std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  }
  return 0;
}
