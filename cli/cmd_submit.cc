// `verlctl submit [-f job.yaml] [key=value ...] [--no-wait]`: sends a job to a running cluster's
// head, which validates it with the same code as `verlctl config validate` (exit 3 with every
// issue), queues it and places its ranks. `verlctl submit [options] -- CMD [ARGS...]` sends a
// command job instead (launcher/command_job.h): the same placement (trainer.* overrides before
// the "--"), each rank running CMD with torchrun's environment, --env on top, in the job
// directory or in a copy of --working-dir (packed here with tar, sent through the head). Without --no-wait it follows the merged logs (stdout)
// with progress (stderr) and exits with the job's result: 0 SUCCEEDED, 1 FAILED (printing the
// failure; 3 when the job preflight found a path of the config wrong on a node, before any rank
// started), 130 when interrupted (the job keeps running).
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/app.h"
#include "cli/head_target.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "cli/status_line.h"
#include "common/config.h"
#include "common/error.h"
#include "common/hydra.h"
#include "common/files.h"
#include "common/process.h"
#include "common/strings.h"
#include "launcher/command_job.h"
#include "launcher/signals.h"
#include "launcher/wire.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;

struct SubmitArgs {
  JobFileArgs job;
  bool no_wait = false;
  bool skip_job_preflight = false;
  bool nccl_debug = false;
  // A command job's (after "--"): see command_body().
  std::vector<std::string> env;
  std::string working_dir;
  int ranks_per_node = 0;
  TargetArgs target;
};

// DIR as a tar, its paths relative to it ("./x"). The whole directory travels in the submit
// body, so it is capped (command_job.h); data belongs on a filesystem the nodes share.
std::string pack_working_dir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw Error(ExitCode::kUsage, "--working-dir " + dir + " is not a directory", "give a directory to copy to every node");
  process::Options po;
  po.timeout = std::chrono::seconds(120);
  const auto r = process::run({"tar", "-c", "-f", "-", "-C", dir, "."}, po);
  if (r.exit_code != 0)
    throw Error(ExitCode::kFailure, "cannot pack --working-dir " + dir + ": tar exited with " + std::to_string(r.exit_code) + ": " + r.err,
                "every file under it must be readable");
  if (static_cast<int64_t>(r.out.size()) > launcher::kMaxWorkingDirBytes)
    throw Error(ExitCode::kUsage,
                "--working-dir " + dir + " packs to " + std::to_string(r.out.size() >> 20) + " MiB, more than the " +
                    std::to_string(launcher::kMaxWorkingDirBytes >> 20) + " MiB a job carries",
                "leave data and checkpoints on a filesystem every node mounts, and copy only the code");
  return r.out;
}

// The `command` field of a command job's body (docs/API.md), checked before the head is asked.
launcher::wire::SubmitCommand command_body(const SubmitArgs& a, const std::vector<std::string>& argv) {
  if (argv.empty())
    throw Error(ExitCode::kUsage, "no command after '--'",
                "name the program each rank runs: verlctl submit trainer.nnodes=2 -- python3 train.py");
  for (const auto& e : a.env)
    if (const std::string why = launcher::env_entry_problem(e); !why.empty())
      throw Error(ExitCode::kUsage, "--env " + why, "write --env NAME=value, once per variable");
  if (a.ranks_per_node < 0)
    throw Error(ExitCode::kUsage, "--ranks-per-node must be 1 (one process per node) or trainer.n_gpus_per_node",
                "--ranks-per-node 1 for torchrun or deepspeed, which start a process per GPU themselves");
  launcher::wire::SubmitCommand c;
  c.spec.argv = argv;
  c.spec.env = a.env;
  c.spec.ranks_per_node = a.ranks_per_node;
  if (!a.working_dir.empty()) {
    c.spec.working_dir = std::filesystem::absolute(a.working_dir).lexically_normal().string();
    c.working_dir_tar = pack_working_dir(c.spec.working_dir);
    c.spec.working_dir_bytes = static_cast<int64_t>(c.working_dir_tar.size());
  }
  return c;
}

}  // namespace

