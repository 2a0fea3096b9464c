# Sourced by the foreign-suite runners (compat/*/run.sh): the closing summary of a run.
#
#   summarize_run RESULTS WORK RUN_DIR KEEP ELAPSED [PREFIX]
#
# RESULTS holds one "PASSED|FAILED|SKIPPED <secs>s <test id>  <reason>" line per test. Prints
# the failed ids (PREFIX stripped from them) and "N passed, M failed, K skipped (of T) in Xs",
# copies RESULTS to WORK/last-results.txt, removes RUN_DIR after a clean run unless KEEP is 1
# (else names it through the caller's `say`), and returns 0 only when tests ran and none failed.
summarize_run() {
    local results="$1" work="$2" run_dir="$3" keep="$4" elapsed="$5" prefix="${6:-}"
    local passed failed skipped total
    passed=$(grep -c '^PASSED' "$results")
    failed=$(grep -c '^FAILED' "$results")
    skipped=$(grep -c '^SKIPPED' "$results")
    total=$((passed + failed + skipped))
    if [ "$failed" -gt 0 ]; then
        echo "failed: $(grep '^FAILED' "$results" | awk '{print $3}' | sed "s#^${prefix}##" | sort | paste -sd' ')"
    fi
    echo "$passed passed, $failed failed, $skipped skipped (of $total) in ${elapsed}s"
    cp "$results" "$work/last-results.txt"
    if [ "$failed" -eq 0 ] && [ "$total" -gt 0 ] && [ "$keep" -eq 0 ]; then
        rm -rf "$run_dir"
    else
        say "run directory kept: $run_dir"
    fi
    [ "$failed" -eq 0 ] && [ "$total" -gt 0 ]
}
