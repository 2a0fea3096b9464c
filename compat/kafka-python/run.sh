#!/usr/bin/env bash
# Run kafka-python's own integration tests (test/integration/ of its PyPI sdist) against a
# pydmq broker. See compat/kafka-python/README.md.
#
#   compat/kafka-python/run.sh                 # = --allowed: the CI subset in tests.allow
#   compat/kafka-python/run.sh --all           # every integration test of the sdist
#   compat/kafka-python/run.sh --tests 'test/integration/test_consumer_integration.py::test_paused'
#   compat/kafka-python/run.sh --all -k admin  # a pytest -k selection
#   compat/kafka-python/run.sh --fetch-only    # download + unpack the sdist, run nothing
#
# Options:
#   --allowed | --all | --tests LIST   which tests (LIST: comma-separated pytest node ids,
#                     relative to the sdist root, as in tests.allow)
#   -k EXPR           pytest -k expression applied on top of the selection
#   --timeout SEC     per-test limit (pytest-timeout; default 120, the suite's own is 300)
#   --bootstrap H:P   don't start pydmq; aim the suite at this broker (PLAINTEXT, e.g. the
#                     reference Kafka from compat/kafka/start.sh)
#   --keep            keep the run directory (broker log, pytest log, junit xml) on success
#   --log-level LVL   level of the client logs pytest captures (the suite's own: DEBUG, the
#                     default except with --allowed, which uses INFO: ~15 % faster)
#   -v                stream pytest's output instead of writing it only to the run directory
#
# Environment:
#   KAFKA_PYTHON_VERSION  sdist version (default: 3.0.12, the kafka-python the project tests with)
#   KAFKA_VERSION         broker version the suite gates tests on (default 4.0.0: pydmq
#                         advertises Kafka 4.0's API ranges)
#   PYDMQ_PYTHON          interpreter with pydmq + pytest (default .venv/bin/python)
#   PYTEST_ADDOPTS        extra pytest options (pytest reads it), e.g. "-o log_level=INFO"
#
# The sdist comes from PyPI (`pip download --no-binary :all: --no-deps kafka-python==V`) and is
# unpacked into build/kafka-python/ (git-ignored); nothing of kafka-python is in this repo.
# Prints one line per test, "PASSED|FAILED|SKIPPED <secs>s <node id>  <reason>", and finally
# "N passed, M failed, K skipped (of T) in Xs". Exit status: 0 when nothing failed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$root/build/kafka-python"
py="${PYDMQ_PYTHON:-$root/.venv/bin/python}"
version="${KAFKA_PYTHON_VERSION:-3.0.12}"

mode=allowed
tests_arg=""
kexpr=""
per_test_timeout=120
bootstrap=""
keep=0
verbose=0
fetch_only=0
log_level=""
while [ $# -gt 0 ]; do
    case "$1" in
        --allowed) mode=allowed ;;
        --all) mode=all ;;
        --tests) mode=list; tests_arg="$2"; shift ;;
        -k) kexpr="$2"; shift ;;
        --timeout) per_test_timeout="$2"; shift ;;
        --bootstrap) bootstrap="$2"; shift ;;
        --keep) keep=1 ;;
        --log-level) log_level="$2"; shift ;;
        -v) verbose=1 ;;
        --fetch-only) fetch_only=1 ;;
        -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '==> kafka-python: %s\n' "$*" >&2; }
# shellcheck source=../suite_summary.sh
source "$here/../suite_summary.sh"
die() { printf '==> kafka-python: ERROR: %s\n' "$*" >&2; exit 2; }
# Exit status 3: the sdist could not be fetched (no network / PyPI unreachable).
die_fetch() { printf '==> kafka-python: FETCH FAILED: %s\n' "$*" >&2; exit 3; }

[ -x "$py" ] || die "no interpreter at $py (create .venv: ./scripts/test --collect-only)"

