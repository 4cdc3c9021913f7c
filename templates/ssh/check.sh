# Whether the recorded agent (pid, start_ticks) still runs on its node: prints running, or gone
# and the last line of its log (log), its own word on why (launcher/ssh_programs.cc renders it).
# The same test as launcher::is_same_process() on this machine: the pid's start time is the
# recorded one.
{{ticks_fn}};
if [ "$(t {{pid}})" = {{start_ticks}} ]; then echo running; else echo gone; tail -n 1 {{log}} 2>/dev/null; fi
