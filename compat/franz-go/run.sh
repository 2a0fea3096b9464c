#!/usr/bin/env bash
# Run franz-go's own pkg/kgo tests (the module's *_test.go files, as the Go module proxy serves
# them) against a pydmq broker. See compat/franz-go/README.md.
#
#   compat/franz-go/run.sh                  # = --allowed: the CI subset in tests.allow
#   compat/franz-go/run.sh --all            # every kgo test that talks to a broker
#   compat/franz-go/run.sh --all --local    # ... plus the broker-less unit tests
#   compat/franz-go/run.sh --tests TestGroupETL,TestIssue325
#   compat/franz-go/run.sh --fetch-only     # download the module + build the test binary
#
# Options:
#   --allowed | --all | --tests LIST   which tests (LIST: comma-separated top-level test names)
#   --local           with --all: also the tests that need no broker (they don't exercise pydmq)
#   --jobs N          run N test processes at once (default 1)
#   --timeout SEC     limit per test (go test -timeout; default 300)
#   --records N       KGO_TEST_RECORDS: records the ETL tests produce and chain through three
#                     consumer groups (default 50000; the suite's own default is 500000)
#   --bootstrap H:P   don't start pydmq; aim the suite at this broker (PLAINTEXT, e.g. the
#                     reference Kafka from compat/kafka/start.sh)
#   --scram-seeds H:P --scram USER:PASS   a SASL_PLAINTEXT listener with SCRAM-SHA-256 and
#                     a user on it, for TestSCRAMAuth* (KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM;
#                     with --bootstrap: the pydmq broker run.sh starts has its own SASL
#                     listener; FINDINGS.md has Kafka's setup)
#   --oauth-seeds H:P a SASL_PLAINTEXT listener with OAUTHBEARER, unsecured tokens accepted,
#                     for TestOAuthAuth (KGO_TEST_OAUTH_SEEDS; with --bootstrap, as above)
#   --log-level LVL   KGO_LOG_LEVEL of the clients the tests create: none (default), info, debug
#   --keep            keep the run directory (broker log, one JSON log per test) on success
#
# Environment:
#   FRANZ_GO_VERSION  module version (default: compat/franz-go/VERSION)
#   PYDMQ_WORK        work dir (default /tmp/pydmq-compat); the module cache, build cache, test
#                     binary and runs live in $PYDMQ_WORK/franz-go
#   PYDMQ_PYTHON      interpreter with pydmq (default .venv/bin/python)
#   GOTOOLCHAIN       as the go command reads it: a machine whose Go is older than the module's
#                     `go` line gets that toolchain from the Go module proxy (GOTOOLCHAIN=auto)
#
# The module comes from the Go module proxy (`go get github.com/twmb/franz-go/pkg/kgo@V` in a
# throw-away runner module, whose GOMODCACHE is under the work dir); nothing of franz-go is in
# this repository. Each test runs in its own process of the compiled test binary
# (`go test -c`), so one test that hangs (TestTxnEtl without transactions) costs its own
# timeout and nothing else. Prints one line per test, "PASSED|FAILED|SKIPPED <secs>s <name>
# <kind>  <detail>" (kind: broker or local), then "N passed, M failed, K skipped (of T) in Xs".
# Exit status: 0 when nothing failed; 3 when the module cannot be fetched or built; 4 when
# there is no Go toolchain.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="${PYDMQ_WORK:-/tmp/pydmq-compat}/franz-go"
py="${PYDMQ_PYTHON:-$root/.venv/bin/python}"
version="${FRANZ_GO_VERSION:-$(tr -d '[:space:]' <"$here/VERSION")}"
module=github.com/twmb/franz-go

mode=allowed
tests_arg=""
with_local=0
jobs=1
per_test_timeout=300
records=50000
bootstrap=""
scram_seeds=""
scram=""
oauth_seeds=""
log_level=none
keep=0
fetch_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --allowed) mode=allowed ;;
        --all) mode=all ;;
        --tests) mode=list; tests_arg="$2"; shift ;;
        --local) with_local=1 ;;
        --jobs) jobs="$2"; shift ;;
        --timeout) per_test_timeout="$2"; shift ;;
        --records) records="$2"; shift ;;
        --bootstrap) bootstrap="$2"; shift ;;
        --scram-seeds) scram_seeds="$2"; shift ;;
        --scram) scram="$2"; shift ;;
        --oauth-seeds) oauth_seeds="$2"; shift ;;
        --log-level) log_level="$2"; shift ;;
        --keep) keep=1 ;;
        --fetch-only) fetch_only=1 ;;
        -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '==> franz-go: %s\n' "$*" >&2; }
# shellcheck source=../suite_summary.sh
source "$here/../suite_summary.sh"
die() { printf '==> franz-go: ERROR: %s\n' "$*" >&2; exit 2; }
die_fetch() { printf '==> franz-go: FETCH FAILED: %s\n' "$*" >&2; exit 3; }

# ---------------------------------------------------------------- module + test binary
suite=franz-go
# shellcheck source=../go_suite.sh
source "$here/../go_suite.sh"
go_setup "$work"
bin="$work/kgo-$version.test"
go_build_test_binary "$module" "$version" "$module/pkg/kgo" "$bin"
srcdir="$(go_module_dir "$module" "$version")" || die "go list -m $module failed"
[ "$fetch_only" -eq 1 ] && { say "ready: $bin (sources $srcdir)"; exit 0; }

