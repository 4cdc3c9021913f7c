#!/usr/bin/env bash
# `verlctl smoke` as CI runs it: exit 0 with a well-formed JUnit report of 7 passing checks;
# then a smoke whose job config is invalid: exit 5 naming the failed check, the report says
# which failed and which were skipped, and its cluster is down all the same. Own VERLCTL_HOME;
# leaves no process behind.
set -u
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

export VERLCTL_HOME=$(mktemp -d)
work=$(mktemp -d)
leftovers() { pgrep -f -- "$VERLCTL_HOME" || true; }
cleanup() {
  for d in "$VERLCTL_HOME"/*/; do [ -d "$d" ] && "$v" down --name "$(basename "$d")" --timeout 0 >/dev/null 2>&1; done
  rm -rf "$VERLCTL_HOME" "$work"
}
trap cleanup EXIT

# JUnit XML: parse it and print "tests failures skipped names-of-failed" (python3's ElementTree).
junit() { python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
cases = suite.findall("testcase")
assert int(suite.get("tests")) == len(cases)
failed = [c.get("name") for c in cases if c.find("failure") is not None]
skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
assert int(suite.get("failures")) == len(failed) and int(suite.get("skipped")) == len(skipped)
for c in cases: float(c.get("time"))
print(len(cases), len(failed), len(skipped), ",".join(failed).replace(" ", "_") or "-", ",".join(c.get("name") for c in cases).replace(" ", "_"))
PY
}

t0=$(date +%s)
"$v" smoke --name smk$$ --junit "$work/ok.xml" >"$work/ok.out" 2>"$work/ok.err"; rc=$?
echo "smoke took $(( $(date +%s) - t0 )) s" >&2
cat "$work/ok.out" >&2
check "smoke exits 0" '[ $rc -eq 0 ]' || tail -30 "$work/ok.err" >&2
read -r n nfail nskip failed_names names < <(junit "$work/ok.xml")
check "junit: well-formed, 7 testcases, no failure" '[ "$n" = 7 ] && [ "$nfail" = 0 ] && [ "$nskip" = 0 ]'
check "junit: the checks in order" '[ "$names" = "up,probe,submit,job_succeeded,score_moved,metrics_complete,down" ]'
check "the score moved (stdout says by how much)" 'grep -q "^ok      score moved" "$work/ok.out" && grep -q "val/score/mean" "$work/ok.xml"'
check "no process left after smoke" '[ -z "$(leftovers)" ]'

# A job config the head refuses: submit fails, the rest of the job checks are skipped, down runs.
"$v" smoke --name bad$$ --junit "$work/bad.xml" data.train_batch_size=0 >"$work/bad.out" 2>"$work/bad.err"; rc=$?
check "failing smoke exits 5" '[ $rc -eq 5 ]' || tail -5 "$work/bad.err" >&2
check "the message names the failed check" 'grep -q "check .submit. failed" "$work/bad.err"'
read -r n nfail nskip failed_names names < <(junit "$work/bad.xml")
check "junit: 7 testcases, submit failed, 3 skipped" '[ "$n" = 7 ] && [ "$nfail" = 1 ] && [ "$failed_names" = submit ] && [ "$nskip" = 3 ]'
check "junit: the failure message has the head's issue with its key path" 'python3 -c "
import sys, xml.etree.ElementTree as ET
f = [c for c in ET.parse(sys.argv[1]).getroot().iter(\"testcase\") if c.get(\"name\") == \"submit\"][0].find(\"failure\")
assert \"400\" in f.get(\"message\") and \"data.train_batch_size\" in f.text, f.text" "$work/bad.xml"'
check "down ran after the failure" 'python3 -c "
import sys, xml.etree.ElementTree as ET
c = [c for c in ET.parse(sys.argv[1]).getroot().iter(\"testcase\") if c.get(\"name\") == \"down\"][0]
assert c.find(\"failure\") is None and c.find(\"skipped\") is None" "$work/bad.xml"'
check "no process left after the failed smoke" '[ -z "$(leftovers)" ]'
check "usage error exits 2" '"$v" smoke --local 0 >/dev/null 2>&1; [ $? -eq 2 ]'

[ $failed -eq 0 ] && echo "smoke_test: all passed" >&2
exit $failed
