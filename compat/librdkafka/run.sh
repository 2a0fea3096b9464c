#!/usr/bin/env bash
# Run librdkafka's own regression test suite (tests/0nnn-*.c, the `test-runner` binary)
# against a pydmq broker. See compat/librdkafka/README.md.
#
#   compat/librdkafka/run.sh                 # = --allowed: the CI subset in tests.allow
#   compat/librdkafka/run.sh --all           # every test number that talks to a broker
#   compat/librdkafka/run.sh --tests 0001,0012
#   compat/librdkafka/run.sh --build-only    # fetch + build, run nothing
#
# Options:
#   --allowed | --all | --tests LIST   which tests (LIST: comma-separated 4-digit numbers)
#   --jobs N          run N test-runner processes at once (default 1)
#   --timeout SEC     hard wall-clock limit per test number (default 240)
#   --bootstrap H:P   don't start pydmq; aim the suite at this broker (e.g. the reference
#                     Kafka from compat/kafka/start.sh). Tests of the `noautocreate`
#                     scenario are then reported as skipped, unless:
#   --bootstrap-noautocreate H:P   an external broker with auto.create.topics.enable=false
#                     for the `noautocreate` scenario (with --bootstrap)
#   --quick           pass -Q ("quick mode", as the suite's own `make quick` does): fewer
#                     messages, but every plain SUB_TEST() is then skipped, so the default
#                     is the full-size run
#   --local           also run the suite's broker-less tests (mock cluster / no broker);
#                     they don't exercise pydmq, so they are off by default
#   --keep            keep the run directory (broker logs, per-test logs) even on success
#
# Environment:
#   PYDMQ_WORK            work dir for source, build and runs (default /tmp/pydmq-compat)
#   TEST_KAFKA_VERSION    broker version the suite gates tests on (default 4.0.0)
#   LIBRDKAFKA_TIMEOUT_MULTIPLIER  test.timeout.multiplier in test.conf (default 1)
#
# The librdkafka sources come from Debian's source package (`apt-get source librdkafka`,
# bookworm: 2.0.2); a deb-src entry is added to /etc/apt/sources.list.d/ if none exists.
# Prints one line per test number and finally "N passed, M failed, K skipped".
# Exit status: 0 when nothing failed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="${PYDMQ_WORK:-/tmp/pydmq-compat}/librdkafka"
py="${PYDMQ_PYTHON:-$root/.venv/bin/python}"

mode=allowed
tests_arg=""
jobs=1
per_test_timeout=240
bootstrap=""
bootstrap_noauto=""
quick=0
with_local=0
keep=0
build_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --allowed) mode=allowed ;;
        --all) mode=all ;;
        --tests) mode=list; tests_arg="$2"; shift ;;
        --jobs) jobs="$2"; shift ;;
        --timeout) per_test_timeout="$2"; shift ;;
        --bootstrap) bootstrap="$2"; shift ;;
        --bootstrap-noautocreate) bootstrap_noauto="$2"; shift ;;
        --quick) quick=1 ;;
        --local) with_local=1 ;;
        --keep) keep=1 ;;
        --build-only) build_only=1 ;;
        -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '==> librdkafka: %s\n' "$*" >&2; }
die() { printf '==> librdkafka: ERROR: %s\n' "$*" >&2; exit 2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
    else die "need root (or sudo) to run: $*"; fi
}

# ---------------------------------------------------------------- source + build
build_deps=(build-essential python3 liblz4-dev libsasl2-dev libssl-dev libzstd-dev
            rapidjson-dev zlib1g-dev dpkg-dev)

ensure_deb_src() {
    if apt-cache showsrc librdkafka 2>/dev/null | grep -q '^Package: librdkafka'; then
        return
    fi
    local list=/etc/apt/sources.list.d/pydmq-deb-src.sources
    say "adding deb-src entries ($list)"
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        # Same mirrors/suites/keys as the machine's binary entries (deb822 format).
        sed -E 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
            | as_root tee "$list" >/dev/null
    elif grep -qsE '^deb ' /etc/apt/sources.list; then
        grep -E '^deb ' /etc/apt/sources.list | sed -E 's/^deb /deb-src /' \
            | as_root tee /etc/apt/sources.list.d/pydmq-deb-src.list >/dev/null
    else
        as_root tee "$list" >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    say "apt-get update"
    as_root apt-get update -qq || die "apt-get update failed"
}

ensure_build_deps() {
    local missing=() p
    for p in "${build_deps[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return
    say "installing build deps: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
        as_root apt-get update -qq
        as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
            || die "could not install ${missing[*]}"
    }
}

