// GET /metrics text from API-shaped JSON: the exact exposition for a small cluster, escaping,
// and what is left out when it is absent.
#include "launcher/prometheus.h"

#include <gtest/gtest.h>

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

TEST(Prometheus, ExactTextForANodeWithAGpuAndARunningJob) {
  const Json cluster = Json::parse(R"({"name":"ci","backend":"local","head":{"uptime_s":12.5}})");
  const Json nodes = Json::parse(R"([
    {"name":"node-0","host":"h0","state":"alive","heartbeat_age_s":0.25,
     "resources":{"cpus":2,"memory_bytes":1073741824,"gpus":1},
     "gpu_samples":[{"time_ms":1,"gpus":[{"index":0,"util_pct":10,"mem_used_mib":1,"mem_total_mib":2}]},
                    {"time_ms":2,"gpus":[{"index":0,"util_pct":97,"mem_used_mib":512,"mem_total_mib":1024}]}]},
    {"name":"node-1","host":"h1","state":"lost","heartbeat_age_s":30,"resources":{"cpus":4,"memory_bytes":2,"gpus":0}}
  ])");
  const Json jobs = Json::parse(R"([
    {"id":"job-2","kind":"train","state":"RUNNING","step":7,"total_steps":20,"world_size":2,"restarts":0,
     "latest_metrics":{"step":7,"critic/score/mean":0.5,"perf/throughput":1234.5,"timing_s/step":0.1,
                       "val/score/mean":0.75,"actor/pg_loss":-0.0125,"_received_ms":99,"note":"x"}}
  ])");
  const std::string expected =
      "# HELP verl_cluster_info The cluster this head serves (always 1).\n"
      "# TYPE verl_cluster_info gauge\n"
      "verl_cluster_info{cluster=\"ci\",backend=\"local\"} 1\n"
      "# HELP verl_head_uptime_seconds Seconds since the head started.\n"
      "# TYPE verl_head_uptime_seconds gauge\n"
      "verl_head_uptime_seconds 12.5\n"
      "# HELP verl_node_state 1 for the node's state (alive, lost, left), 0 for the others.\n"
      "# TYPE verl_node_state gauge\n"
      "verl_node_state{node=\"node-0\",host=\"h0\",state=\"alive\"} 1\n"
      "verl_node_state{node=\"node-0\",host=\"h0\",state=\"lost\"} 0\n"
      "verl_node_state{node=\"node-0\",host=\"h0\",state=\"left\"} 0\n"
      "verl_node_state{node=\"node-1\",host=\"h1\",state=\"alive\"} 0\n"
      "verl_node_state{node=\"node-1\",host=\"h1\",state=\"lost\"} 1\n"
      "verl_node_state{node=\"node-1\",host=\"h1\",state=\"left\"} 0\n"
      "# HELP verl_node_heartbeat_age_seconds Seconds since the node's last heartbeat.\n"
      "# TYPE verl_node_heartbeat_age_seconds gauge\n"
      "verl_node_heartbeat_age_seconds{node=\"node-0\",host=\"h0\"} 0.25\n"
      "verl_node_heartbeat_age_seconds{node=\"node-1\",host=\"h1\"} 30\n"
      "# HELP verl_node_cpus CPUs the node's agent may use.\n"
      "# TYPE verl_node_cpus gauge\n"
      "verl_node_cpus{node=\"node-0\",host=\"h0\"} 2\n"
      "verl_node_cpus{node=\"node-1\",host=\"h1\"} 4\n"
      "# HELP verl_node_memory_bytes The node's memory.\n"
      "# TYPE verl_node_memory_bytes gauge\n"
      "verl_node_memory_bytes{node=\"node-0\",host=\"h0\"} 1073741824\n"
      "verl_node_memory_bytes{node=\"node-1\",host=\"h1\"} 2\n"
      "# HELP verl_node_gpus GPUs on the node.\n"
      "# TYPE verl_node_gpus gauge\n"
      "verl_node_gpus{node=\"node-0\",host=\"h0\"} 1\n"
      "verl_node_gpus{node=\"node-1\",host=\"h1\"} 0\n"
      "# HELP verl_node_gpu_utilization_percent GPU utilisation in the last sample (nvidia-smi).\n"
      "# TYPE verl_node_gpu_utilization_percent gauge\n"
      "verl_node_gpu_utilization_percent{node=\"node-0\",host=\"h0\",gpu=\"0\"} 97\n"
      "# HELP verl_node_gpu_memory_used_bytes GPU memory in use in the last sample.\n"
      "# TYPE verl_node_gpu_memory_used_bytes gauge\n"
      "verl_node_gpu_memory_used_bytes{node=\"node-0\",host=\"h0\",gpu=\"0\"} 536870912\n"
      "# HELP verl_node_gpu_memory_total_bytes GPU memory in total.\n"
      "# TYPE verl_node_gpu_memory_total_bytes gauge\n"
      "verl_node_gpu_memory_total_bytes{node=\"node-0\",host=\"h0\",gpu=\"0\"} 1073741824\n"
      "# HELP verl_job_state 1 for the job's state, 0 for the other states.\n"
      "# TYPE verl_job_state gauge\n"
      "verl_job_state{job=\"job-2\",kind=\"train\",state=\"PENDING\"} 0\n"
      "verl_job_state{job=\"job-2\",kind=\"train\",state=\"RUNNING\"} 1\n"
      "verl_job_state{job=\"job-2\",kind=\"train\",state=\"SUCCEEDED\"} 0\n"
      "verl_job_state{job=\"job-2\",kind=\"train\",state=\"FAILED\"} 0\n"
      "verl_job_state{job=\"job-2\",kind=\"train\",state=\"STOPPED\"} 0\n"
      "# HELP verl_job_step The job's latest training step.\n"
      "# TYPE verl_job_step gauge\n"
      "verl_job_step{job=\"job-2\",kind=\"train\"} 7\n"
      "# HELP verl_job_total_steps The job's total training steps (0: unknown).\n"
      "# TYPE verl_job_total_steps gauge\n"
      "verl_job_total_steps{job=\"job-2\",kind=\"train\"} 20\n"
      "# HELP verl_job_world_size Ranks the job runs on.\n"
      "# TYPE verl_job_world_size gauge\n"
      "verl_job_world_size{job=\"job-2\",kind=\"train\"} 2\n"
      "# HELP verl_job_restarts Times the job was restarted from a checkpoint.\n"
      "# TYPE verl_job_restarts counter\n"
      "verl_job_restarts{job=\"job-2\",kind=\"train\"} 0\n"
      "# HELP verl_job_score_mean critic/score/mean of the latest step (training rollouts).\n"
      "# TYPE verl_job_score_mean gauge\n"
      "verl_job_score_mean{job=\"job-2\",kind=\"train\"} 0.5\n"
      "# HELP verl_job_val_score_mean val/score/mean of the latest validation.\n"
      "# TYPE verl_job_val_score_mean gauge\n"
      "verl_job_val_score_mean{job=\"job-2\",kind=\"train\"} 0.75\n"
      "# HELP verl_job_throughput_tokens_per_second perf/throughput: tokens per second per rank.\n"
      "# TYPE verl_job_throughput_tokens_per_second gauge\n"
      "verl_job_throughput_tokens_per_second{job=\"job-2\",kind=\"train\"} 1234.5\n"
      "# HELP verl_job_step_seconds timing_s/step: seconds the latest step took.\n"
      "# TYPE verl_job_step_seconds gauge\n"
      "verl_job_step_seconds{job=\"job-2\",kind=\"train\"} 0.1\n"
      "# HELP verl_job_metric Every numeric metric of the job's latest step, by verl name.\n"
      "# TYPE verl_job_metric gauge\n"
      "verl_job_metric{job=\"job-2\",kind=\"train\",metric=\"critic/score/mean\"} 0.5\n"
      "verl_job_metric{job=\"job-2\",kind=\"train\",metric=\"perf/throughput\"} 1234.5\n"
      "verl_job_metric{job=\"job-2\",kind=\"train\",metric=\"timing_s/step\"} 0.1\n"
      "verl_job_metric{job=\"job-2\",kind=\"train\",metric=\"val/score/mean\"} 0.75\n"
      "verl_job_metric{job=\"job-2\",kind=\"train\",metric=\"actor/pg_loss\"} -0.0125\n";
  EXPECT_EQ(prometheus_text(cluster, nodes, jobs), expected);
}

