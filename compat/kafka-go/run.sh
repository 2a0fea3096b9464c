#!/usr/bin/env bash
# Run segmentio/kafka-go's own tests (the root package's *_test.go files, as the Go module
# proxy serves them) against a pydmq broker, or the reference Kafka. See README.md.
#
#   compat/kafka-go/run.sh                  # = --allowed: the CI subset in tests.allow
#   compat/kafka-go/run.sh --all            # every test of the package
#   compat/kafka-go/run.sh --tests TestClientFetch,TestConn
#   compat/kafka-go/run.sh --all --reference  # the same against Kafka 4.4 (compat/kafka/)
#   compat/kafka-go/run.sh --fetch-only     # download the module + build the test binary
#
# Options:
#   --allowed | --all | --tests LIST   which tests (LIST: comma-separated top-level test names)
#   --reference       run against the reference Apache Kafka (compat/kafka/start.sh), not pydmq
#   --jobs N          run N test processes at once (default 1)
#   --timeout SEC     limit per test (go test -timeout; default 180)
#   --keep            keep the run directory (broker log, one JSON log per test) on success
#
# kafka-go's tests dial localhost:9092 (hard-coded), the address of their docker-compose
# broker. So the run happens in a private network namespace (`unshare --net`, as root, or
# with --map-root-user otherwise): its own loopback, where the broker can take port 9092
# whatever else runs on this machine, and nothing of the tests reaches any other address.
# The module is downloaded and the test binary built before entering it.
#
# Environment:
#   KAFKA_GO_VERSION  module version (default: compat/kafka-go/VERSION)
#   PYDMQ_WORK        work dir (default /tmp/pydmq-compat); caches and runs in $PYDMQ_WORK/kafka-go
#   PYDMQ_PYTHON      interpreter with pydmq (default .venv/bin/python)
#
# Prints one line per test, "PASSED|FAILED|SKIPPED <secs>s <name> <kind>  <detail>" (kind:
# broker or local), then "N passed, M failed, K skipped (of T) in Xs". Exit status: 0 when
# nothing failed; 3 when the module cannot be fetched or built; 4 without a Go toolchain;
# 5 when no network namespace can be made.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="${PYDMQ_WORK:-/tmp/pydmq-compat}/kafka-go"
py="${PYDMQ_PYTHON:-$root/.venv/bin/python}"
version="${KAFKA_GO_VERSION:-$(tr -d '[:space:]' <"$here/VERSION")}"
module=github.com/segmentio/kafka-go
suite=kafka-go

mode=allowed
tests_arg=""
reference=0
jobs=1
per_test_timeout=180
keep=0
fetch_only=0
args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --allowed) mode=allowed ;;
        --all) mode=all ;;
        --tests) mode=list; tests_arg="$2"; shift ;;
        --reference) reference=1 ;;
        --jobs) jobs="$2"; shift ;;
        --timeout) per_test_timeout="$2"; shift ;;
        --keep) keep=1 ;;
        --fetch-only) fetch_only=1 ;;
        -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '==> kafka-go: %s\n' "$*" >&2; }
die() { printf '==> kafka-go: ERROR: %s\n' "$*" >&2; exit 2; }
die_fetch() { printf '==> kafka-go: FETCH FAILED: %s\n' "$*" >&2; exit 3; }
# shellcheck source=../suite_summary.sh
source "$here/../suite_summary.sh"
# shellcheck source=../go_suite.sh
source "$here/../go_suite.sh"

# ---------------------------------------------------------------- module + test binary
go_setup "$work"
bin="$work/kafka-go-$version.test"
if [ -z "${PYDMQ_KAFKA_GO_NETNS:-}" ]; then
    go_build_test_binary "$module" "$version" "$module" "$bin"
    [ "$fetch_only" -eq 1 ] && { say "ready: $bin"; exit 0; }
    # Everything below runs again inside a private network namespace (see the header).
    userns=()
    [ "$(id -u)" -eq 0 ] || userns=(--map-root-user)
    unshare --net "${userns[@]}" true 2>/dev/null \
        || { say "NO NETNS: unshare --net ${userns[*]} failed"; exit 5; }
    PYDMQ_KAFKA_GO_NETNS=1 exec unshare --net "${userns[@]}" -- bash "$0" "${args[@]}"
fi
ip link set lo up 2>/dev/null || python3 - <<'PYEOF' || die "cannot bring up lo in the namespace"
import fcntl, socket, struct
s = socket.socket()
ifreq = struct.pack("16sH", b"lo", 0)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, ifreq))[1]  # SIOCGIFFLAGS
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
PYEOF
pkgdir="$(go_module_dir "$module" "$version")" || die "go list -m $module failed"

# ---------------------------------------------------------------- test catalogue
# "<name> broker|local" for every top-level Test function. A test is "broker" when it
# reaches, directly or through the package's test helpers, the suite's broker address
# (a helper outside the *_test.go files is not followed).
catalogue="$(python3 - "$pkgdir" "$("$bin" -test.list '^Test')" <<'PYEOF'
import pathlib, re, sys
bodies: dict[str, str] = {}
for f in sorted(pathlib.Path(sys.argv[1]).glob("*_test.go")):
    for chunk in re.split(r"(?m)^func ", f.read_text())[1:]:
        m = re.match(r"(?:\([^)]*\)\s*)?(\w+)", chunk)
        if m and m.group(1) != "init":
            bodies[m.group(1)] = bodies.get(m.group(1), "") + chunk
