#!/usr/bin/env bash
# deploy/prometheus/rules.yml and deploy/grafana/ringpilot.json, checked with the real tools:
#   - `promtool check rules` on rules.yml;
#   - `promtool test rules` on rules_test.yml (series that fire each alert, and some that
#     must not), and every alert of rules.yml has a test there;
#   - the dashboard is valid JSON and every panel query is valid PromQL (the queries, with
#     the Grafana variables filled in, are checked by `promtool check rules`);
#   - a real Prometheus server (loopback, temp storage) loads rules.yml: /api/v1/rules lists
#     every alert and recording rule, all healthy after their first evaluation.
# Needs neither the built binaries nor a job, unlike the other integration tests.
#
# Usage: tests/integration/prometheus_rules.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# rp_init without its binary checks: this test runs only promtool and prometheus.
RP_TEST=prometheus_rules
RP_START_S=$SECONDS
trap rp_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
RINGPILOT_SOURCE_DIR=${RINGPILOT_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
RP_TMP=$(mktemp -d "${TMPDIR:-/tmp}/ringpilot-it-$RP_TEST.XXXXXX")
for tool in promtool prometheus python3; do
  command -v "$tool" >/dev/null || rp_die "'$tool' not found (Debian packages prometheus, promtool)"
done
readonly RULES=$RINGPILOT_SOURCE_DIR/deploy/prometheus/rules.yml
readonly RULES_TEST=$RINGPILOT_SOURCE_DIR/deploy/prometheus/rules_test.yml
readonly DASHBOARD=$RINGPILOT_SOURCE_DIR/deploy/grafana/ringpilot.json
# Every alert of rules.yml, sorted (as /api/v1/rules lists them); each needs a test.
readonly ALERTS="RingpilotBusBandwidthLow RingpilotCollectiveStalled RingpilotDoctorCheckFailed RingpilotDoctorStale RingpilotGpuClockLimited RingpilotJobDown RingpilotLossNotFinite RingpilotNcclSocketFallback RingpilotNotProgressing RingpilotRestarting RingpilotStraggler"

# --- promtool -------------------------------------------------------------------------------
if promtool check rules "$RULES" >"$RP_TMP/check.out" 2>&1; then
  rp_row "check rules" "rules.yml: $(grep -o 'SUCCESS.*' "$RP_TMP/check.out" | head -1)" PASS
else
  rp_row "check rules" "$(tr '\n' ' ' <"$RP_TMP/check.out" | head -c 400)" FAIL
fi
if (cd "$(dirname "$RULES_TEST")" && promtool test rules "$RULES_TEST") >"$RP_TMP/test.out" 2>&1; then
  rp_row "test rules" "rules_test.yml: SUCCESS" PASS
else
  rp_row "test rules" "$(tr '\n' ' ' <"$RP_TMP/test.out" | head -c 400)" FAIL
  rp_tail "$RP_TMP/test.out" 40
fi
defined=$(grep -o 'alert: [A-Za-z]*$' "$RULES" | cut -d' ' -f2 | sort | tr '\n' ' ')
if [[ "$defined" == "$ALERTS " ]]; then
  rp_row "alert list" "rules.yml defines exactly the $(wc -w <<<"$ALERTS") alerts this test knows" PASS
else
  rp_row "alert list" "rules.yml defines: $defined; this test knows: $ALERTS" FAIL
fi
for alert in $ALERTS; do
  if grep -q "alert: $alert\$" "$RULES" && grep -q "alertname: $alert\$" "$RULES_TEST"; then
    rp_row "alert $alert" "defined and unit-tested" PASS
  else
    rp_row "alert $alert" "missing from rules.yml or rules_test.yml" FAIL
  fi
done

# --- Grafana dashboard ----------------------------------------------------------------------
panel_rules=$RP_TMP/panel_rules.yml
if python3 - "$DASHBOARD" "$panel_rules" >"$RP_TMP/dash.out" 2>&1 <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
rules = []
for p in d["panels"]:
    for t in p["targets"]:
        e = t["expr"].replace("$__rate_interval", "1m").replace("$job", "j").replace("$rank", ".*")
        rules.append({"record": "panel_%d_%s" % (p["id"], t["refId"]), "expr": e})
with open(sys.argv[2], "w") as f:
    json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, indent=1)
print("%d panels, %d queries" % (len(d["panels"]), len(rules)))
PY
  if promtool check rules "$panel_rules" >"$RP_TMP/panel_check.out" 2>&1; then
    rp_row "dashboard" "valid JSON, $(cat "$RP_TMP/dash.out"), all valid PromQL" PASS
  else
    rp_row "dashboard" "a panel query is not valid PromQL: $(tr '\n' ' ' <"$RP_TMP/panel_check.out" | head -c 400)" FAIL
  fi
else
  rp_row "dashboard" "$DASHBOARD: $(tail -1 "$RP_TMP/dash.out")" FAIL
fi

# --- a real Prometheus server loads the rules ----------------------------------------------
prom_port=$(rp_free_ports 1)
prom_dir=$RP_TMP/prometheus
mkdir -p "$prom_dir/data"
cat >"$prom_dir/prometheus.yml" <<YAML
global: {scrape_interval: 15s, evaluation_interval: 1s}
rule_files: ['$RULES']
YAML
prometheus --config.file="$prom_dir/prometheus.yml" --storage.tsdb.path="$prom_dir/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$prom_dir/prometheus.log" 2>&1 &
prom_pid=$!
rp_on_exit "kill $prom_pid 2>/dev/null; wait $prom_pid 2>/dev/null || true"
loaded=""
for ((i = 0; i < 120; i++)); do
  if loaded=$(python3 - "http://127.0.0.1:$prom_port/api/v1/rules" <<'PY'
import json, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=3) as r:
        d = json.load(r)
except Exception:
    sys.exit(1)
rules = [r for g in d["data"]["groups"] for r in g["rules"]]
if not rules or any(r.get("health") == "unknown" for r in rules):
    sys.exit(1)  # not every rule has been evaluated yet
bad = [r["name"] for r in rules if r.get("health") != "ok"]
alerts = sorted(r["name"] for r in rules if r["type"] == "alerting")
print("%d recording rules, alerts %s%s" % (len(rules) - len(alerts), ",".join(alerts),
                                           "; unhealthy: " + ",".join(bad) if bad else ""))
PY
  ); then
    break
  fi
  kill -0 "$prom_pid" 2>/dev/null || break
  sleep 0.5
done
if [[ $loaded == *"alerts ${ALERTS// /,}" ]]; then
  rp_row "prometheus" "loaded rules.yml: $loaded" PASS
else
  rp_row "prometheus" "rules not loaded and healthy within 60 s: ${loaded:-no answer}" FAIL
  rp_tail "$prom_dir/prometheus.log" 10
fi

rp_finish
