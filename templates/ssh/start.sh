# Starts a node's agent, detached (setsid nohup, stdin /dev/null, output appended to agent.log
# of the directory it runs in), and prints its pid and start time (key=value lines) for the
# record that `verlctl down` stops it by (and, when it has already ended, the last line of its
# log as last=): launcher/ssh_programs.cc renders it, as the tail of
# ssh/sync.sh when the node's verlctl is current, else on its own after the copy (cd set).
#   cd       the node's directory, when this is a command of its own
#   env      NAME=value arguments of env, each quoted; has_env: whether there are any
#   agent    the agent's command line, each argument quoted
#   ticks_fn ssh/proc_ticks.sh
{{#cd}}cd {{cd}} || exit 1; {{/cd}}setsid nohup{{#has_env}} env{{#env}} {{.}}{{/env}}{{/has_env}} {{agent}} </dev/null >>agent.log 2>&1 & pid=$!;
{{ticks_fn}};
ticks=$(t "$pid"); printf 'pid=%s\nticks=%s\n' "$pid" "$ticks";
[ -n "$ticks" ] || printf 'last=%s\n' "$(tail -n 1 agent.log 2>/dev/null)"
