#!/usr/bin/env bash
# `verlctl env` as a user runs it, against fake sysfs trees: the NCCL/IB values for active IB,
# RoCE, down ports and no device, the spec's env winning, the container line, the exit codes.
set -u
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# port ROOT DEV N STATE LINK_LAYER
port() {
  local d="$1/class/infiniband/$2/ports/$3"
  mkdir -p "$d/gids" "$d/gid_attrs/types"
  echo "$4" >"$d/state"; echo "$5" >"$d/link_layer"; echo "200 Gb/sec (4X HDR)" >"$d/rate"
}
# gid ROOT DEV N INDEX GID TYPE
gid() {
  local d="$1/class/infiniband/$2/ports/$3"
  echo "$5" >"$d/gids/$4"; echo "$6" >"$d/gid_attrs/types/$4"
}
# value JSON NAME [FIELD]: the field (value by default) of variable NAME, or <unset>.
value() {
  python3 -c 'import json,sys
d=json.loads(sys.argv[1])
m=[e for e in d["env"] if e["name"]==sys.argv[2]]
print(m[0][sys.argv[3]] if m else "<unset>")' "$1" "$2" "${3:-value}"
}

ib="$tmp/ib"
port "$ib" mlx5_0 1 "4: ACTIVE" InfiniBand
port "$ib" mlx5_1 1 "4: ACTIVE" InfiniBand
port "$ib" mlx5_2 1 "1: DOWN" InfiniBand
out=$("$v" env --sysfs-root "$ib" -o json 2>/dev/null); rc=$?
check "ib tree exits 0" '[ $rc -eq 0 ]'
check "NCCL_IB_HCA lists the active ports exactly" '[ "$(value "$out" NCCL_IB_HCA)" = "=mlx5_0:1,mlx5_1:1" ]'
check "NCCL_IB_HCA is detected" '[ "$(value "$out" NCCL_IB_HCA source)" = detected ]'
check "the reason names the down port" 'value "$out" NCCL_IB_HCA reason | grep -qF "mlx5_2:1 is 1: DOWN"'
check "IB is not disabled" '[ "$(value "$out" NCCL_IB_DISABLE)" = "<unset>" ]'
check "no GID index without RoCE" '[ "$(value "$out" NCCL_IB_GID_INDEX)" = "<unset>" ]'
check "the default head 127.0.0.1 gives lo" '[ "$(value "$out" NCCL_SOCKET_IFNAME)" = "=lo" ] && [ "$(value "$out" GLOO_SOCKET_IFNAME)" = lo ]'
for kv in CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_CUMEM_ENABLE=0 TORCH_NCCL_ASYNC_ERROR_HANDLING=1 TOKENIZERS_PARALLELISM=false; do
  check "default ${kv}" '[ "$(value "$out" "${kv%%=*}")" = "${kv#*=}" ] && [ "$(value "$out" "${kv%%=*}" source)" = default ]'
done

roce="$tmp/roce"
port "$roce" mlx5_0 1 "4: ACTIVE" Ethernet
gid "$roce" mlx5_0 1 0 fe80:0000:0000:0000:ba59:9fff:fe1c:4b6a "IB/RoCE v1"
gid "$roce" mlx5_0 1 2 0000:0000:0000:0000:0000:ffff:0a01:0005 "IB/RoCE v1"
gid "$roce" mlx5_0 1 6 0000:0000:0000:0000:0000:ffff:0a01:0005 "RoCE v2"
out=$("$v" env --sysfs-root "$roce" -o json 2>/dev/null)
check "RoCE: GID index of the RoCE v2 IPv4 GID" '[ "$(value "$out" NCCL_IB_GID_INDEX)" = 6 ]'
check "RoCE port is in NCCL_IB_HCA" '[ "$(value "$out" NCCL_IB_HCA)" = "=mlx5_0:1" ]'
rm "$roce/class/infiniband/mlx5_0/ports/1/gid_attrs/types/6"
out=$("$v" env --sysfs-root "$roce" -o json 2>/dev/null)
check "RoCE without a readable v2 GID falls back to 3" '[ "$(value "$out" NCCL_IB_GID_INDEX)" = 3 ]'
check "and says why" 'value "$out" NCCL_IB_GID_INDEX reason | grep -qF "no RoCE v2 GID"'

