// The job store on real SQLite: ids never reused, events, placements, logs by byte offset (a
// resend adds nothing, a partial line is kept until its end), metrics replaced by step, and
// everything still there when the store is opened again (a head restarted after kill -9).
#include "launcher/job_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

JobRecord train_job() {
  JobRecord j;
  j.kind = JobKind::kTrain;
  j.config = {{"trainer", {{"nnodes", 2}}}};
  j.nnodes = 2;
  j.n_gpus_per_node = 1;
  j.world_size = 2;
  j.total_steps = 5;
  return j;
}

std::vector<std::string> texts(const std::vector<LogLine>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines) out.push_back(l.text);
  return out;
}

class TempDb : public ::testing::Test {
 protected:
  std::string db() const { return (dir_ / "state.db").string(); }
  testing::TempDir dir_{"job_store"};
};

TEST(JobStore, IdsCountUpAndJobsListNewestFirst) {
  JobStore s(":memory:");
  const auto a = s.create(train_job(), 1000);
  const auto b = s.create(train_job(), 2000);
  EXPECT_EQ(a.name(), "job-1");
  EXPECT_EQ(b.name(), "job-2");
  const auto all = s.jobs();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, b.id);
  EXPECT_EQ(all[0].state, JobState::kPending);
  EXPECT_EQ(all[1].config["trainer"]["nnodes"], 2);
}

TEST(JobStore, StateChangesAreEventsWithTimes) {
  JobStore s(":memory:");
  auto j = s.create(train_job(), 1000);
  j.state = JobState::kRunning;
  s.update(j, 1500, "placed on node-0, node-1");
  j.restarts = 1;
  s.update(j, 1600);  // no state change: no event
  s.add_event(j.id, "RESTARTING", 1700, "attempt 2 of 2");
  j.state = JobState::kFailed;
  s.update(j, 2000, "rank 1 killed");
  const auto ev = s.events(j.id);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].state, "PENDING");
  EXPECT_EQ(ev[1].state, "RUNNING");
  EXPECT_EQ(ev[1].time_ms, 1500);
  EXPECT_EQ(ev[1].detail, "placed on node-0, node-1");
  EXPECT_EQ(ev[2].state, "RESTARTING");
  EXPECT_EQ(ev[3].state, "FAILED");
  const auto back = s.job(j.id);
  EXPECT_EQ(back->started_ms, 1500);
  EXPECT_EQ(back->ended_ms, 2000);
  EXPECT_EQ(back->restarts, 1);
}

TEST(JobStore, ResentLogChunkAddsNothing) {
  JobStore s(":memory:");
  const auto j = s.create(train_job(), 1000);
  EXPECT_EQ(s.append_log(j.id, 0, 0, "h0", "stderr", 0, "one\ntwo\n", false), 2);
  EXPECT_EQ(s.append_log(j.id, 0, 0, "h0", "stderr", 0, "one\ntwo\n", false), 0);  // the same POST again
  // Overlapping: the first 4 bytes were seen, only "three" is new.
  EXPECT_EQ(s.append_log(j.id, 0, 0, "h0", "stderr", 4, "two\nthree\n", false), 1);
  EXPECT_EQ(texts(s.log_lines(j.id, -1, 0, 100)), (std::vector<std::string>{"one", "two", "three"}));
}

TEST(JobStore, LastSeqIsTheNewestLineOfTheJob) {
  JobStore s(":memory:");
  const auto a = s.create(train_job(), 1000);
  const auto b = s.create(train_job(), 1000);
  EXPECT_EQ(s.last_seq(a.id), 0);
  s.append_log(a.id, 0, 0, "h0", "stderr", 0, "one\ntwo\n", false);
  s.append_log(b.id, 0, 0, "h0", "stderr", 0, "other\n", false);
  const auto lines = s.log_lines(a.id, -1, 0, 100);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(s.last_seq(a.id), lines.back().seq);
  EXPECT_TRUE(s.log_lines(a.id, -1, s.last_seq(a.id), 100).empty()) << "nothing after the tail's end";
}

TEST(JobStore, PartialLineIsKeptUntilItEndsOrTheStreamEnds) {
  JobStore s(":memory:");
  const auto j = s.create(train_job(), 1000);
  s.append_log(j.id, 0, 1, "h1", "stdout", 0, "step 1 lo", false);
  EXPECT_TRUE(s.log_lines(j.id, -1, 0, 100).empty()) << "half a line is not a line yet";
  s.append_log(j.id, 0, 1, "h1", "stdout", 9, "ss 0.5\nstep 2 lo", false);
  EXPECT_EQ(texts(s.log_lines(j.id, 1, 0, 100)), (std::vector<std::string>{"step 1 loss 0.5"}));
  // The rank died mid-line: the stream's end keeps the tail.
  s.append_log(j.id, 0, 1, "h1", "stdout", 25, "", true);
  EXPECT_EQ(texts(s.log_lines(j.id, 1, 0, 100)), (std::vector<std::string>{"step 1 loss 0.5", "step 2 lo"}));
}

