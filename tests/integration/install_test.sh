#!/usr/bin/env bash
# `cmake --install` lays out a working tree: the binary finds its trainer module in
# <prefix>/lib/verlctl, and every man page is installed where man finds it.
set -u
bin=${VERL_BINARY_DIR:?}
src=${VERL_SOURCE_DIR:?}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$bin" --prefix "$prefix" >/dev/null || { echo "FAIL: cmake --install" >&2; exit 1; }
fail=0
[ -x "$prefix/bin/verlctl" ] || { echo "FAIL: no bin/verlctl" >&2; fail=1; }
for page in "$src"/man/*.1; do
  [ -f "$prefix/share/man/man1/$(basename "$page")" ] || { echo "FAIL: $(basename "$page") not installed" >&2; fail=1; }
done
MANPATH="$prefix/share/man" man -w verlctl >/dev/null 2>&1 || { echo "FAIL: man -w verlctl" >&2; fail=1; }
if [ -f "$bin/libverlctl_trainer.so" ]; then
  v=$(env -u VERLCTL_TRAINER_MODULE "$prefix/bin/verlctl" --version)
  grep -qF "$prefix/lib" <<<"$v" || { echo "FAIL: installed binary does not find its module: $v" >&2; fail=1; }
fi
exit $fail
