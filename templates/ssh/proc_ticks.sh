# The shell function t PID of the ssh backend's remote programs (rendered by launcher/ssh_programs.cc
# into start.sh, check.sh and stop.sh as ticks_fn): prints the start time of PID, the field of
# /proc/PID/stat that launcher::process_start_ticks() reads on this machine (the 22nd, the 20th
# after the command name, which may hold anything and ends at the last ') '), and nothing when
# PID is gone or a zombie. A pid is reused; pid + start time is not: it is how a record names
# one process. tests/unit/launcher/ssh_programs_test.cc checks both read the same.
#
# Like every template under ssh/: lines starting with '#' are comments, the others are joined
# into one line (each without its leading blanks, one space between), which is what runs over
# SSH and what `verlctl up --dry-run` shows. Every value is quoted for the shell by verlctl.
t() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '$1 != "Z" && $1 != "X" {print $20}'; }
