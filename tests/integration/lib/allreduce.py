# A torch.distributed program as torchrun would start it (env:// rendezvous from RANK,
# WORLD_SIZE, MASTER_ADDR, MASTER_PORT): every rank adds rank+1 with a Gloo all-reduce and
# prints the sum (world_size*(world_size+1)/2 when every rank took part) with the variables it
# got. Used by the submit -- CMD tests (tests/integration/submit_command_*_test.sh).
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
env = {k: os.environ.get(k, "-") for k in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GREETING")}
print(f"rank {rank} of {dist.get_world_size()} sum {int(t.item())} "
      + " ".join(f"{k}={v}" for k, v in env.items()) + f" cwd={os.getcwd()} args={' '.join(sys.argv[1:])}", flush=True)
dist.destroy_process_group()
