#include "common/job_config_view.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"

namespace verl {
namespace {

using config::Json;

Json job(const std::vector<std::string>& overrides) { return config::load_job("", overrides); }

TEST(JobConfigView, ReadsTheShapeOfTheDefaultJob) {
  const Json config = config::default_job();
  const JobConfigView view(config);
  EXPECT_EQ(view.nnodes(), 1);
  EXPECT_EQ(view.n_gpus_per_node(), 1);
  EXPECT_EQ(view.world_size(), 1);
  EXPECT_EQ(view.max_restarts(), 0);
  EXPECT_GT(view.total_training_steps(), 0);  // the built-in model's preset sets it
  EXPECT_EQ(view.save_freq(), -1);
  EXPECT_FALSE(view.default_local_dir().empty());
  EXPECT_EQ(view.metrics_path(), view.default_local_dir() + "/metrics.jsonl");
}

TEST(JobConfigView, ReadsOverriddenKeys) {
  const Json config = job({"trainer.nnodes=2", "trainer.n_gpus_per_node=1", "trainer.max_restarts=3",
                           "trainer.total_training_steps=20", "trainer.save_freq=5",
                           "trainer.default_local_dir=/ckpt/run1"});
  const JobConfigView view(config);
  EXPECT_EQ(view.nnodes(), 2);
  EXPECT_EQ(view.n_gpus_per_node(), 1);
  EXPECT_EQ(view.world_size(), 2);
  EXPECT_EQ(view.max_restarts(), 3);
  EXPECT_EQ(view.total_training_steps(), 20);
  EXPECT_EQ(view.save_freq(), 5);
  EXPECT_EQ(view.default_local_dir(), "/ckpt/run1");
  EXPECT_EQ(view.metrics_path(), "/ckpt/run1/metrics.jsonl");
}

TEST(JobConfigView, MetricsFileWinsOverTheCheckpointDirectory) {
  const Json config = job({"trainer.metrics_file=/tmp/m.jsonl"});
  EXPECT_EQ(JobConfigView(config).metrics_path(), "/tmp/m.jsonl");
}

TEST(JobConfigView, MissingShapeNamesTheKey) {
  const Json config = Json{{"trainer", {{"nnodes", 2}}}};
  const JobConfigView view(config);
  EXPECT_EQ(view.nnodes(), 2);
  try {
    view.n_gpus_per_node();
    FAIL() << "expected verl::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(job_keys::kNGpusPerNode), std::string::npos) << e.what();
  }
  // The optional facts fall back to what the trainer does without them.
  EXPECT_EQ(view.max_restarts(), 0);
  EXPECT_EQ(view.total_training_steps(), 0);
  EXPECT_EQ(view.save_freq(), 0);
  EXPECT_EQ(view.default_local_dir(), "");
}

TEST(JobConfigView, NullTotalStepsIsZeroForTheTrainerToWorkOut) {
  const Json config = job({"trainer.total_training_steps=null"});
  EXPECT_EQ(JobConfigView(config).total_training_steps(), 0);
}

TEST(JobConfigView, RestartResumesFromTheLatestCheckpoint) {
  Json config = job({"trainer.resume_mode=disable"});
  set_resume_from_latest_checkpoint(config);
  const Json* mode = config::find(config, job_keys::kResumeMode);
  ASSERT_NE(mode, nullptr);
  EXPECT_EQ(*mode, "auto");
}

TEST(JobConfigView, WithoutRunNamesKeepsTheShapeOnly) {
  const Json a = job({"trainer.nnodes=1", "trainer.experiment_name=a", "trainer.default_local_dir=/a"});
  const Json b = job({"trainer.nnodes=2", "trainer.experiment_name=b", "trainer.default_local_dir=/b"});
  EXPECT_NE(a, b);
  EXPECT_EQ(without_run_names(a), without_run_names(b));
  const Json other_steps = job({"trainer.total_training_steps=7"});
  EXPECT_NE(without_run_names(a), without_run_names(other_steps));
}

TEST(MetricNames, StepAndValidationListsHoldTheNamesTheLauncherReads) {
  const auto& step = metric_names::ppo_step();
  for (const char* name : {metric_names::kScore, metric_names::kStepSeconds, metric_names::kThroughput})
    EXPECT_NE(std::find(step.begin(), step.end(), name), step.end()) << name;
  const auto& val = metric_names::validation();
  EXPECT_NE(std::find(val.begin(), val.end(), metric_names::kValScore), val.end());
}

}  // namespace
}  // namespace verl