TEST(JobStore, FlushPartialsEndsEveryStreamOfAJob) {
  JobStore s(":memory:");
  const auto j = s.create(train_job(), 1000);
  s.append_log(j.id, 0, 0, "h0", "stdout", 0, "no newline here", false);
  s.flush_partials(j.id);
  s.flush_partials(j.id);  // twice: still one line
  EXPECT_EQ(texts(s.log_lines(j.id, -1, 0, 100)), (std::vector<std::string>{"no newline here"}));
}

TEST(JobStore, AttemptsHaveTheirOwnOffsets) {
  JobStore s(":memory:");
  const auto j = s.create(train_job(), 1000);
  s.append_log(j.id, 0, 0, "h0", "stdout", 0, "attempt one\n", false);
  s.append_log(j.id, 1, 0, "h0", "stdout", 0, "attempt two\n", false);  // a new file from offset 0
  EXPECT_EQ(texts(s.log_lines(j.id, -1, 0, 100)), (std::vector<std::string>{"attempt one", "attempt two"}));
}

TEST(JobStore, LinesFollowBySeqAndFilterByRankAndTail) {
  JobStore s(":memory:");
  const auto j = s.create(train_job(), 1000);
  s.append_log(j.id, 0, 0, "h0", "stdout", 0, "a\nb\n", false);
  s.append_log(j.id, 0, 1, "h1", "stdout", 0, "c\n", false);
  s.append_log(j.id, 0, 0, "h0", "stdout", 4, "d\n", false);
  const auto all = s.log_lines(j.id, -1, 0, 100);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[2].host, "h1");
  EXPECT_EQ(texts(s.log_lines(j.id, -1, all[1].seq, 100)), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(texts(s.log_lines(j.id, 0, 0, 100)), (std::vector<std::string>{"a", "b", "d"}));
  EXPECT_EQ(texts(s.tail_lines(j.id, -1, 2)), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(texts(s.log_lines(j.id, -1, 0, 1)), (std::vector<std::string>{"a"}));
}

TEST(JobStore, MetricsAreReplacedByStep) {
  JobStore s(":memory:");
  const auto j = s.create(train_job(), 1000);
  s.put_metrics(j.id, Json::array({{{"step", 1}, {"critic/score/mean", 0.1}}, {{"step", 2}, {"critic/score/mean", 0.2}}}), 10);
  // A resumed attempt runs step 2 again; a row without a step is ignored.
  s.put_metrics(j.id, Json::array({{{"step", 2}, {"critic/score/mean", 0.25}}, {{"nostep", 1}}}), 20);
  const auto rows = s.metrics(j.id, 0);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[1]["critic/score/mean"].get<double>(), 0.25);
  EXPECT_EQ(s.metrics(j.id, 1).size(), 1u);
  EXPECT_EQ(s.latest_metrics(j.id, 1)[0]["step"], 2);
}

TEST(JobStore, TaskIdsRoundTrip) {
  Placement p;
  p.job = 12;
  p.rank = 3;
  p.attempt = 1;
  EXPECT_EQ(p.task_id(), "job-12/3/1");
  const auto ref = parse_task_id("job-12/3/1");
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->job, 12);
  EXPECT_EQ(ref->rank, 3);
  EXPECT_EQ(ref->attempt, 1);
  EXPECT_FALSE(parse_task_id("job-12/3"));
  EXPECT_FALSE(parse_task_id("job-12/3/1x"));
  EXPECT_FALSE(parse_task_id("../etc"));
}

TEST_F(TempDb, EverythingSurvivesReopening) {
  int64_t id = 0;
  {
    JobStore s(db());
    auto j = s.create(train_job(), 1000);
    id = j.id;
    j.state = JobState::kRunning;
    s.update(j, 1100, "placed");
    Placement p;
    p.job = id;
    p.rank = 0;
    p.node = "node-0";
    p.host = "h0";
    p.device = "cpu";
    s.add_placements({p});
    s.append_log(id, 0, 0, "h0", "stderr", 0, "hello\npart", false);
    s.put_metrics(id, Json::array({{{"step", 1}, {"x", 1.0}}}), 1200);
    s.put_result(id, 0, {{"ok", true}});
  }  // the head is gone
  JobStore s(db());
  const auto j = s.job(id);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, JobState::kRunning);
  EXPECT_EQ(s.events(id).size(), 2u);
  ASSERT_EQ(s.placements(id).size(), 1u);
  EXPECT_EQ(s.active_placements().size(), 1u);
  s.append_log(id, 0, 0, "h0", "stderr", 10, "ial line\n", false);  // the partial line carried over
  EXPECT_EQ(texts(s.log_lines(id, -1, 0, 100)), (std::vector<std::string>{"hello", "partial line"}));
  EXPECT_EQ(s.metrics(id, 0).size(), 1u);
  EXPECT_EQ(s.results(id)["0"]["ok"], true);
  // A job submitted after the restart gets a new id, never an old one.
  EXPECT_EQ(s.create(train_job(), 3000).id, id + 1);
}

