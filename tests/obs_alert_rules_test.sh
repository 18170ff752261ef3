#!/usr/bin/env bash
# The observability pack's Prometheus files (deploy/prometheus/, issue 19), with Prometheus's own tool:
#   1. promtool check rules: the alert rules parse, every expression is valid PromQL;
#   2. each alert has a `for:`, a severity label (critical, warning or info), a summary and a description;
#   3. promtool test rules: the unit tests in gpupool-alerts.test.yaml pass, and every alert of the rules file has
#      a test case (one where it fires, with its labels and annotations; one where it does not);
#   4. promtool check config: the example scrape configuration is valid and loads the rules.
#   obs_alert_rules_test.sh SOURCE_DIR
# Exits 77 (skipped) without promtool (Debian package `prometheus`, scripts/install-deps.sh) or python3.
set -uo pipefail
src=$(cd "$1" && pwd)
dir="$src/deploy/prometheus"
skip() { echo "obs_alert_rules: skipped: $*"; exit 77; }
fail() { echo "obs_alert_rules: FAIL: $*" >&2; exit 1; }
command -v promtool >/dev/null || skip "needs promtool (apt-get install prometheus)"
command -v python3 >/dev/null || skip "needs python3"

out=$(promtool check rules "$dir/gpupool-alerts.yaml" 2>&1) || fail "promtool check rules: $out"

# 2. Each alert's block (from its `- alert:` line to the next rule or group) has what every alert needs; the
# alert names are the list for 3.
alerts=$(python3 - "$dir/gpupool-alerts.yaml" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
for b in re.split(r"^\s*- (?=alert:|record:|name:)", text, flags=re.M):
    m = re.match(r"alert:\s*(\S+)", b)
    if not m:
        continue
    name = m.group(1)
    for what, pattern in (("for:", r"^\s+for:\s*\d+[smhd]"),
                          ("a severity label (critical, warning or info)", r"^\s+severity:\s*(critical|warning|info)\s*$"),
                          ("a summary annotation", r"^\s+summary:\s*\S"),
                          ("a description annotation", r"^\s+description:\s*\S")):
        if not re.search(pattern, b, re.M):
            print(f"PROBLEM {name}: no {what}")
    print(name)
EOF
) || fail "reading the rules"
if grep -q '^PROBLEM ' <<<"$alerts"; then fail "$(grep '^PROBLEM ' <<<"$alerts")"; fi
[ -n "$alerts" ] || fail "no alert in gpupool-alerts.yaml"

# 3. Run the tests from their folder (rule_files are relative to the test file).
out=$(cd "$dir" && promtool test rules gpupool-alerts.test.yaml 2>&1) || fail "promtool test rules: $out"
# Every alert has a case where it fires (its exp_alerts list labels) and one where it does not (exp_alerts: []).
python3 - "$dir/gpupool-alerts.test.yaml" $alerts <<'EOF' || fail "the unit tests miss cases (above)"
import re, sys
text, bad = open(sys.argv[1]).read(), False
cases = re.split(r"\n\s*- eval_time:", text)
for name in sys.argv[2:]:
    mine = [c for c in cases if re.search(rf"alertname: {name}\n", c)]
    fires = [c for c in mine if "exp_labels" in c]
    quiet = [c for c in mine if re.search(r"exp_alerts: \[\]", c)]
    if not fires or not quiet:
        print(f"obs_alert_rules: alert {name}: {len(fires)} firing and {len(quiet)} quiet cases (one of each needed)",
              file=sys.stderr)
        bad = True
sys.exit(1 if bad else 0)
EOF

# 4. The example configuration (its file_sd list need not exist here: promtool only warns).
out=$(promtool check config "$dir/prometheus.yaml" 2>&1) || fail "promtool check config: $out"

echo "obs_alert_rules: OK ($(wc -w <<<"$alerts") alerts checked and tested)"
