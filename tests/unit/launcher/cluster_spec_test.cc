// The cluster spec parsed once: defaults from templates/cluster.yaml (none of C++'s own), the
// JSON that up records and the head reads back, and errors that name the key (exit 3).
#include "launcher/cluster_spec.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/config.h"
#include "common/error.h"
#include "launcher/backend.h"

namespace verl::launcher {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The error of fn, which must throw verl::Error.
Error error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no verl::Error thrown";
  return Error(ExitCode::kOk, "");
}

TEST(ClusterSpec, EveryDefaultIsTheTemplates) {
  const ClusterSpec spec = load_cluster_spec("", {});
  // Written back, the parsed default is templates/cluster.yaml, key for key: no default lives
  // in C++ and no key is dropped.
  EXPECT_EQ(Json(spec), config::defaults(config::Kind::kCluster)) << Json(spec).dump(2);
  EXPECT_EQ(spec.backend, BackendKind::kLocal);
  EXPECT_EQ(spec.head.dashboard_port, config::defaults(config::Kind::kCluster)["head"]["dashboard_port"].get<int>());
  EXPECT_EQ(spec.ssh.copy_binary, CopyBinary::kAuto);
  EXPECT_FALSE(spec.slurm.partition);
  EXPECT_EQ(spec.container.runtime, ContainerRuntime::kNone);
}

TEST(ClusterSpec, WhatUpRecordsReadsBackTheSame) {
  const ClusterSpec spec = load_cluster_spec(
      "", {"backend=ssh", "name=c2", "nodes=[{host: h1, user: alice, resources: {gpus: 2, gpu_ids: [0, 3]}}, {host: h2, port: 2222}]",
           "ssh.copy_binary=never", "slurm.partition=gpu", "env.NCCL_DEBUG=INFO", "container.runtime=docker",
           "container.image=verl:1", "container.mounts=[/data:/data:ro]"});
  ASSERT_EQ(spec.nodes.size(), 2u);
  EXPECT_EQ(spec.nodes[0].user, "alice");
  EXPECT_EQ(spec.nodes[0].resources.gpus, 2);
  EXPECT_EQ(spec.nodes[0].resources.gpu_ids, (std::vector<int>{0, 3}));
  EXPECT_FALSE(spec.nodes[0].resources.cpus);
  EXPECT_EQ(spec.nodes[1].port, 2222);
  EXPECT_FALSE(spec.nodes[1].user);
  EXPECT_EQ(spec.container.mounts, (std::vector<std::string>{"/data:/data:ro"}));
  const Json recorded = spec;
  EXPECT_EQ(Json(recorded.get<ClusterSpec>()), recorded);

  // Through the file, as down, status and the head read it.
  const fs::path file = fs::temp_directory_path() / ("verl_cluster_spec_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << recorded.dump(2);
  EXPECT_EQ(Json(read_cluster_spec(file.string())), recorded);
  fs::remove(file);
}

TEST(ClusterSpec, ARecordedSpecLackingKeysTakesTheDefaults) {
  const fs::path file = fs::temp_directory_path() / ("verl_cluster_spec_old_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << R"({"name": "old", "backend": "local", "nodes": [{"host": "127.0.0.1"}]})";
  const ClusterSpec spec = read_cluster_spec(file.string());
  fs::remove(file);
  EXPECT_EQ(spec.name, "old");
  EXPECT_EQ(spec.head.dashboard_port, 8265);
  ASSERT_EQ(spec.nodes.size(), 1u);
  EXPECT_EQ(spec.nodes[0].port, 22);
  EXPECT_FALSE(spec.nodes[0].resources.any());
}

TEST(ClusterSpec, AnInvalidValueIsNamedByItsKeyPath) {
  const Error e = error_of([] { load_cluster_spec("", {"head.dashboard_port=99999"}); });
  EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
  EXPECT_NE(std::string(e.what()).find("head.dashboard_port"), std::string::npos) << e.what();

  const Error c = error_of([] { load_cluster_spec("", {"container.runtime=podman"}); });
  EXPECT_EQ(c.code(), ExitCode::kInvalidConfig);
  EXPECT_NE(std::string(c.what()).find("container.image"), std::string::npos) << c.what();
}

TEST(ClusterSpec, JsonThatLacksAKeyOrHasTheWrongTypeIsNamedByItsKeyPath) {
  Json j = config::defaults(config::Kind::kCluster);
  j["head"].erase("store_port");
  Error e = error_of([&] { j.get<ClusterSpec>(); });
  EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
  EXPECT_NE(std::string(e.what()).find("head.store_port: missing"), std::string::npos) << e.what();

  j = config::defaults(config::Kind::kCluster);
  j["ssh"]["parallel"] = "many";
  e = error_of([&] { j.get<ClusterSpec>(); });
  EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
  EXPECT_NE(std::string(e.what()).find("ssh.parallel: expected an integer, got 'many'"), std::string::npos) << e.what();

  j = config::defaults(config::Kind::kCluster);
  j["nodes"] = Json::array({Json(config::item_defaults(config::Kind::kCluster, "nodes")), Json::object()});
  j["nodes"][0]["host"] = "a";
  j["nodes"][1] = j["nodes"][0];
  j["nodes"][1]["resources"]["gpus"] = "two";
  e = error_of([&] { j.get<ClusterSpec>(); });
  EXPECT_NE(std::string(e.what()).find("nodes[1].resources.gpus"), std::string::npos) << e.what();
}

TEST(ClusterSpec, ADefaultNodeIsTheSchemasItemWithItsHost) {
  const NodeSpec n = default_node("127.0.0.1");
  EXPECT_EQ(n.host, "127.0.0.1");
  EXPECT_EQ(n.port, 22);
  EXPECT_EQ(n.gpus, 0);
  EXPECT_FALSE(n.user);
  EXPECT_FALSE(n.resources.any());
}

TEST(ClusterSpec, NodeNamesFollowTheBackend) {
  ClusterSpec ssh = load_cluster_spec("", {"backend=ssh", "nodes=[{host: a}, {host: b}, {host: a}]"});
  EXPECT_EQ(node_names(ssh), (std::vector<std::string>{"a-0", "b", "a-2"}));
  ClusterSpec local = ssh;
  local.backend = BackendKind::kLocal;
  EXPECT_EQ(node_names(local), (std::vector<std::string>{"node-0", "node-1", "node-2"}));
  EXPECT_EQ(node_names(load_cluster_spec("", {"backend=slurm", "slurm.nodes=2"})),
            (std::vector<std::string>{"node-0", "node-1"}));
}

}  // namespace
}  // namespace verl::launcher