TEST(Prometheus, EscapesLabelValues) {
  EXPECT_EQ(prometheus_escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  const Json nodes = Json::parse(R"([{"name":"we\"ird\\","host":"h\n","state":"alive"}])");
  const std::string text = prometheus_text(Json::object(), nodes, Json::array());
  EXPECT_NE(text.find("verl_node_state{node=\"we\\\"ird\\\\\",host=\"h\\n\",state=\"alive\"} 1\n"), std::string::npos)
      << text;
}

TEST(Prometheus, LeavesOutWhatIsAbsent) {
  // A pending job has no metrics yet; a node without GPUs has no GPU samples; a null (a value
  // nvidia-smi did not report) is not a 0.
  const Json nodes = Json::parse(
      R"([{"name":"n","host":"h","state":"alive","gpus":[{"index":0,"util_pct":null,"mem_used_mib":3,"mem_total_mib":4}]}])");
  const Json jobs = Json::parse(R"([{"id":"job-1","kind":"train","state":"PENDING","step":0,"total_steps":0}])");
  const std::string text = prometheus_text(Json::object(), nodes, jobs);
  EXPECT_EQ(text.find("verl_job_score_mean"), std::string::npos);
  EXPECT_EQ(text.find("verl_job_metric"), std::string::npos);
  EXPECT_EQ(text.find("verl_node_gpu_utilization_percent"), std::string::npos);
  EXPECT_NE(text.find("verl_node_gpu_memory_used_bytes{node=\"n\",host=\"h\",gpu=\"0\"} 3145728\n"), std::string::npos);
  EXPECT_NE(text.find("verl_job_state{job=\"job-1\",kind=\"train\",state=\"PENDING\"} 1\n"), std::string::npos);
  EXPECT_EQ(prometheus_text(Json(), Json(), Json()).find("verl_job_"), std::string::npos);
}

TEST(Prometheus, ValuesReadBackExactly) {
  const Json jobs = Json::parse(R"([{"id":"j","state":"RUNNING","latest_metrics":{"a":0.1,"b":1e-20,"c":123456789012345678}}])");
  const std::string text = prometheus_text(Json::object(), Json::array(), jobs);
  EXPECT_NE(text.find("metric=\"a\"} 0.1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("metric=\"b\"} 1e-20\n"), std::string::npos) << text;
  EXPECT_NE(text.find("metric=\"c\"} 1.2345678901234568e+17\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace verl::launcher
