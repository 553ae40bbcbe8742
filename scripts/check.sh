#!/usr/bin/env bash
# The checks that hold the line, run by scripts/test.sh and on their own:
#   format   clang-format --dry-run -Werror (.clang-format)
#   tidy     clang-tidy: function size and cognitive complexity (.clang-tidy)
#   cppcheck cppcheck's warnings, the cleanup-attribute false positives off
#   banned   functions the code must not call (they truncate, overflow, or
#            hide errors; the safe forms are named below)
# `scripts/check.sh` runs all; `scripts/check.sh format tidy` some.
# `scripts/check.sh --fix-format` rewrites the files instead.
# Needs clang-format, clang-tidy, cppcheck (scripts/test.sh installs them)
# and build/compile_commands.json (meson setup build).
set -uo pipefail
cd "$(dirname "$0")/.."

mapfile -t SOURCES < <(git ls-files 'src/*.c' 'src/*.h' 'lib/*.c' 'lib/*.h' 'include/*.h' \
        'tests/*.c' 'tests/*.h')
mapfile -t UNITS < <(git ls-files 'src/*.c' 'lib/*.c')
JOBS=$(nproc 2>/dev/null || echo 2)
failed=()

check_format() {
        clang-format --dry-run -Werror "${SOURCES[@]}" 2>&1 | grep -E "error:" | head -40
        clang-format --dry-run -Werror "${SOURCES[@]}" >/dev/null 2>&1
}

check_tidy() {
        if [ ! -f build/compile_commands.json ]; then
                meson setup build --prefix=/usr/local >/dev/null || return 1
        fi
        # -w: the build's gcc-only warning flags mean nothing to clang; the
        # checks themselves are errors (.clang-tidy: WarningsAsErrors).
        local out
        out=$(printf '%s\n' "${UNITS[@]}" |
                xargs -P "$JOBS" -n 4 clang-tidy -p build --quiet --extra-arg=-w 2>&1 |
                grep -E "(warning|error):")
        [ -z "$out" ] && return 0
        echo "$out"
        return 1
}

check_cppcheck() {
        # memleak/resourceLeak: cppcheck does not know __attribute__((cleanup))
        # (_cleanup_free_, _cleanup_close_ in common/util.h), so every
        # early return past one looks like a leak to it.
        cppcheck -q --std=c11 --enable=warning,portability,performance --inline-suppr \
                -D_GNU_SOURCE -I src -I include --suppress=memleak --suppress=resourceLeak \
                --suppress=missingIncludeSystem --error-exitcode=1 -j "$JOBS" src lib 2>&1
}

# name -> what to use instead
BANNED='strcpy:snprintf or memcpy with a length
strcat:snprintf or buf_append
sprintf:snprintf
vsprintf:vsnprintf
gets:fgets
strtok:strtok_r or strsep
strncpy:snprintf (strncpy may leave no NUL)
strncat:snprintf
atoi:strtol with an end and range check
atol:strtol with an end and range check
atoll:strtoll with an end and range check
tmpnam:mkstemp
tempnam:mkstemp
mktemp:mkstemp or mkdtemp
alloca:malloc (or a fixed array with a checked length)
system:fork + execve (no shell)
popen:fork + execve with a pipe (no shell)
rand:getrandom
srand:getrandom
usleep:nanosleep (sleep_ms)
readdir_r:readdir'

check_banned() {
        local bad=0 name why hits
        while IFS=: read -r name why; do
                hits=$(git grep -nE "(^|[^A-Za-z0-9_.>])${name}[[:space:]]*\(" -- 'src/*.c' 'src/*.h' 'lib/*.c' 'lib/*.h' |
                        grep -vE "^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)")
                if [ -n "$hits" ]; then
                        echo "$hits" | sed "s/\$/   <- $name: use $why/"
                        bad=1
                fi
        done <<<"$BANNED"
        return $bad
}

if [ "${1:-}" = "--fix-format" ]; then
        clang-format -i "${SOURCES[@]}"
        exit 0
fi
checks=("$@")
[ ${#checks[@]} -eq 0 ] && checks=(format tidy cppcheck banned)
for c in "${checks[@]}"; do
        if ! command -v "check_$c" >/dev/null 2>&1 && ! declare -F "check_$c" >/dev/null; then
                echo "check: no check named $c" >&2
                exit 2
        fi
        if out=$("check_$c" 2>&1); then
                echo "check $c: ok"
        else
                echo "check $c: FAILED"
                echo "$out" | head -80
                failed+=("$c")
        fi
done
[ ${#failed[@]} -eq 0 ]
