// The head's typed request parsers (launcher/head_requests.h), each case an input the fuzzer
// (tests/fuzz/head_requests_fuzz.cc) or a review turned up.
#include "launcher/head_requests.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace rq = verl::launcher::requests;

namespace {

rq::Json body(const std::string& text) { return rq::parse_body(text); }

// The message of the invalid_argument fn throws; "" when it throws nothing.
template <typename Fn>
std::string refusal(Fn fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(HeadRequests, EmptyBodyIsAnEmptyObjectAndDeepNestingIsRefusedBeforeParsing) {
  EXPECT_EQ(body(""), rq::Json::object());
  EXPECT_NE(refusal([] { body(std::string(100000, '[')); }).find("nested deeper than 64"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_EQ(body("{\"a\": \"" + std::string(1000, '[') + "\"}")["a"].get<std::string>().size(), 1000u);
}

TEST(HeadRequests, ANumberPastADoubleIsNlohmannsOutOfRangeWhichTheHeadAnswers400) {
  // Found by tests/fuzz/head_requests_fuzz.cc: not a parse_error but out_of_range.406; the head's
  // exception handler answers every nlohmann exception with 400 "bad request body".
  EXPECT_THROW(body(R"({"grace_s": 1e999})"), nlohmann::json::out_of_range);
  EXPECT_THROW(body("{\"a\": 1"), nlohmann::json::parse_error);
}

TEST(HeadRequests, ANumberThatDoesNotFitItsFieldIsRefusedNotConverted) {
  // nlohmann's get<int>() of 1e300 was a float-to-int overflow (UBSan) in the logs, results and
  // register handlers; 2^40 as a rank wrapped.
  EXPECT_NE(refusal([] { rq::parse_logs(body(R"({"rank": 1e300})")); }).find("'rank' must be an integer within 0..2147483647"),
            std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_logs(body(R"({"rank": 1099511627776})")); }), "");
  EXPECT_NE(refusal([] { rq::parse_logs(body(R"({"rank": -1})")); }), "");
  EXPECT_NE(refusal([] { rq::parse_logs(body(R"({"rank": 0, "attempt": 2.5})")); }).find("'attempt'"), std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_result(body(R"({"rank": 1e300})")); }), "");
  EXPECT_NE(refusal([] { rq::parse_register(body(R"({"name": "n", "resources": {"cpus": 1e300, "memory_bytes": 1, "gpus": 0}})")); })
                .find("'cpus'"),
            std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_register(body(R"({"name": "n", "pid": 18446744073709551615})")); }).find("'pid'"),
            std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_heartbeat(body(R"({"tasks": [{"task": "job-1.0.0", "signal": 1e300}]})")); })
                .find("'signal'"),
            std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_heartbeat(body(R"({"tasks": [{"task": "job-1.0.0", "exit_code": 4294967296}]})")); }),
            "");
}

TEST(HeadRequests, AFieldOfTheWrongTypeIsRefusedNamingIt) {
  EXPECT_NE(refusal([] { rq::parse_heartbeat(body(R"({"tasks": [7]})")); }).find("tasks[]"), std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_heartbeat(body(R"({"tasks": {}})")); }).find("'tasks' must be an array"),
            std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_logs(body(R"({"rank": 0, "chunks": [{"data": 5}]})")); }).find("'data'"),
            std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_metrics_rows(body(R"({"rows": [1]})")); }).find("rows[]"), std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_stop_grace(body(R"({"grace_s": "10"})")); }).find("0..3600"), std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_stop_grace(body(R"({"grace_s": 3601})")); }), "");
  EXPECT_NE(refusal([] { rq::parse_register(body(R"({"name": ""})")); }).find("'name'"), std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_leave_reason(body("[1]")); }).find("JSON object"), std::string::npos);
  EXPECT_NE(refusal([] { rq::parse_logs(body("{}")); }).find("'rank' is required"), std::string::npos);
}

TEST(HeadRequests, WhatAgentsSendReadsBack) {
  const auto r = rq::parse_register(body(
      R"({"name": "node-0", "host": "h", "pid": 12, "resources": {"cpus": 8, "memory_bytes": 1024, "gpus": 1,
          "gpu_names": ["H200"], "ib_ports": [{"device": "mlx5_0", "port": 1}]}})"));
  EXPECT_EQ(r.name, "node-0");
  EXPECT_EQ(r.pid, 12);
  EXPECT_EQ(r.resources.cpus, 8);
  EXPECT_EQ(r.resources.ib_ports.at(0).device, "mlx5_0");
  const auto h = rq::parse_heartbeat(body(
      R"({"gpus": [{"index": 0}], "work_dir": "/w", "tasks": [{"task": "job-1.0.0", "state": "exited", "exit_code": -1},
          {"task": "job-2.0.0", "state": "exited", "signal": 9}]})"));
  ASSERT_TRUE(h.gpus.has_value());
  EXPECT_EQ(h.work_dir, "/w");
  ASSERT_EQ(h.tasks.size(), 2u);
  EXPECT_EQ(h.tasks[0].exit_code, -1);
  EXPECT_FALSE(h.tasks[1].exit_code.has_value());
  const auto j = rq::to_json(h.tasks);
  EXPECT_EQ(j[1]["signal"], 9);
  EXPECT_FALSE(j[1].contains("exit_code"));  // the controller reads an exit code only when sent
  // A job preflight's end carries its report (or its stderr's end): the controller needs both.
  const auto p = rq::parse_heartbeat(body(
      R"({"tasks": [{"task": "job-3/preflight/0", "state": "exited", "exit_code": 0, "result": {"ok": true}},
          {"task": "job-4/preflight/0", "state": "exited", "exit_code": 2, "output": "no such file"}]})"));
  const auto pj = rq::to_json(p.tasks);
  EXPECT_EQ(pj[0]["result"]["ok"], true);
  EXPECT_EQ(pj[1]["output"], "no such file");
  EXPECT_FALSE(pj[1].contains("result"));
  EXPECT_EQ(rq::parse_stop_grace(body("{}")), 10.0);
  EXPECT_EQ(rq::parse_stop_grace(body(R"({"grace_s": 0.5})")), 0.5);
  EXPECT_EQ(rq::parse_leave_reason(body("{}")), "agent left");
  const auto l = rq::parse_logs(body(R"({"rank": 3, "attempt": 1, "host": "h",
      "chunks": [{"stream": "stderr", "offset": 7, "data": "x\n", "eof": true}, {}]})"));
  EXPECT_EQ(l.rank, 3);
  ASSERT_EQ(l.chunks.size(), 2u);
  EXPECT_EQ(l.chunks[0].offset, 7);
  EXPECT_TRUE(l.chunks[0].eof);
  EXPECT_EQ(l.chunks[1].stream, "stdout");
  EXPECT_EQ(rq::parse_result(body(R"({"rank": 0})")).result, nullptr);
  EXPECT_EQ(rq::parse_metrics_rows(body("{}")), rq::Json::array());
}