# Every identifier: subtests are often named in a table, not called.
calls = {n: set(re.findall(r"\b(\w+)\b", b)) for n, b in bodies.items()}
# localhost:9092, or "localhost" with the client's default port
broker = {n for n, b in bodies.items() if re.search(r'"localhost(:9092)?"', b)}
grew = True
while grew:
    grew = False
    for name, ids in calls.items():
        if name not in broker and ids & broker:
            broker.add(name)
            grew = True
for name in sys.argv[2].split():
    print(name, "broker" if name in broker else "local")
PYEOF
)" || die "cannot read the test catalogue"

case "$mode" in
    all) selected="$(awk '{ print $1 }' <<<"$catalogue")" ;;
    allowed | list) selected="$(go_selected_tests "$mode" "$tests_arg")" ;;
esac
[ -n "$selected" ] || die "no tests selected"

# ---------------------------------------------------------------- broker
go_new_run_dir

# The docker-compose broker of kafka-go's CI: PLAINTEXT on localhost:9092 and SASL_PLAINTEXT
# on localhost:9093 (PLAIN user adminplain, SCRAM user adminscram), auto-created topics,
# 200 MB messages, an authorizer that allows everything without ACLs (its ACL tests).
jaas='org.apache.kafka.common.security.plain.PlainLoginModule required username="adminplain" password="admin-secret" user_adminplain="admin-secret";'
scram=("SCRAM-SHA-256=[name=adminscram,password=admin-secret-256]"
       "SCRAM-SHA-512=[name=adminscram,password=admin-secret-512]")
authorizer=org.apache.kafka.metadata.authorizer.StandardAuthorizer
if [ "$reference" -eq 1 ]; then
    printf '%s\n' "listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094" \
        "advertised.listeners=PLAINTEXT://localhost:9092,SASL_PLAINTEXT://localhost:9093" \
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT" \
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" \
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=$jaas" \
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;" \
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;" \
        "message.max.bytes=200000000" "group.initial.rebalance.delay.ms=0" \
        "allow.everyone.if.no.acl.found=true" "authorizer.class.name=$authorizer" \
        >"$run_dir/extra.properties"
    printf -- '--add-scram\n%s\n' "${scram[@]}" >"$run_dir/format.args"
    KAFKA_EXTRA_PROPS_FILE="$run_dir/extra.properties" KAFKA_FORMAT_ARGS_FILE="$run_dir/format.args" \
        bash "$root/compat/kafka/start.sh" 9092 "$run_dir/data" 9094 >"$run_dir/broker.log" 2>&1 &
    broker_pid=$!
    who="Kafka 4.4 (compat/kafka)"
else
    [ -x "$py" ] || die "no interpreter at $py (create .venv: ./scripts/test --collect-only)"
    "$py" -m pydmq serve \
        --listeners PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093 \
        --advertised-listeners PLAINTEXT://localhost:9092,SASL_PLAINTEXT://localhost:9093 \
        --log-dirs "$run_dir/data" \
        -o offsets.topic.replication.factor=1 -o group.initial.rebalance.delay.ms=0 \
        -o message.max.bytes=200000000 \
        -o sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 \
        -o "listener.name.sasl_plaintext.plain.sasl.jaas.config=$jaas" \
        -o allow.everyone.if.no.acl.found=true -o "authorizer.class.name=$authorizer" \
        -o pydmq.http.listeners= \
        --add-scram "${scram[0]}" --add-scram "${scram[1]}" >"$run_dir/broker.log" 2>&1 &
    broker_pid=$!
    who=pydmq
fi
ready=0
for _ in $(seq 1 600); do
    if "$py" - <<'PYEOF' 2>/dev/null; then ready=1; break; fi
import socket, struct
# Serving means answering ApiVersions (a JVM binds before it answers).
s = socket.create_connection(("127.0.0.1", 9092), timeout=1)
s.sendall(struct.pack(">ihhih", 14, 18, 0, 1, 4) + b"test")
assert len(s.recv(64)) > 4
PYEOF
    kill -0 "$broker_pid" 2>/dev/null || { tail -n 30 "$run_dir/broker.log" >&2; die "$who exited"; }
    sleep 0.2
done
[ "$ready" -eq 1 ] || { tail -n 30 "$run_dir/broker.log" >&2; die "$who did not start"; }
say "$who on localhost:9092 (private network namespace), pid $broker_pid, data $run_dir/data"

# ---------------------------------------------------------------- run
# The version the suite's version gates compare with (testing/version.go): unset, every
# gated test returns at once and passes without running.
export KAFKA_VERSION=4.0.0
export -f go_run_one
export catalogue run_dir bin per_test_timeout pkgdir suite

say "kafka-go $version, mode $mode, $(wc -w <<<"$selected") test(s), $jobs at a time," \
    "${per_test_timeout}s each, KAFKA_VERSION=$KAFKA_VERSION; logs: $run_dir/logs"
t0=$SECONDS
results="$run_dir/results.txt"
printf '%s\n' $selected | xargs -P "$jobs" -I{} bash -c 'go_run_one "$1"' _ {} | tee "$results"
elapsed=$((SECONDS - t0))

summarize_run "$results" "$work" "$run_dir" "$keep" "$elapsed"
