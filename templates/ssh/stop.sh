# Stops the recorded agent (pid, start_ticks) on its node, only while it is still that process,
# and prints gone or running (launcher/ssh_programs.cc renders it). It is the protocol of
# launcher::stop_recorded() (launcher/cluster_state.cc) on this machine, built on
# process::stop_escalating() (common/process.cc: process::EscalatingStop's steps), step for step:
#   not that process (gone, or the pid reused): nothing is signalled, it is gone
#   SIGTERM to its group (its children) and to itself; up to grace (grace_steps polls) for it to go
#   SIGKILL to both; up to process::kStopKillWait (kill_steps polls) for it to go
#   gone unless it is still that process
# It polls every 50 ms (poll_s), as many steps as the C++ one's times. Keep the two in step:
# tests/unit/launcher/ssh_programs_test.cc runs both on the same processes.
{{ticks_fn}};
same() { [ "$(t {{pid}})" = {{start_ticks}} ]; };
wait_gone() { i=0; while same && [ $i -lt $1 ]; do sleep {{poll_s}}; i=$((i+1)); done; };
if same; then kill -TERM -{{pid}} {{pid}} 2>/dev/null; wait_gone {{grace_steps}};
  if same; then kill -KILL -{{pid}} {{pid}} 2>/dev/null; wait_gone {{kill_steps}}; fi; fi;
if same; then echo running; else echo gone; fi
