#!/bin/sh
# Build a fuzzer (libFuzzer + ASan + UBSan) in a temporary directory and
# run it for $1 seconds (default 30): `jwt` (default), the identity-token
# and credential parsers, or `agent`, the daemon's decoding of what a
# sandbox's agent answers. Crash inputs are written to the current
# directory (libFuzzer's default).
set -eu

secs=${1:-30}
target=${2:-jwt}
case $secs in
''|*[!0-9]*) echo "usage: $0 [seconds] [jwt|agent]" >&2; exit 2 ;;
esac
case $target in
jwt|agent) ;;
*) echo "usage: $0 [seconds] [jwt|agent]" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/../.." && pwd)
cc=${CC_FUZZ:-clang}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

flags="-std=gnu11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -Wall -Wextra -Wno-unused-parameter -Werror -I$root"
common="$root/src/common/util.c $root/src/common/names.c $root/src/common/log.c"
mkdir "$tmp/corpus"

if [ "$target" = agent ]; then
        # shellcheck disable=SC2086
        "$cc" $flags -pthread "$root/tests/fuzz/fuzz-agent.c" "$root/src/agent/client.c" \
                "$root/src/agent/proto.c" "$root/src/common/fdpass.c" $common -o "$tmp/fuzz"
        # Seed: an exec answer (mode 0): header (len 23, type OK), then
        # EXIT_CODE = 0 and STDOUT = "hi\n".
        printf '\000\027\000\000\000\000\001\000\000\000\000\000\000\024\000\010\000\000\000\000\000\000\000\000\000\000\000\025\000\003\000\000\000hi\n' \
                >"$tmp/corpus/exec"
        "$tmp/fuzz" -max_total_time="$secs" -max_len=65536 -timeout=10 -print_final_stats=1 \
                "$tmp/corpus"
        exit $?
fi

# shellcheck disable=SC2086
"$cc" $flags "$root/tests/fuzz/fuzz-jwt.c" \
        "$root/src/api/jwt.c" "$root/src/api/cred.c" "$root/src/api/keys.c" \
        $common -ljansson -lcrypto -o "$tmp/fuzz-jwt"

# Seeds: one per mode (first byte), so the fuzzer starts past the framing.
printf '\000eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJkIn0.AAAA' >"$tmp/corpus/token"
printf '\000eyJhbGciOiJub25lIn0.e30.' >"$tmp/corpus/none"
printf '\001{"alg":"HS256","typ":"JWT"}\n{"iss":"http://127.0.0.1:7070","sub":"dep-1","acct":"a","iat":1899999990,"exp":1900000600,"nbf":1899999000}' \
        >"$tmp/corpus/claims"
printf '\001{"alg":"HS256","kid":"k"}\n{"iss":"http://127.0.0.1:7070","sub":"d","acct":"a","exp":1.9e9}' \
        >"$tmp/corpus/claims-real"
printf '\002sbxc1.BWRlcC0xCXRocmVhZC00Mv7cuph2VDIQAAABupZK_EA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' \
        >"$tmp/corpus/cred"
printf '\003Zm9vYmFy' >"$tmp/corpus/b64"

"$tmp/fuzz-jwt" -max_total_time="$secs" -max_len=16384 -timeout=10 -print_final_stats=1 \
        "$tmp/corpus"