srcdir=""
ensure_source() {
    srcdir="$(ls -d "$work"/librdkafka-*/ 2>/dev/null | head -n1)"
    srcdir="${srcdir%/}"
    if [ -n "$srcdir" ] && [ -f "$srcdir/tests/test.c" ]; then
        return
    fi
    ensure_deb_src
    mkdir -p "$work"
    say "apt-get source librdkafka -> $work"
    (cd "$work" && apt-get source -qq librdkafka >/dev/null 2>"$work/apt-source.log") \
        || { cat "$work/apt-source.log" >&2; die "apt-get source librdkafka failed"; }
    srcdir="$(ls -d "$work"/librdkafka-*/ | head -n1)"
    srcdir="${srcdir%/}"
}

ensure_build() {
    local stamp="$srcdir/.pydmq-built"
    if [ -f "$stamp" ] && [ -x "$srcdir/tests/test-runner" ]; then
        return
    fi
    ensure_build_deps
    local t0=$SECONDS log="$work/build.log"
    say "building librdkafka + tests in $srcdir (log: $log; a few minutes on 2 cores)"
    (
        set -e
        cd "$srcdir"
        [ -f Makefile.config ] || ./configure --disable-curl
        make -j"$(nproc)" -C src
        make -j"$(nproc)" -C src-cpp
        make -j"$(nproc)" -C tests build
    ) >"$log" 2>&1 || { tail -n 40 "$log" >&2; die "build failed (see $log)"; }
    touch "$stamp"
    say "build done in $((SECONDS - t0))s"
}

ensure_source
ensure_build
[ "$build_only" -eq 1 ] && { say "built: $srcdir/tests/test-runner"; exit 0; }
testdir="$srcdir/tests"

# ---------------------------------------------------------------- test catalogue
# "<name> <local 0|1> <manual 0|1> <scenario>" for every entry of the suite's test table.
catalogue="$(python3 - "$testdir/test.c" <<'EOF'
import re, sys
src = open(sys.argv[1]).read()
table = src[src.index("struct test tests[] = {"):]
table = table[:table.index("{NULL}")]
for m in re.finditer(r"_TEST\(\s*(\d{4}_\w+)\s*,\s*([^,)]*)(.*?)\)\s*,\s*(?=_TEST|#|$)", table, re.S):
    name, flags, rest = m.group(1), m.group(2), m.group(3)
    sc = re.search(r'\.scenario\s*=\s*"([^"]*)"', rest)
    print(name, int("TEST_F_LOCAL" in flags), int("TEST_F_MANUAL" in flags),
          sc.group(1) if sc else "default")
EOF
)" || die "cannot parse $testdir/test.c"

# Test numbers with at least one broker (non-local, non-manual) sub-test.
all_numbers() {
    awk -v loc="$with_local" '$3 == 0 && ($2 == 0 || loc == 1) { print substr($1, 1, 4) }' \
        <<<"$catalogue" | sort -u
}
needs_noautocreate() {
    awk -v n="$1" 'substr($1,1,4) == n && $4 ~ /noautocreate/ && $2 == 0 { f=1 } END { exit !f }' \
        <<<"$catalogue"
}
has_default() {
    awk -v n="$1" 'substr($1,1,4) == n && $4 ~ /default/ && $3 == 0 { f=1 } END { exit !f }' \
        <<<"$catalogue"
}

case "$mode" in
    all) selected="$(all_numbers)" ;;
    allowed)
        [ -f "$here/tests.allow" ] || die "missing $here/tests.allow"
        selected="$(sed -E 's/#.*//; s/[[:space:]]+//g' "$here/tests.allow" | grep -E '^[0-9]{4}$')" ;;
    list) selected="$(tr ', ' '\n\n' <<<"$tests_arg" | grep -E '^[0-9]{4}$')" ;;
esac
[ -n "$selected" ] || die "no tests selected"

# ---------------------------------------------------------------- broker(s)
run_dir="$(mktemp -d "${PYDMQ_WORK:-/tmp/pydmq-compat}/librdkafka-run.XXXXXX")"
mkdir -p "$run_dir/logs"
broker_pids=()

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

started_bs=""
start_broker() { # name extra-overrides... ; sets started_bs=host:port (no subshell: keeps the pid)
    local name="$1"; shift
    local port; port="$(free_port)"
    local args=(-m pydmq serve --listeners "PLAINTEXT://127.0.0.1:$port"
                --log-dirs "$run_dir/$name-data" --http-listener "http://127.0.0.1:0"
                -o num.partitions=4 -o group.initial.rebalance.delay.ms=0
                -o offsets.topic.replication.factor=1)
    local o
    for o in "$@"; do args+=(-o "$o"); done
    "$py" "${args[@]}" >"$run_dir/$name-broker.log" 2>&1 &
    local pid=$!
    broker_pids+=("$pid")
    local i
    for i in $(seq 1 150); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            started_bs="127.0.0.1:$port"; return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    tail -n 30 "$run_dir/$name-broker.log" >&2
    die "pydmq broker '$name' did not start"
}

