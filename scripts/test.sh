#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a full test run:
# the same set-up as scripts/up.sh, an ASan+UBSan build, the images (built
# once, reused when present), then the checks (scripts/check.sh: format,
# function size and complexity, cppcheck, banned functions) and every
# suite: C unit tests (plain and sanitized), bounded fuzz runs of every
# target in tests/fuzz (run.sh), and the integration tests (node's test
# runner) against the real daemon built with ASan+UBSan.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

EXTRA_PACKAGES="clang libclang-rt-14-dev clang-format clang-tidy cppcheck bubblewrap runc strace python3-pytest zstd xfsprogs etcd-server" \
        ./scripts/setup.sh || exit 1

if [ ! -f build-asan/build.ninja ]; then
        meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null || exit 1
fi
ninja -C build-asan || exit 1

IMAGES=${SANDBOXD_IMAGES:-/var/lib/sandboxd/images}
# Built when missing or built from an older recipe (`image list`, RECIPE).
for img in tiny debian; do
        if ! build/sandboxd image list --images "$IMAGES" | awk 'NR > 1 && $NF == "current" {print $1}' | grep -qx "$img"; then
                build/sandboxd image build "$img" --images "$IMAGES" || exit 1
        fi
done

passed=0
failed=0
count() { passed=$((passed + $1)); failed=$((failed + $2)); }

echo "== checks"
if scripts/check.sh; then count 1 0; else count 0 1; fi

echo "== C unit tests"
for b in build build-asan; do
        out=$(meson test -C "$b" --print-errorlogs 2>&1); rc=$?
        echo "$out" | grep -E "^(Ok|Fail|Expected Fail|Unexpected Pass|Skipped|Timeout):" | sed "s/^/[$b] /"
        ok=$(echo "$out" | awk '/^Ok:/ {print $2}'); bad=$(echo "$out" | awk '/^(Fail|Timeout|Unexpected Pass):/ {s += $2} END {print s + 0}')
        count "${ok:-0}" "${bad:-0}"
        [ $rc -ne 0 ] && echo "$out" | tail -40
done

