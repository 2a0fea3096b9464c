# Sourced by the Go foreign-suite runners (compat/franz-go/run.sh, compat/kafka-go/run.sh):
# the Go toolchain, the module's test binary, and one test run in its own process.
#
#   go_setup WORK                    Go on PATH; module and build caches under WORK
#   go_build_test_binary MODULE VERSION PACKAGE BIN
#                                    go get -t MODULE@VERSION in a runner module under WORK,
#                                    then go test -c PACKAGE into BIN (cached with BIN.stamp)
#   go_selected_tests MODE LIST      the tests named by tests.allow (MODE allowed) or by the
#                                    comma-separated LIST (MODE list), one per line
#   go_new_run_dir                   a fresh run directory (sets run_dir) and the traps that
#                                    stop the caller's $broker_pid on exit
#   go_run_one NAME                  one top-level test in its own process, through
#                                    test2json; prints "PASSED|FAILED|SKIPPED <secs>s NAME
#                                    <kind>  <reason>". Reads: bin, pkgdir (the package's
#                                    sources: tests run in their directory), run_dir,
#                                    per_test_timeout, catalogue ("<name> <kind>" lines).
# The caller defines say, die and die_fetch (exit 3: the module cannot be fetched or built).

go_setup() {
    local work="$1" gobin
    gobin="$(command -v go || true)"
    [ -z "$gobin" ] && [ -x /usr/local/go/bin/go ] && gobin=/usr/local/go/bin/go
    if [ -z "$gobin" ]; then
        printf '==> %s: NO GO: no go command on PATH or in /usr/local/go/bin\n' "$suite" >&2
        exit 4
    fi
    export PATH="$(dirname "$gobin"):$PATH"
    # Our own module and build caches: nothing is written to the user's GOPATH, and the
    # cache survives between runs (the first build of a test binary takes 1-3 min on 2 cores).
    export GOMODCACHE="$work/gomodcache" GOCACHE="$work/gocache" GOPATH="$work/gopath"
    export GOFLAGS="-modcacherw -buildvcs=false"
    unset GOWORK
    go_work="$work"
}

go_build_test_binary() {
    local module="$1" version="$2" package="$3" bin="$4"
    local runner="$go_work/runner-$version" log="$go_work/build-$version.log" t0=$SECONDS
    [ -x "$bin" ] && [ -f "$bin.stamp" ] && return
    mkdir -p "$runner"
    say "go get -t $module@$version (Go module proxy) -> $GOMODCACHE"
    (
        cd "$runner" || exit 1
        [ -f go.mod ] || go mod init "pydmq.local/$suite-runner"
        go get -t "$package@$version"
    ) >"$log" 2>&1 || { tail -n 20 "$log" >&2; die_fetch "go get $package@$version failed"; }
    say "go test -c $package ($(go version | cut -d' ' -f3); log: $log)"
    (cd "$runner" && go test -c -o "$bin.tmp" "$package") >>"$log" 2>&1 \
        || { tail -n 20 "$log" >&2; die_fetch "building the $suite test binary failed"; }
    mv "$bin.tmp" "$bin"
    go version >"$bin.stamp"
    say "test binary built in $((SECONDS - t0))s: $bin"
}

# The module's source directory (tests run in their package's directory; some read fixtures).
go_module_dir() {
    (cd "$go_work/runner-$2" && go list -m -f '{{.Dir}}' "$1")
}

go_selected_tests() {
    case "$1" in
        allowed)
            [ -f "$here/tests.allow" ] || die "missing $here/tests.allow"
            sed -E 's/#.*//; s/[[:space:]]+//g' "$here/tests.allow" | grep -v '^$' ;;
        list) tr ', ' '\n\n' <<<"$2" | grep -v '^$' ;;
    esac
}

go_new_run_dir() {
    mkdir -p "$go_work/runs"
    run_dir="$(mktemp -d "$go_work/runs/run.XXXXXX")"
    mkdir -p "$run_dir/logs"
    broker_pid=""
    trap go_stop_broker EXIT
    trap 'exit 130' INT TERM
}

go_stop_broker() {
    if [ -n "$broker_pid" ]; then
        kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    fi
}

go_run_one() {
    local name="$1" json="$run_dir/logs/$1.json" t0 rc kind
    t0="$(date +%s.%N)"
    kind="$(awk -v n="$name" '$1 == n { print $2 }' <<<"$catalogue")"
    (cd "$pkgdir" && timeout -k 10 $((per_test_timeout + 30)) \
        go tool test2json -t -p "$suite" "$bin" -test.v=test2json -test.run "^${name}\$" \
        -test.timeout "${per_test_timeout}s") >"$json" 2>&1
    rc=$?
    python3 - "$json" "$name" "${kind:-unknown}" "$rc" "$t0" "$per_test_timeout" <<'EOF'
import json, re, sys, time
path, name, kind, rc, t0, limit = sys.argv[1:]
secs = time.time() - float(t0)  # wall clock of the test's process, set-up and clean-up included
verdict, lines = None, []
for raw in open(path, errors="replace"):
    try:
        e = json.loads(raw)
    except ValueError:
        continue
    test = e.get("Test") or ""
    if test != name and not test.startswith(name + "/"):
        continue
    if e["Action"] == "output":
        lines.append(e["Output"].rstrip("\n"))
    elif test == name and e["Action"] in ("pass", "fail", "skip"):
        verdict = e["Action"]
# The first assertion message (file_test.go:N: ...) explains a failure; a skip explains itself.
why = next((l.strip() for l in lines if re.match(r"\s+\w+_test\.go:\d+: ", l)
            and "NOT DELETING" not in l and not re.search(r"deleting (topic|group)", l)), "")
if verdict is None:
    status = "FAILED"
    if any("panic: test timed out" in l for l in lines) or rc in ("124", "137"):
        why = f"timed out after {limit}s"
    elif not lines:
        why = f"not run: no such test in this version (exit {rc})"
    else:
        why = f"no verdict (exit {rc}): " + next((l for l in lines if l.startswith("panic")), "")
else:
    status = {"pass": "PASSED", "fail": "FAILED", "skip": "SKIPPED"}[verdict]
    if status == "PASSED":
        why = ""
print(f"{status:<7} {secs:7.1f}s {name} {kind}  {why[:200]}".rstrip())
EOF
}
