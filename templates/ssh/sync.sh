# The syncing stage of one node, one command (launcher/ssh_programs.cc renders it). Its stdin:
# the token file, then the spec. It makes the node's directory (and bin/ beside the clusters
# when verlctl may be copied), writes token and cluster.json there (umask 077: 0600; a rename
# each, so an agent never reads half a file), prints home=$HOME, and then:
#   copy_binary auto:   runs ssh/start.sh (start) when the node's verlctl has this verlctl's
#                       --version line (version) and size (size), and its trainer module this
#                       one's size (module, module_size; when this build has one), else prints
#                       version= and size= of what it has
#   copy_binary never:  runs start when verlctl (exe) is on the PATH, else prints missing=verlctl
#   copy_binary always: nothing more (the copy and ssh/start.sh follow)
# The token is read by the shell's read builtin and written by its printf builtin: it is in no
# process's command line on the node.
umask 077 && mkdir -p {{dir}}{{#bin_dir}} {{bin_dir}}{{/bin_dir}} && cd {{dir}}
  && IFS= read -r token && printf '%s\n' "$token" >token.tmp && mv -f token.tmp token
  && cat >cluster.json.tmp && mv -f cluster.json.tmp cluster.json
  && printf 'home=%s\n' "$HOME"{{#auto}}
  && v=$({{exe}} --version 2>/dev/null | head -n 1); s=$(wc -c 2>/dev/null <{{exe}});
  if [ "$v" = {{version}} ] && [ "$s" = {{size}} ]{{#module}} && [ "$(wc -c 2>/dev/null <{{module}})" = {{module_size}} ]{{/module}};
  then {{start}}; else printf 'version=%s\nsize=%s\n' "$v" "$s"; fi{{/auto}}{{#never}}
  && if command -v {{exe}} >/dev/null 2>&1; then {{start}}; else echo missing=verlctl; fi{{/never}}