# Every fuzz target, built once, then run two at a time (a core each).
fuzz_targets=(jwt agent path init exec config recipe client dns httpmsg etcd)
secs=${FUZZ_SECONDS:-15}
if ! blog=$(tests/fuzz/run.sh build 2>&1); then
        echo "== fuzz: the build failed"; echo "$blog" | tail -40
        count 0 ${#fuzz_targets[@]}
        fuzz_targets=()
fi
fuzz_one() {
        if FUZZ_PREBUILT=1 tests/fuzz/run.sh "$secs" "$1" >"$2" 2>&1; then echo ok >>"$2.rc"; else echo bad >>"$2.rc"; fi
}
for ((i = 0; i < ${#fuzz_targets[@]}; i += 2)); do
        pair=("${fuzz_targets[@]:i:2}")
        logs=()
        for target in "${pair[@]}"; do
                flog=$(mktemp)
                logs+=("$flog")
                fuzz_one "$target" "$flog" &
        done
        wait
        for j in "${!pair[@]}"; do
                flog=${logs[j]}
                echo "== fuzz: ${pair[j]}, $secs s"
                if grep -qx ok "$flog.rc" 2>/dev/null; then
                        grep -E "^Done|runs in" "$flog" | tail -1
                        count 1 0
                else
                        tail -60 "$flog"
                        count 0 1
                fi
                rm -f "$flog" "$flog.rc"
        done
done

echo "== integration tests: npm dependencies and the SDK build"
# npm dependencies: the SDK's (its build, the check of its wire types) and
# the tests' (the contract validator, tests/contract), installed when
# node_modules is missing or lacks something package.json asks for.
npm_deps() { ( cd "$1" && { { [ -d node_modules ] && npm ls --silent >/dev/null 2>&1; } || npm install --no-audit --no-fund --silent; } ); }
( npm_deps tests && npm_deps clients/typescript && cd clients/typescript && npm run --silent build ) || count 0 1
# The framework adapters build on the SDK's dist/ (linked as ../typescript).
for adapter in clients/adapter-*/; do
        ( npm_deps "$adapter" && cd "$adapter" && npm run --silent build ) || count 0 1
done
# The Mastra adapter's packed-tarball test installs into an empty project
# offline, from npm's cache: an install from a lock file caches tarballs,
# not the registry's package documents that resolving needs, so they are
# fetched here once (set-up, like the installs above).
mastra_pins=$(cd clients/adapter-mastra && node -e 'const d = require("./package.json").devDependencies; console.log(`@mastra/core@${d["@mastra/core"]} zod@${d.zod}`)')
warm=$(mktemp -d)
( cd "$warm" && echo '{"name":"warm","private":true}' >package.json &&
        { npm install --offline --no-audit --no-fund --silent $mastra_pins >/dev/null 2>&1 ||
                npm install --no-audit --no-fund --silent $mastra_pins >/dev/null; } ) ||
        echo "set-up: npm could not cache $mastra_pins"
rm -rf "$warm"
export SANDBOXD_BIN="$ROOT/build-asan/sandboxd" SANDBOXD_IMAGES="$IMAGES"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mapfile -t files < <(ls tests/integration/*.test.mjs clients/typescript/test/*.test.mjs \
        clients/adapter-*/test/*.test.mjs 2>/dev/null)
# Every sandbox, process, file, lifecycle, tenancy and security test runs
# once per sandbox class; the contract and the adapters' tests do not
# depend on the class and run once.
mapfile -t class_files < <(ls tests/integration/*.test.mjs clients/typescript/test/*.test.mjs 2>/dev/null \
        | grep -vE '/(contract|contract-types|doc-examples|service|logging|sbx|libsandboxd-live)\.test\.mjs$')
# Each file starts its own daemons with their own state, ranges and tables:
# two run at once.
run_suite() {
        local label=$1; shift
        echo "== integration tests, class $label (daemon built with ASan+UBSan)"
        local log; log=$(mktemp)
        SANDBOXD_TEST_CLASS=$label node --test --test-concurrency=2 --test-reporter=tap "$@" 2>&1 | tee "$log" \
                | grep -E "^ *(not ok|ok) |^# (tests|pass|fail|skipped|duration_ms)"
        local ipass ifail
        ipass=$(awk '/^# pass / {print $3}' "$log" | tail -1)
        ifail=$(awk '/^# fail / {print $3}' "$log" | tail -1)
        grep -q "not ok" "$log" && grep -A30 "not ok" "$log" | grep -vE "^ +at |node:internal" | head -200
        count "${ipass:-0}" "${ifail:-1}"
        rm -f "$log"
}
run_suite ns "${files[@]}"
echo "== Python SDK tests (daemon built with ASan+UBSan)"
# pytest's last summary line ("N passed, M failed, K errors in ...") gives
# the counts; an exit without one (a crash, a collection error, no pytest)
# counts as a failure.
pylog=$(mktemp)
# Debian's python3, where python3-pytest is (not whichever python3 is first in $PATH).
( cd clients/python && SANDBOXD_TEST_CLASS=ns /usr/bin/python3 -m pytest -q -p no:cacheprovider tests ) >"$pylog" 2>&1
pyrc=$?
pyline=$(grep -E "[0-9]+ (passed|failed|errors?)( |,|$)" "$pylog" | tail -1)
ppass=$(echo "$pyline" | grep -oE "[0-9]+ passed" | awk '{s += $1} END {print s + 0}')
pfail=$(echo "$pyline" | grep -oE "[0-9]+ (failed|errors?)" | awk '{s += $1} END {print s + 0}')
[ "$pyrc" -ne 0 ] && [ "$pfail" -eq 0 ] && pfail=1
echo "${pyline:-pytest exited with $pyrc}"
[ "$pyrc" -ne 0 ] && tail -80 "$pylog"
count "$ppass" "$pfail"
rm -f "$pylog"
# Cluster mode: three etcd members and three hosts, once (not per class),
# bounded in time.
echo "== cluster tests (etcd, three hosts; daemon built with ASan+UBSan)"
clog=$(mktemp)
SANDBOXD_TEST_CLASS=ns timeout 600 node --test --test-reporter=tap tests/cluster/*.test.mjs 2>&1 | tee "$clog" \
        | grep -E "^ *(not ok|ok) |^# (tests|pass|fail|skipped|duration_ms)|figure:"
cpass=$(awk '/^# pass / {print $3}' "$clog" | tail -1)
cfail=$(awk '/^# fail / {print $3}' "$clog" | tail -1)
grep -q "not ok" "$clog" && grep -A30 "not ok" "$clog" | grep -vE "^ +at |node:internal" | head -100
count "${cpass:-0}" "${cfail:-1}"
rm -f "$clog"
runsc_version=$(runsc --version 2>/dev/null || true)
if [[ $runsc_version =~ 20(2[3-9]|[3-9][0-9])[0-9]{4} ]]; then
        run_suite gvisor "${class_files[@]}"
else
        echo "== integration tests, class gvisor: skipped (no usable runsc)"
fi
echo
echo "summary: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