# ---------------------------------------------------------------- test catalogue
# "<name> broker|local" for every top-level Test function of pkg/kgo. A test is "broker" when
# it reaches, directly or through the package's test helpers, what the suite uses to talk to
# a broker (adm, newTestClient, testClientOpts, getSeedBrokers, the SASL seeds).
catalogue="$(python3 - "$srcdir/pkg/kgo" "$("$bin" -test.list '^Test')" <<'EOF'
import pathlib, re, sys
bodies: dict[str, str] = {}
for f in sorted(pathlib.Path(sys.argv[1]).glob("*_test.go")):
    for chunk in re.split(r"(?m)^func ", f.read_text())[1:]:
        m = re.match(r"(?:\([^)]*\)\s*)?(\w+)", chunk)
        if m and m.group(1) != "init":  # the package initializer is never called by name
            bodies[m.group(1)] = bodies.get(m.group(1), "") + chunk
calls = {n: set(re.findall(r"\b(\w+)\s*\(", b)) | set(re.findall(r"\b(scramSeeds|oauthSeeds)\b", b))
         for n, b in bodies.items()}
broker = {"adm", "newTestClient", "testClientOpts", "getSeedBrokers", "scramSeeds", "oauthSeeds"}
grew = True
while grew:
    grew = False
    for name, ids in calls.items():
        if name not in broker and ids & broker:
            broker.add(name)
            grew = True
for name in sys.argv[2].split():
    print(name, "broker" if name in broker else "local")
EOF
)" || die "cannot read the test catalogue"

case "$mode" in
    all) selected="$(awk -v loc="$with_local" '$2 == "broker" || loc == 1 { print $1 }' <<<"$catalogue")" ;;
    allowed | list) selected="$(go_selected_tests "$mode" "$tests_arg")" ;;
esac
[ -n "$selected" ] || die "no tests selected"

# ---------------------------------------------------------------- broker
go_new_run_dir

if [ -n "$bootstrap" ]; then
    bs="$bootstrap"
    say "using external broker $bs"
else
    [ -x "$py" ] || die "no interpreter at $py (create .venv: ./scripts/test --collect-only)"
    free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
    port="$(free_port)"
    sasl_port="$(free_port)"
    # The settings compat/kafka/start.sh gives the reference Kafka: one node, internal topics
    # with replication factor 1, no initial rebalance delay. A second listener speaks SASL as
    # the suite's SASL tests expect (FINDINGS.md has the same for Kafka): SCRAM-SHA-256 with
    # the user made at first start, and OAUTHBEARER with unsecured tokens.
    "$py" -m pydmq serve \
        --listeners "PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$sasl_port" \
        --log-dirs "$run_dir/data" --http-listener "http://127.0.0.1:0" \
        --add-scram "SCRAM-SHA-256=[name=admin,password=admin-secret]" \
        -o sasl.enabled.mechanisms=SCRAM-SHA-256,OAUTHBEARER \
        -o offsets.topic.replication.factor=1 -o group.initial.rebalance.delay.ms=0 \
        >"$run_dir/broker.log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 1 150); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        kill -0 "$broker_pid" 2>/dev/null || { tail -n 30 "$run_dir/broker.log" >&2; die "pydmq broker exited"; }
        sleep 0.1
    done
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { tail -n 30 "$run_dir/broker.log" >&2; die "pydmq broker did not start"; }
    bs="127.0.0.1:$port"
    scram_seeds="127.0.0.1:$sasl_port" scram="admin:admin-secret" oauth_seeds="127.0.0.1:$sasl_port"
    say "pydmq broker on $bs (SASL on $scram_seeds), pid $broker_pid, data $run_dir/data"
fi

# ---------------------------------------------------------------- run
# What the suite reads (helpers_test.go): the seed brokers, the replication factor of the
# topics it creates (one node: 1) and the size of the ETL tests.
export KGO_SEEDS="$bs" KGO_TEST_RF=1 KGO_TEST_RECORDS="$records" KGO_LOG_LEVEL="$log_level"
unset KGO_TEST_CHAOS KGO_TEST_TLS KGO_TEST_SCRAM KGO_TEST_SCRAM_SEEDS KGO_TEST_OAUTH_SEEDS \
    KGO_TEST_UNSAFE KGO_TEST_MAX_TOPIC_PARTS
[ -n "$scram_seeds" ] && export KGO_TEST_SCRAM_SEEDS="$scram_seeds"
[ -n "$scram" ] && export KGO_TEST_SCRAM="$scram"
[ -n "$oauth_seeds" ] && export KGO_TEST_OAUTH_SEEDS="$oauth_seeds"

pkgdir="$srcdir/pkg/kgo"
export -f go_run_one
export catalogue run_dir bin per_test_timeout pkgdir suite

say "franz-go $version pkg/kgo, mode $mode, $(wc -w <<<"$selected") test(s), $jobs at a time," \
    "${per_test_timeout}s each, KGO_TEST_RECORDS=$records; logs: $run_dir/logs"
t0=$SECONDS
results="$run_dir/results.txt"
printf '%s\n' $selected | xargs -P "$jobs" -I{} bash -c 'go_run_one "$1"' _ {} | tee "$results"
elapsed=$((SECONDS - t0))

summarize_run "$results" "$work" "$run_dir" "$keep" "$elapsed"
