# Sourced by every shell test: assertions that go on after a failure.
#   check WHAT 'condition'   evals the condition; prints "ok: WHAT" or "FAIL: WHAT" on stderr. A
#                            failure sets failed=1 and returns 1, so that
#                            `check ... || { diagnostics; }` prints them only then.
# A test ends with `exit $failed`.
failed=0
check() { if ! eval "$2"; then echo "FAIL: $1" >&2; failed=1; return 1; else echo "ok: $1" >&2; fi; }
