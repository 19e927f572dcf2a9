#!/usr/bin/env bash
# deploy/: the Prometheus alerts pass `promtool check rules` and their unit
# tests (every alert fires on the series that should trigger it, and not
# before), every metric the alerts and the Grafana dashboard use exists in a
# live `nibble serve`'s /metrics, the dashboard is valid JSON, the k8s
# manifests parse with their probes on /health, and fleet.sh fills the
# template deploy/haproxy/nibble.cfg into a config that `haproxy -c` accepts
# for remote replicas in each mode (and refuses a template it cannot fill).
# The promtool and haproxy parts skip (the rest still runs) when absent; the
# whole test exits 77 when neither is installed.
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
DEP=$HERE/../../deploy
. "$HERE/../lib/check.sh"
command -v curl >/dev/null && command -v python3 >/dev/null || { echo "SKIP: curl/python3 missing"; exit 77; }
if ! command -v promtool >/dev/null && ! command -v haproxy >/dev/null; then
  echo "SKIP: neither promtool (Debian prometheus) nor haproxy installed (scripts/deps.sh)"; exit 77
fi
unset NIBBLE_API_KEY

if command -v promtool >/dev/null; then
  check "promtool check rules deploy/prometheus/alerts.yml" 'promtool check rules "$DEP/prometheus/alerts.yml" >"$tmp/pc" 2>&1 || { cat "$tmp/pc"; false; }'
  check "promtool test rules: every alert fires when it should" \
    '(cd "$DEP/prometheus" && promtool test rules alerts_test.yml) >"$tmp/pt" 2>&1 || { cat "$tmp/pt"; false; }'
else
  echo "skip: promtool not installed (Debian prometheus)"
fi

# a live server's /metrics after one request (histograms then have samples; startup_seconds is set)
"$BIN" serve --port 0 --max-model-len 64 -t 1 >"$tmp/s.log" 2>&1 &
PID=$!; wait_ready "$PID" "$tmp/s.log"
curl -s -m 30 "http://127.0.0.1:$PORT/v1/completions" -d '{"prompt":"hi","max_tokens":3}' >/dev/null
curl -s -m 10 "http://127.0.0.1:$PORT/metrics" >"$tmp/metrics"
kill -TERM $PID; wait $PID
python3 - "$tmp/metrics" "$DEP/grafana/nibble.json" "$DEP/prometheus/alerts.yml" <<'PY' >"$tmp/names" 2>&1
import json, re, sys
exposed = set()
for line in open(sys.argv[1]):
    if line.startswith("# TYPE "):
        _, _, name, typ = line.split()
        exposed.add(name)
        if typ == "histogram":
            exposed.update(name + s for s in ("_bucket", "_sum", "_count"))
    elif line.strip() and not line.startswith("#"):
        exposed.add(re.split(r"[{ ]", line, 1)[0])
dash = json.load(open(sys.argv[2]))
exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
names = lambda text: set(re.findall(r"nibble:[a-zA-Z0-9_]+", text))
used_d = set().union(*(names(e) for e in exprs))
used_a = names(open(sys.argv[3]).read())
missing = sorted((used_d | used_a) - exposed)
print("dashboard: %d panels, %d metrics; alerts: %d metrics; missing from /metrics: %s" % (
    len(dash["panels"]), len(used_d), len(used_a), missing or "none"))
sys.exit(1 if missing or len(used_d) < 10 else 0)
PY
check "$(tail -n 1 "$tmp/names")" '[ $? -eq 0 ] && grep -q "missing from /metrics: none" "$tmp/names"'
check "/metrics has the cold-start phases, HTTP classes, abort reasons and the TPOT histogram" \
  'for p in read repack kv_alloc warmup total; do grep -q "nibble:startup_seconds{.*phase=\"$p\"}" "$tmp/metrics" || exit 1; done
   grep -q "nibble:http_responses_total{.*code=\"2xx\"} [1-9]" "$tmp/metrics" &&
   grep -q "nibble:request_aborts_total{.*reason=\"client_disconnect\"}" "$tmp/metrics" &&
   grep -q "nibble:request_time_per_output_token_seconds_count{.*} 1" "$tmp/metrics"'

python3 - "$DEP/k8s/nibble.yaml" <<'PY' >"$tmp/k8s" 2>&1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = {d["kind"]: d for d in docs}
c = kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]
for p in ("startupProbe", "readinessProbe", "livenessProbe"):
    assert c[p]["httpGet"]["path"] == "/health", p