# ---------------------------------------------------------------- sdist
suite="$work/kafka_python-$version"
ensure_sdist() {
    [ -f "$suite/test/integration/conftest.py" ] && return
    mkdir -p "$work/dl"
    local tarball="$work/dl/kafka_python-$version.tar.gz"
    if [ ! -f "$tarball" ]; then
        say "pip download --no-binary :all: --no-deps kafka-python==$version -> $work/dl"
        "$py" -m pip download --no-binary :all: --no-deps --disable-pip-version-check -q \
            -d "$work/dl" "kafka-python==$version" >"$work/dl/pip.log" 2>&1 \
            || { tail -n 20 "$work/dl/pip.log" >&2; die_fetch "pip download kafka-python==$version failed"; }
    fi
    [ -f "$tarball" ] || die_fetch "pip download did not produce $tarball"
    rm -rf "$suite.tmp" && mkdir -p "$suite.tmp"
    tar -xzf "$tarball" -C "$suite.tmp" || die "cannot unpack $tarball"
    [ -f "$suite.tmp/kafka_python-$version/test/integration/conftest.py" ] \
        || die "$tarball has no test/integration/conftest.py"
    rm -rf "$suite" && mv "$suite.tmp/kafka_python-$version" "$suite" && rmdir "$suite.tmp"
    say "unpacked $suite"
}
ensure_sdist
installed="$("$py" -c 'import importlib.metadata as m; print(m.version("kafka-python"))' 2>/dev/null)"
if [ "$installed" != "$version" ]; then
    say "note: .venv has kafka-python ${installed:-(none)}; the suite runs the sdist's own" \
        "kafka package ($version)"
fi
[ "$fetch_only" -eq 1 ] && { say "sdist ready: $suite"; exit 0; }

# ---------------------------------------------------------------- test dependencies
# The suite's pytest options need pytest-timeout; its compression tests skip themselves
# without the codec modules. The project's test extra normally has all of them already.
missing="$("$py" - <<'EOF'
import importlib.util
need = {"pytest": "pytest", "pytest_timeout": "pytest-timeout", "lz4": "lz4",
        "snappy": "python-snappy", "zstandard": "zstandard"}
print(" ".join(pkg for mod, pkg in need.items() if importlib.util.find_spec(mod) is None))
EOF
)"
if [ -n "$missing" ]; then
    say "pip install $missing"
    "$py" -m pip install --disable-pip-version-check -q $missing >&2 || die "pip install $missing failed"
fi

# ---------------------------------------------------------------- selection
targets=()
selected_ids=()
case "$mode" in
    all) targets=("$suite/test/integration") ;;
    allowed)
        [ -f "$here/tests.allow" ] || die "missing $here/tests.allow"
        mapfile -t selected_ids < <(sed -E 's/#.*//; s/^[[:space:]]+//; s/[[:space:]]+$//' \
            "$here/tests.allow" | grep -v '^$') ;;
    list) mapfile -t selected_ids < <(tr ',' '\n' <<<"$tests_arg" | sed -E 's/^ +| +$//g' | grep -v '^$') ;;