cleanup() {
    local pid
    for pid in "${broker_pids[@]}"; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

write_conf() { # file bootstrap
    cat >"$1" <<EOF
# written by compat/librdkafka/run.sh
bootstrap.servers=$2
test.timeout.multiplier=${LIBRDKAFKA_TIMEOUT_MULTIPLIER:-1}
EOF
}

noauto_needed=0
for n in $selected; do needs_noautocreate "$n" && noauto_needed=1; done

if [ -n "$bootstrap" ]; then
    default_bs="$bootstrap"; noauto_bs="$bootstrap_noauto"
    say "using external broker $bootstrap${noauto_bs:+ (noautocreate scenario: $noauto_bs)}"
else
    start_broker default; default_bs="$started_bs"
    say "pydmq broker (default scenario) on $default_bs, pid ${broker_pids[0]}"
    noauto_bs=""
    if [ "$noauto_needed" -eq 1 ]; then
        start_broker noautocreate auto.create.topics.enable=false; noauto_bs="$started_bs"
        say "pydmq broker (noautocreate scenario) on $noauto_bs, pid ${broker_pids[1]}"
    fi
fi
# The suite reads test.conf (RDKAFKA_TEST_CONF points it at the per-run copy so that
# concurrent runs don't share one file); also left in tests/test.conf for manual runs.
write_conf "$run_dir/test.conf" "$default_bs"
cp "$run_dir/test.conf" "$testdir/test.conf"
[ -n "$noauto_bs" ] && write_conf "$run_dir/test-noautocreate.conf" "$noauto_bs"

# Some tests (0044 0045 0052 0069 0077 0107 0112) call $KAFKA_PATH/bin/kafka-topics.sh
# --bootstrap-server $BROKERS. Provide one: Apache Kafka's TopicCommand from the Maven-resolved
# jars of compat/kafka (resolved into the work dir if compat/kafka/dist is absent).
setup_kafka_topics() { # bootstrap
    local dist="$root/compat/kafka/dist"
    command -v java >/dev/null 2>&1 || { say "no java: kafka-topics.sh tests will fail"; return; }
    if ! ls "$dist"/kafka-tools-*.jar >/dev/null 2>&1; then
        dist="$work/kafka-dist"
        if ! ls "$dist"/kafka-tools-*.jar >/dev/null 2>&1; then
            say "resolving Apache Kafka tools jars (compat/kafka/pom.xml) into $dist"
            mvn -B -q -f "$root/compat/kafka/pom.xml" dependency:copy-dependencies \
                -DoutputDirectory="$dist" -DincludeScope=runtime >&2 \
                || { say "could not resolve Kafka jars: kafka-topics.sh tests will fail"; return; }
        fi
    fi
    mkdir -p "$work/kafka-path/bin"
    cat >"$work/kafka-path/bin/kafka-topics.sh" <<EOF
#!/bin/sh
# generated by compat/librdkafka/run.sh: Apache Kafka's kafka-topics tool from Maven jars
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \\
    -cp "$dist/*" org.apache.kafka.tools.TopicCommand "\$@"
EOF
    chmod +x "$work/kafka-path/bin/kafka-topics.sh"
    export KAFKA_PATH="$work/kafka-path" BROKERS="$1"
}
setup_kafka_topics "$default_bs"

export TEST_KAFKA_VERSION="${TEST_KAFKA_VERSION:-4.0.0}"
export LD_LIBRARY_PATH="$srcdir/src:$srcdir/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RDKAFKA_GITVER="debian-$(basename "$srcdir")"
runner_flags=(-p1)
[ "$quick" -eq 1 ] && runner_flags+=(-Q)
[ "$with_local" -eq 0 ] && runner_flags+=(-L)

# ---------------------------------------------------------------- run
# One test-runner process per (test number, scenario); the verdict is read from the
# runner's own summary table ("| 0001_multiobj | PASSED | ...").
run_one() { # number scenario conf -> prints "STATUS detail"
    local n="$1" scen="$2" conf="$3" log="$run_dir/logs/$1-$2.log" rc t0=$SECONDS
    local brokers="$default_bs"
    [ "$scen" = noautocreate ] && brokers="$noauto_bs"
    (cd "$testdir" && TESTS="$n" TEST_SCENARIO="$scen" RDKAFKA_TEST_CONF="$conf" BROKERS="$brokers" \
        timeout -k 10 "$per_test_timeout" ./test-runner "${runner_flags[@]}") >"$log" 2>&1
    rc=$?
    local plain rows why
    plain="$(sed -E 's/\x1b\[[0-9;]*m//g' "$log")"
    rows="$(grep -E "^\| ${n}_[A-Za-z0-9_]+ +\| +[A-Z]+ \|" <<<"$plain" \
            | awk -F'|' '{gsub(/ /,"",$2); gsub(/ /,"",$3); print $2, $3}')"
    # First failure reported by the suite: the line after '### Test "x" failed at ...: ###'.
    why="$(grep -A1 -m1 -E '^### Test ".*" failed at' <<<"$plain" \
           | sed -E 's/^### Test "([^"]*)" failed at ([^:]*:[0-9]+):.*/\1 @\2:/' | paste -sd' ' | cut -c1-220)"
    if [ $((SECONDS - t0)) -ge "$per_test_timeout" ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
        echo "FAILED timeout after ${per_test_timeout}s ${why}"; return
    fi
    if grep -qE ' (FAILED|RUNNING)$' <<<"$rows"; then
        echo "FAILED [$scen] ${why:-$(grep -E ' (FAILED|RUNNING)$' <<<"$rows" | cut -d' ' -f1 | paste -sd,)}"; return
    fi
    if [ "$rc" -ne 0 ] || [ -n "$why" ]; then echo "FAILED [$scen] exit status $rc ${why}"; return; fi
    if grep -q ' PASSED$' <<<"$rows"; then
        echo "PASSED $(grep -c ' PASSED$' <<<"$rows") sub-test(s)"; return
    fi
    echo "SKIPPED $(grep -m1 -E 'SKIPPING TEST' <<<"$plain" | sed -E 's/.*SKIPPING TEST: *//' | cut -c1-100)"
}

run_number() { # number -> writes one result line
    local n="$1" t0=$SECONDS verdicts=() v
    if has_default "$n"; then verdicts+=("$(run_one "$n" default "$run_dir/test.conf")"); fi
    if needs_noautocreate "$n"; then
        if [ -n "$noauto_bs" ]; then
            verdicts+=("$(run_one "$n" noautocreate "$run_dir/test-noautocreate.conf")")
        else
            verdicts+=("SKIPPED noautocreate scenario needs a broker without topic auto-creation")
        fi
    fi
    local status=SKIPPED detail=""
    for v in "${verdicts[@]}"; do
        case "$v" in
            FAILED*) status=FAILED; detail="${v#FAILED }" ;;
            PASSED*) [ "$status" = SKIPPED ] && { status=PASSED; detail="${v#PASSED }"; } ;;
            SKIPPED*) [ "$status" = SKIPPED ] && detail="${v#SKIPPED }" ;;
        esac
    done
    printf '%-7s %s %4ds  %s\n' "$status" "$n" "$((SECONDS - t0))" "$detail"
}
export -f run_one run_number has_default needs_noautocreate
export catalogue run_dir testdir per_test_timeout noauto_bs default_bs
export runner_flags_str="${runner_flags[*]}"

total_t0=$SECONDS
count="$(wc -w <<<"$selected")"
say "running $count test number(s), $jobs at a time, ${per_test_timeout}s limit each," \
    "runner flags: ${runner_flags[*]}, TEST_KAFKA_VERSION=$TEST_KAFKA_VERSION"
say "logs: $run_dir/logs"
results="$run_dir/results.txt"
# Arrays don't cross `export -f`; rebuild runner_flags inside the workers.
printf '%s\n' $selected | xargs -P "$jobs" -I{} bash -c \
    'runner_flags=($runner_flags_str); run_number "$1"' _ {} | tee "$results"

passed=$(grep -c '^PASSED' "$results")
failed=$(grep -c '^FAILED' "$results")
skipped=$(grep -c '^SKIPPED' "$results")
if [ "$failed" -gt 0 ]; then
    echo "failed: $(grep '^FAILED' "$results" | awk '{print $2}' | sort | paste -sd' ')"
fi
echo "$passed passed, $failed failed, $skipped skipped (of $count) in $((SECONDS - total_t0))s"
cp "$results" "$work/last-results.txt"
if [ "$failed" -eq 0 ] && [ "$keep" -eq 0 ]; then
    rm -rf "$run_dir"
else
    say "run directory kept: $run_dir"
fi
[ "$failed" -eq 0 ]