assert "Service" in kinds
grace = kinds["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
st = int(c["args"][c["args"].index("--shutdown-timeout") + 1])
assert grace > st + 5, (grace, st)
print("k8s: Deployment + Service, three probes on /health, grace %d s > shutdown-timeout %d s + preStop" % (grace, st))
PY
check "$(tail -n 1 "$tmp/k8s")" 'grep -q "^k8s: Deployment" "$tmp/k8s"'

# The template: every section on, nothing of the template syntax is left;
# fleet.sh fills it without haproxy installed too (then it only warns).
ALL="--blue-servers 10.0.0.1:8080,10.0.0.2:8080 --green-servers 10.0.0.3:8080 --long-servers 10.0.0.9:8080
     --balance hash --hash-balance-factor 150 --stats-bind 127.0.0.1:9001 --bind 127.0.0.1:8000"
# shellcheck disable=SC2086
bash "$DEP/fleet.sh" render --dir "$tmp/all" $ALL >"$tmp/all.out" 2>"$tmp/all.err"; rc=$?
check "fleet.sh render fills deploy/haproxy/nibble.cfg: no placeholder, directive or template comment left" \
  '[ $rc -eq 0 ] && [ -s "$tmp/all/haproxy.cfg" ] && ! grep -qE "\{\{|\}\}|^#@|^##" "$tmp/all/haproxy.cfg" || { cat "$tmp/all.err"; false; }'
check "the filled template has every pool, the threshold, the ports and the balance mode" \
  'grep -q "^backend be_green" "$tmp/all/haproxy.cfg" && grep -q "^backend be_long" "$tmp/all/haproxy.cfg" &&
   grep -q "acl is_long req.body_size gt 16384" "$tmp/all/haproxy.cfg" && grep -q "bind 127.0.0.1:9001" "$tmp/all/haproxy.cfg" &&
   grep -q "bind 127.0.0.1:8000" "$tmp/all/haproxy.cfg" && grep -q "hash-balance-factor 150" "$tmp/all/haproxy.cfg" &&
   grep -q "server lr1 10.0.0.9:8080" "$tmp/all/haproxy.cfg" && cmp -s "$tmp/all.out" "$tmp/all/haproxy.cfg"'
sed 's/{{BIND}}/{{NO_SUCH_VALUE}}/' "$DEP/haproxy/nibble.cfg" >"$tmp/bad.cfg"
bash "$DEP/fleet.sh" render --dir "$tmp/bad" --blue-servers 10.0.0.1:8080 --template "$tmp/bad.cfg" >/dev/null 2>"$tmp/bad.err"; rc=$?
check "a template with an unknown placeholder is refused (exit 2, naming it and its line)" \
  '[ $rc -eq 2 ] && grep -q "bad.cfg:[0-9]*: unknown placeholder {{NO_SUCH_VALUE}}" "$tmp/bad.err" || { cat "$tmp/bad.err"; false; }'
bash "$DEP/fleet.sh" render --dir "$tmp/bad" --blue-servers 10.0.0.1:8080 --long-threshold 200000 >/dev/null 2>"$tmp/bad.err"; rc=$?
check "--long-threshold above what HAProxy buffers is refused naming the range" \
  '[ $rc -eq 2 ] && grep -q -- "--long-threshold 200000: allowed 1..65536" "$tmp/bad.err"'

if command -v haproxy >/dev/null; then
  check "haproxy -c accepts the template with every section on" \
    'haproxy -c -f "$tmp/all/haproxy.cfg" >"$tmp/hc" 2>&1 || { cat "$tmp/hc"; false; }'
  for mode in "--balance leastconn" "--balance hash --hash-bytes 256 --hash-balance-factor 150" \
              "--long-servers 10.0.0.9:8080 --long-threshold 8192"; do
    # shellcheck disable=SC2086
    bash "$DEP/fleet.sh" render --dir "$tmp/r" --blue-servers 10.0.0.1:8080,10.0.0.2:8080 \
      --green-servers 10.0.0.3:8080 --bind 127.0.0.1:8000 $mode >"$tmp/cfg" 2>&1
    check "fleet.sh render ($mode): haproxy -c accepts it, servers on /health" \
      'grep -q "server br2 10.0.0.2:8080" "$tmp/cfg" && grep -q "option httpchk GET /health" "$tmp/cfg" &&
       haproxy -c -q -f "$tmp/r/haproxy.cfg" || { cat "$tmp/cfg"; false; }'
  done
  check "hash mode hashes the body's first bytes with consistent hashing" \
    'bash "$DEP/fleet.sh" render --dir "$tmp/r" --blue-servers 10.0.0.1:8080 --balance hash --hash-bytes 300 --bind 127.0.0.1:8000 |
       grep -A1 "balance hash req.body,bytes(0,300)" | grep -q "hash-type consistent"'
  check "fleet.sh refuses a bad percentage" '! bash "$DEP/fleet.sh" shift green 101 --dir "$tmp/r" 2>/dev/null'
else
  echo "skip: haproxy not installed"
fi
finish