esac
if [ "$mode" != all ]; then
    [ ${#selected_ids[@]} -gt 0 ] || die "no tests selected"
    for id in "${selected_ids[@]}"; do targets+=("$suite/$id"); done
fi

# ---------------------------------------------------------------- broker
mkdir -p "$work/runs"
run_dir="$(mktemp -d "$work/runs/run.XXXXXX")"
broker_pid=""
sasl_pid=""
cleanup() {
    if [ -n "$broker_pid" ]; then
        kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    fi
    if [ -n "$sasl_pid" ]; then
        kill "$sasl_pid" 2>/dev/null && wait "$sasl_pid" 2>/dev/null
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$bootstrap" ]; then
    bs="$bootstrap"
    say "using external broker $bs"
else
    port="$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    # What the suite's own fixture gives its Kafka (see README.md, "Broker configuration"):
    # node id 0, listener also set as advertised.listeners, 4 partitions per auto-created
    # topic, replication factor 1, no initial rebalance delay, and a group.min.session.timeout.ms
    # below the 3000 ms session timeout test_group uses.
    "$py" -m pydmq serve --listeners "PLAINTEXT://127.0.0.1:$port" \
        --advertised-listeners "PLAINTEXT://127.0.0.1:$port" --log-dirs "$run_dir/data" \
        --http-listener "http://127.0.0.1:0" \
        --node-id 0 -o num.partitions=4 -o offsets.topic.replication.factor=1 \
        -o group.initial.rebalance.delay.ms=0 -o group.min.session.timeout.ms=1000 \
        >"$run_dir/broker.log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 1 150); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        kill -0 "$broker_pid" 2>/dev/null || { tail -n 30 "$run_dir/broker.log" >&2; die "pydmq broker exited"; }
        sleep 0.1
    done
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { tail -n 30 "$run_dir/broker.log" >&2; die "pydmq broker did not start"; }
    bs="127.0.0.1:$port"
    say "pydmq broker on $bs, pid $broker_pid, data $run_dir/data"
    # The broker of the SASL tests: a SASL_PLAINTEXT listener with the suite's user (alice,
    # alice-secret; test/integration/fixtures.py) for PLAIN and both SCRAM mechanisms.
    sport="$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    "$py" -m pydmq serve --listeners "SASL_PLAINTEXT://127.0.0.1:$sport" \
        --log-dirs "$run_dir/sasl-data" --node-id 0 -o num.partitions=4 \
        -o offsets.topic.replication.factor=1 -o group.initial.rebalance.delay.ms=0 \
        -o sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 \
        -o 'listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret" user_alice="alice-secret";' \
        --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]' \
        --add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]' \
        >"$run_dir/sasl-broker.log" 2>&1 &
    sasl_pid=$!
    for _ in $(seq 1 150); do
        (exec 3<>"/dev/tcp/127.0.0.1/$sport") 2>/dev/null && break
        kill -0 "$sasl_pid" 2>/dev/null || { tail -n 30 "$run_dir/sasl-broker.log" >&2; die "pydmq SASL broker exited"; }
        sleep 0.1
    done
    export PYDMQ_SASL_BOOTSTRAP="127.0.0.1:$sport"
    say "pydmq SASL_PLAINTEXT broker on $PYDMQ_SASL_BOOTSTRAP, pid $sasl_pid"
fi

# ---------------------------------------------------------------- run
pytest_args=(-m pytest -c "$suite/pyproject.toml" --rootdir "$suite"
             -p pydmq_shim -p no:pydmq -p no:cacheprovider
             --timeout "$per_test_timeout" --timeout-method=signal --junitxml "$run_dir/junit.xml" -q -rN)
[ -n "$kexpr" ] && pytest_args+=(-k "$kexpr")
[ -z "$log_level" ] && [ "$mode" = allowed ] && log_level=INFO
[ -n "$log_level" ] && pytest_args+=(-o "log_level=$log_level")
say "kafka-python $version test/integration, KAFKA_VERSION=${KAFKA_VERSION:-4.0.0}," \
    "mode $mode, ${per_test_timeout}s per test; logs: $run_dir"
t0=$SECONDS
raw="$run_dir/results.raw"
(
    cd "$run_dir" || exit 2
    export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
    export KAFKA_PYTHON_SUITE_DIR="$suite" PYDMQ_BOOTSTRAP="$bs" PYDMQ_RESULTS="$raw"
    export KAFKA_VERSION="${KAFKA_VERSION:-4.0.0}" KAFKA_ROOT="$suite/test"
    unset KAFKA_URI ZOOKEEPER_URI
    if [ "$verbose" -eq 1 ]; then
        "$py" "${pytest_args[@]}" "${targets[@]}" 2>&1 | tee "$run_dir/pytest.log" >&2
        exit "${PIPESTATUS[0]}"
    else
        "$py" "${pytest_args[@]}" "${targets[@]}" >"$run_dir/pytest.log" 2>&1
    fi
)
rc=$?
elapsed=$((SECONDS - t0))

results="$run_dir/results.txt"
touch "$raw"
cp "$raw" "$results"
# The session died inside a test (a crash, or a hard timeout): that test failed.
if [ -s "$raw.current" ]; then
    printf 'FAILED     0.0s %s  pytest aborted during this test (exit %s)\n' \
        "$(head -n1 "$raw.current")" "$rc" >>"$results"
fi
# Collected but no verdict: the session ended before the test ran.
if [ -f "$raw.collected" ]; then
    while IFS= read -r id; do
        awk -v id="$id" '$3 == id { f = 1 } END { exit !f }' "$results" \
            || printf 'FAILED     0.0s %s  not run: the session ended first (pytest exit %s)\n' \
                "$id" "$rc" >>"$results"
    done <"$raw.collected"
fi
# A selected id pytest never reported (renamed upstream, typo in tests.allow) counts as failed.
for id in "${selected_ids[@]}"; do
    awk -v id="$id" '$3 == id || index($3, id "[") == 1 { f = 1 } END { exit !f }' "$results" \
        || printf 'FAILED     0.0s %s  no result: not collected, or the session ended first (pytest exit %s)\n' \
            "$id" "$rc" >>"$results"
done
cat "$results"
if [ ! -s "$raw" ]; then
    tail -n 30 "$run_dir/pytest.log" >&2
fi

summarize_run "$results" "$work" "$run_dir" "$keep" "$elapsed" test/integration/