void register_submit(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<SubmitArgs>();
  auto* cmd = app.add_subcommand("submit", "Submit a job to a running cluster and follow it to its end");
  add_job_file_options(cmd, a->job);
  cmd->add_flag("--no-wait", a->no_wait, "Print the job id and return at once");
  cmd->add_flag("--skip-job-preflight", a->skip_job_preflight,
                "Start the ranks without first checking data, model and checkpoint paths on every node");
  cmd->add_flag("--nccl-debug", a->nccl_debug,
                "Run the ranks with NCCL_DEBUG=INFO and show per node the transport NCCL chose ('status JOB')");
  // One value per --env: CLI11 would otherwise take the overrides that follow as more values.
  cmd->add_option("--env", a->env, "With -- CMD: NAME=value for every rank, over the torchrun and NCCL variables (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  cmd->add_option("--working-dir", a->working_dir,
                  "With -- CMD: copy DIR (at most 16 MiB) to every node; the ranks run in the copy, not the job directory");
  cmd->add_option("--ranks-per-node", a->ranks_per_node,
                  "With -- CMD: 1 runs one process per node, holding its GPUs (for torchrun, deepspeed); default one per GPU");
  add_target_options(cmd, a->target);
  cmd->footer(
      "Examples:\n"
      "  verlctl up --local 1 && verlctl submit\n"
      "  verlctl submit -f job.yaml trainer.nnodes=2 trainer.n_gpus_per_node=1\n"
      "  id=$(verlctl submit --no-wait trainer.total_training_steps=20) && verlctl logs $id -f\n"
      "  verlctl submit --address head:8265 --token-file token -o json\n"
      "Any command as the ranks of a job (torchrun's variables: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...):\n"
      "  verlctl submit trainer.nnodes=2 trainer.n_gpus_per_node=8 -- python3 train.py --lr 1e-5\n"
      "  verlctl submit --working-dir . --env OMP_NUM_THREADS=4 -- python3 allreduce.py\n"
      "  verlctl submit trainer.nnodes=2 --ranks-per-node 1 -- sh -c 'torchrun --nnodes $WORLD_SIZE --node-rank $RANK --nproc-per-node 8 --master-addr $MASTER_ADDR --master-port $MASTER_PORT train.py'");
  cmd->callback([&ctx, a] {
    launcher::wire::SubmitCommand command;
    if (ctx.command) {
      command = command_body(*a, *ctx.command);
    } else if (!a->env.empty() || !a->working_dir.empty() || a->ranks_per_node != 0) {
      throw Error(ExitCode::kUsage, "--env, --working-dir and --ranks-per-node belong to a command job, and no command follows '--'",
                  "verlctl submit [options] -- CMD [ARGS...]");
    }
    const auto target = find_head(a->target);
    auto client = connect(target);
    launcher::wire::Submit submit;
    submit.kind = ctx.command ? launcher::JobKind::kCommand : launcher::JobKind::kTrain;
    submit.overrides = a->job.overrides;
    submit.preflight = !ctx.command && !a->skip_job_preflight;
    submit.nccl_debug = a->nccl_debug;
    if (ctx.command) submit.command = std::move(command);
    // The head resolves the config; a Hydra primary config is composed here, where its folder is.
    const std::string file = a->job.primary();
    if (!file.empty()) {
      const std::string text = files::read_file(file);
      submit.yaml = config::has_defaults_list(text) ? config::compose_hydra(file) : text;
      submit.file = file;
    }
    // Warnings (verl keys accepted and ignored) are the submitter's to read; errors come back from the head.
    // (A command job reads only its shape: the head names any other key.)
    if (!ctx.command) {
      const auto local = config::resolve_text(config::Kind::kJob, submit.yaml, file, a->job.overrides);
      if (local.ok() && !local.issues.empty()) *ctx.err << config::format_issues(local.issues);
    }
    const Json body = submit;
    const launcher::HeadResponse r = client->try_request("POST", "/api/jobs", &body);
    if (!r.answered())
      throw Error(ExitCode::kUnreachable, "cannot reach the head of '" + target.cluster + "' at " + target.address.url() + ": " + r.unreachable,
                  "is the cluster up? 'verlctl status' shows it, 'verlctl up --local 1' starts one");
    if (r.status == 400 && r.body.is_object() && r.body.contains("issues")) {
      if (ctx.output == OutputFormat::kJson) {
        print_json(*ctx.out, {{"valid", false}, {"file", file}, {"issues", r.body["issues"]}});
        ctx.exit_code = static_cast<int>(ExitCode::kInvalidConfig);
        return;
      }
      const std::string where = file.empty() ? "the command line" : "'" + file + "'";
      throw Error(ExitCode::kInvalidConfig,
                  r.body.value("error", std::string("invalid job config")) + " from " + where + ":\n" +
                      r.body.value("text", std::string()),
                  "fix the keys named above; 'verlctl config show' prints every key with its default");
    }
    if (r.status != 201 || !r.body.is_object())
      throw Error(ExitCode::kFailure,
                  "the head refused the job: " + (r.body.is_object() ? r.body.value("error", std::string("HTTP ") + std::to_string(r.status))
                                                                      : "HTTP " + std::to_string(r.status)),
                  r.body.is_object() ? r.body.value("hint", std::string()) : std::string());
    const std::string id = launcher::wire::parse<launcher::wire::JobRef>(r.body).id;
    if (a->no_wait) {
      if (ctx.output == OutputFormat::kJson) print_json(*ctx.out, r.body);
      else *ctx.out << id << "\n";
      return;
    }
    *ctx.err << "submitted " << id << " to cluster " << target.cluster << "; following its logs (Ctrl-C leaves it running)\n";
    FollowOptions fo;
    fo.interrupted = &launcher::install_stop_flag();
    // On a terminal one live status line at the bottom; in a pipe, one every 10 s at most.
    StatusLine status(*ctx.err, ::isatty(STDERR_FILENO) == 1, std::chrono::seconds(10));
    fo.on_job = [&](const launcher::wire::Job& job) { status.update(progress_line(job), StatusLine::Clock::now()); };
    fo.before_lines = [&] { status.clear(); };
    fo.after_lines = [&] { status.draw(); };
    std::ostringstream sink;  // -o json: the logs are not data then; the final job is
    launcher::wire::Job job;
    try {
      job = follow_logs(*client, id, ctx.output == OutputFormat::kJson ? static_cast<std::ostream&>(sink) : *ctx.out, fo);
    } catch (...) {
      status.finish();
      throw;
    }
    status.finish();
    const launcher::wire::JobSummary& summary = job.summary;
    const std::string state = to_string(summary.state);
    if (ctx.output == OutputFormat::kJson) print_json(*ctx.out, job);
    const double took = summary.ended_ms && summary.started_ms ? (*summary.ended_ms - *summary.started_ms) / 1000.0 : 0.0;
    Json rows = Json::array();
    if (summary.kind == launcher::JobKind::kTrain) {
      try {
        rows = get_metric_rows(*client, id);
      } catch (const Error& e) {
        *ctx.err << "(the job's metrics could not be read: " << e.what() << ")\n";
      }
    }
    // The state line without the running score (the batch score is named below, with val/score).
    auto ended = job;
    ended.latest_metrics = Json::object();
    *ctx.err << id << " " << state << (took > 0 ? " after " + format_duration(took) : std::string()) << ":"
             << progress_line(ended).substr(id.size() + 1 + state.size()) << "\n"
             << closing_summary(job, rows);
    if (summary.state == launcher::JobState::kSucceeded) return;
    // A failed job preflight: nothing ran; a path of the config is wrong on a node (exit 3).
    const bool failure = job.failure.is_object();
    if (summary.state == launcher::JobState::kFailed && failure && job.failure.contains("preflight"))
      throw Error(ExitCode::kInvalidConfig, id + " FAILED before it started: " + format_failure(job),
                  job.failure.value("hint", std::string("fix the path on that node, or submit --skip-job-preflight")));
    if (summary.state == launcher::JobState::kFailed) {
      const int rank = failure ? job.failure.value("rank", 0) : 0;
      throw Error(ExitCode::kFailure, id + " FAILED: " + format_failure(job),
                  "'verlctl logs " + id + " --rank " + std::to_string(rank) + "' shows that rank's log; 'verlctl status " + id + "' the events");
    }
    throw Error(ExitCode::kFailure, id + " " + state, "'verlctl status " + id + "' shows its events");
  });
}

}  // namespace verl::cli
