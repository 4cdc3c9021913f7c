#!/usr/bin/env bash
# The man pages render without a single warning from man(1)/groff, and mandb can index them.
# Completeness against the command tree is tests/unit/cli/man_test.cc's job.
set -u
src=${VERL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

for tool in man groff lexgrog; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (scripts/setup installs man-db and groff-base)" >&2; exit 1; }
done

# Every warning groff knows (-ww: 'all' leaves out undefined macros), at the width of a terminal.
# Command substitution waits for troff itself, which may write after man has exited.
warnings() { MANWIDTH=80 man -l --warnings=w "$1" 2>&1 >/dev/null; }

# The checker itself must see a broken page, or every page below would pass by default.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '.TH BROKEN 1\n.SH NAME\nbroken \\- a page with an unknown macro\n.XX\n' >"$tmp/broken.1"
check "the check sees a warning in a broken page" '[ -n "$(warnings "$tmp/broken.1")" ]'

shopt -s nullglob
pages=("$src"/man/*.1)
check "man/ has pages" '[ ${#pages[@]} -gt 0 ]'
for page in "${pages[@]}"; do
  name=$(basename "$page")
  out=$(warnings "$page")
  [ -z "$out" ] || printf '%s\n' "$out" >&2
  check "$name renders without warnings" '[ -z "$out" ]'
  check "$name renders some text" '[ -n "$(MANWIDTH=80 man -l "$page" 2>/dev/null)" ]'
  # .TH names the page as its file does: verlctl-config.1 -> VERLCTL\-CONFIG 1.
  title=$(basename "$page" .1 | tr 'a-z' 'A-Z' | sed 's/-/\\-/g')
  check "$name has .TH $title 1" 'grep -qF ".TH $title 1 " "$page"'
  # whatis/apropos: the NAME line parses as "name - description".
  check "$name has a NAME line mandb can index" 'lexgrog "$page" | grep -q ": \"$(basename "$page" .1) - "'
done
exit $failed