down="$tmp/down"
port "$down" mlx5_0 1 "1: DOWN" InfiniBand
out=$("$v" env --sysfs-root "$down" -o json 2>/dev/null)
check "only down ports: IB disabled" '[ "$(value "$out" NCCL_IB_DISABLE)" = 1 ] && [ "$(value "$out" NCCL_IB_HCA)" = "<unset>" ]'
mkdir -p "$tmp/none"
out=$("$v" env --sysfs-root "$tmp/none" -o json 2>/dev/null)
check "no device: IB disabled" '[ "$(value "$out" NCCL_IB_DISABLE)" = 1 ]'
check "no device: the reason says so" 'value "$out" NCCL_IB_DISABLE reason | grep -qF "no InfiniBand or RoCE device"'

cat >"$tmp/cluster.yaml" <<EOF
name: envtest
env:
  NCCL_IB_HCA: "=mlx5_9:1"
  NCCL_DEBUG: INFO
  NCCL_CUMEM_ENABLE: null
container:
  runtime: docker
  image: verl:test
  mounts: ["/data:/data"]
EOF
out=$("$v" env -f "$tmp/cluster.yaml" --sysfs-root "$ib" -o json 2>/dev/null); rc=$?
check "spec file exits 0" '[ $rc -eq 0 ]'
check "the spec's env wins" '[ "$(value "$out" NCCL_IB_HCA)" = "=mlx5_9:1" ] && [ "$(value "$out" NCCL_IB_HCA source)" = spec ]'
check "and is reported as from the cluster spec" 'value "$out" NCCL_IB_HCA reason | grep -qF "from the cluster spec"'
check "a spec-only variable is added" '[ "$(value "$out" NCCL_DEBUG)" = INFO ]'
check "null removes a default" '[ "$(value "$out" NCCL_CUMEM_ENABLE)" = "<unset>" ]'
check "the docker line" 'python3 -c "import json,sys
a=json.loads(sys.argv[1])[\"container\"][\"argv\"]
assert a[:6]==[\"docker\",\"run\",\"--rm\",\"--init\",\"--network\",\"host\"], a
assert \"--device\" in a and \"/dev/infiniband\" in a, a
assert \"-e\" in a and \"NCCL_IB_HCA\" in a and not any(x.startswith(\"NCCL_IB_HCA=\") for x in a), a
assert a[-3:]==[\"verl:test\",\"verlctl\",\"train\"], a" "$out"'
text=$("$v" env -f "$tmp/cluster.yaml" --sysfs-root "$ib" 2>/dev/null)
check "text output is a table" 'head -1 <<<"$text" | grep -qE "^NAME +VALUE +SOURCE +REASON"'
check "text output shows the run line" 'grep -qF "docker run --rm --init --network host --shm-size 16g --ulimit memlock=-1 --device /dev/infiniband" <<<"$text"'

"$v" env --head 127.0.0.1 --sysfs-root "$tmp/no-such-dir" >/dev/null 2>&1
check "a missing sysfs root exits 2" '[ $? -eq 2 ]'
"$v" env container.runtime=apptainer >/dev/null 2>&1
check "a runtime without an image exits 3" '[ $? -eq 3 ]'
printf 'name: r\nbackend: ssh\nnodes:\n  - host: 203.0.113.7\n' >"$tmp/remote.yaml"
err=$("$v" env -f "$tmp/remote.yaml" --node 203.0.113.7 2>&1 >/dev/null); rc=$?
check "a remote node exits 4" '[ $rc -eq 4 ]'
check "and says how to get its values" 'grep -qF "hint: run '"'"'verlctl env'"'"' with the same spec on 203.0.113.7" <<<"$err"'
exit $failed