// The in-memory view (issue 18) against SQLite: after creates, updates, placements placed,
// started, ended and placed again, every read of the view equals the same read of a store opened
// afresh on the file (which loads it from the tables), and the per-node index holds exactly the
// placements not exited.
TEST_F(TempDb, ViewReadsEqualTheTablesAfterWrites) {
  auto same = [](const Placement& a, const Placement& b) {
    return a.job == b.job && a.attempt == b.attempt && a.rank == b.rank && a.node == b.node && a.host == b.host &&
           a.local_rank == b.local_rank && a.device == b.device && a.state == b.state && a.started_ms == b.started_ms &&
           a.ended_ms == b.ended_ms && a.exit_code == b.exit_code && a.signal == b.signal && a.error == b.error;
  };
  auto same_all = [&](const std::vector<Placement>& a, const std::vector<Placement>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  };
  JobStore s(db());
  auto a = s.create(train_job(), 1000);
  auto b = s.create(train_job(), 1001);
  std::vector<Placement> ps;
  for (int r = 0; r < 4; ++r) {
    Placement p;
    p.job = r < 2 ? a.id : b.id;
    p.rank = r % 2;
    p.node = "node-" + std::to_string(r % 2);
    p.host = "h" + std::to_string(r % 2);
    p.device = "cuda:" + std::to_string(r / 2);
    ps.push_back(p);
  }
  s.add_placements(ps);
  a.state = JobState::kRunning;
  s.update(a, 1100, "placed");
  auto p = *s.placement(a.id, 0, 1);
  p.state = TaskState::kRunning;
  p.started_ms = 1200;
  p.host = "h1-seen";
  s.update_placement(p);
  p.state = TaskState::kExited;
  p.ended_ms = 1300;
  p.exit_code = 3;
  p.error = "boom";
  s.update_placement(p);
  a.attempt = 1;
  a.restarts = 1;
  a.config["trainer"]["resume_mode"] = "auto";
  s.update(a, 1400);
  Placement again = ps[0];
  again.attempt = 1;
  s.add_placements({again});

  EXPECT_EQ(s.active_placements_on("node-1").size(), 1u) << "job a's rank 1 exited; job b's rank 1 is still there";
  EXPECT_EQ(s.active_placements_on("node-0").size(), 3u);
  EXPECT_TRUE(s.active_placements_on("node-9").empty());
  EXPECT_TRUE(s.has_placements(a.id, 1));
  EXPECT_FALSE(s.has_placements(a.id, 2));

  JobStore fresh(db());  // loads its view from the tables
  for (int64_t id : {a.id, b.id}) {
    EXPECT_TRUE(same_all(s.placements(id), fresh.placements(id))) << "job " << id;
    EXPECT_TRUE(same_all(s.placements(id, 0), fresh.placements(id, 0))) << "job " << id;
    EXPECT_EQ(s.job(id)->config, fresh.job(id)->config);
    EXPECT_EQ(s.job(id)->attempt, fresh.job(id)->attempt);
    EXPECT_EQ(s.job(id)->state, fresh.job(id)->state);
    EXPECT_EQ(s.job(id)->started_ms, fresh.job(id)->started_ms);
  }
  EXPECT_TRUE(same_all(s.active_placements(), fresh.active_placements()));
  EXPECT_TRUE(same_all(s.active_placements_on("node-0"), fresh.active_placements_on("node-0")));
  EXPECT_EQ(s.placement(a.id, 0, 1)->host, "h1-seen");
  EXPECT_EQ(fresh.placement(a.id, 0, 1)->error, "boom");
  EXPECT_EQ(s.jobs().size(), 2u);
  EXPECT_EQ(s.jobs().front().id, b.id) << "newest first";
  EXPECT_EQ(s.jobs_in({JobState::kRunning}).size(), 1u);
}

// version() moves with every write a job summary shows (a job row, a metric row), so that a
// reader caching GET /api/jobs's answer never serves one older than the store.
TEST(JobStore, VersionMovesWithJobAndMetricWrites) {
  JobStore s(":memory:");
  uint64_t v = s.version();
  auto j = s.create(train_job(), 1000);
  EXPECT_GT(s.version(), v);
  v = s.version();
  j.state = JobState::kRunning;
  s.update(j, 1100);
  EXPECT_GT(s.version(), v);
  v = s.version();
  s.put_metrics(j.id, Json::array({{{"step", 1}}}), 1200);
  EXPECT_GT(s.version(), v);
}

}  // namespace
}  // namespace verl::launcher
