#!/bin/sh
# Build the libFuzzer targets (libFuzzer + ASan + UBSan, meson -Dfuzz=true
# in build-fuzz, made once and rebuilt incrementally) and run one for $1
# seconds (default 30):
#   jwt    the identity-token and credential parsers, base64url
#   agent  the daemon's decoding of what a sandbox's agent answers
#   path   the file endpoints' path normalizer and splitter
#   init   sandbox-init's decoding of a request
#   exec   the exec/spawn body parser, and the command's trip to sandbox-init
#   config the config file parser
#   recipe the image recipe parser (image build -f)
#   client libsandboxd's parsing of a server's answers (frames, records, token)
#   httpmsg the port proxy's parsers (answer heads, chunked bodies, preview hosts)
#   etcd   a cluster host's parsing of etcd's answers and records
# The corpus starts from the seeds below and grows in a temporary
# directory; crash inputs are written to the current directory.
set -eu

targets="jwt agent path init exec config recipe client dns httpmsg etcd"
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_BUILD:-$root/build-fuzz}
setup() {
        if [ ! -f "$build/build.ninja" ]; then
                CC=${CC_FUZZ:-clang} meson setup "$build" "$root" -Dfuzz=true \
                        -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1 >/dev/null
        fi
}
# `run.sh build`: build every target, so that runs may go side by side
# (FUZZ_PREBUILT=1 then skips the build of each).
if [ "${1:-}" = build ]; then
        setup
        exec ninja -C "$build" $(for t in $targets; do printf 'tests/fuzz/fuzz-%s ' "$t"; done)
fi
secs=${1:-30}
target=${2:-jwt}
usage() { echo "usage: $0 [seconds] [$(echo $targets | tr ' ' '|')] | $0 build" >&2; exit 2; }
case $secs in ''|*[!0-9]*) usage ;; esac
case " $targets " in *" $target "*) ;; *) usage ;; esac

if [ -z "${FUZZ_PREBUILT:-}" ]; then
        setup
        if ! out=$(ninja -C "$build" "tests/fuzz/fuzz-$target" 2>&1); then
                echo "$out" >&2
                exit 1
        fi
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandboxd-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
c=$tmp/corpus
mkdir "$c"
max_len=16384
case $target in
jwt)
        # One seed per mode (first byte), so the fuzzer starts past the framing.
        printf '\000eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJkIn0.AAAA' >"$c/token"
        printf '\000eyJhbGciOiJub25lIn0.e30.' >"$c/none"
        printf '\001{"alg":"HS256","typ":"JWT"}\n{"iss":"http://127.0.0.1:7070","sub":"dep-1","acct":"a","iat":1899999990,"exp":1900000600,"nbf":1899999000}' \
                >"$c/claims"
        printf '\001{"alg":"HS256","kid":"k"}\n{"iss":"http://127.0.0.1:7070","sub":"d","acct":"a","exp":1.9e9}' \
                >"$c/claims-real"
        printf '\002sbxc1.BWRlcC0xCXRocmVhZC00Mv7cuph2VDIQAAABupZK_EA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' \
                >"$c/cred"
        printf '\003Zm9vYmFy' >"$c/b64"
        ;;
agent)
        # An exec answer (mode 0): header (len 23, type OK), then
        # EXIT_CODE = 0 and STDOUT = "hi\n".
        printf '\000\027\000\000\000\000\001\000\000\000\000\000\000\024\000\010\000\000\000\000\000\000\000\000\000\000\000\025\000\003\000\000\000hi\n' \
                >"$c/exec"
        max_len=65536
        ;;
path)
        printf 'a/b/../c' >"$c/relative"
        printf '/workspace//x/./y/' >"$c/slashes"
        printf '/%s' "$(printf 'd/%.0s' $(seq 1 40))" >"$c/deep"
        max_len=4200
        ;;
init)
        # An exec request's payload: ARGV "sh", ARGV "-c", ARGV "echo hi",
        # ENV "A=1", CWD "tmp" (tag u16, length u32, value; proto.h).
        printf '\001\000\002\000\000\000sh\001\000\002\000\000\000-c\001\000\007\000\000\000echo hi\003\000\003\000\000\000A=1\002\000\003\000\000\000tmp' \
                >"$c/exec"
        max_len=65536
        ;;
httpmsg)
        printf '\000HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n' >"$c/head"
        printf '\001\003\007' >"$c/chunked"
        printf '5\r\nhello\r\n0\r\nX: y\r\n\r\n' >>"$c/chunked"
        printf '\0028000-00112233445566778899aabbccddeeff0011223344556677.preview.example.com:7070' >"$c/host"
        printf '\003/v1/sandboxes/a/ports/80/x?y' >"$c/uri"
        max_len=8192
        ;;
exec)
        printf '{"command":["sh","-c","echo $X"],"cwd":"sub","env":{"X":"1"},"stdin":true}' \
                >"$c/exec"
        printf '{"command":["true"]}' >"$c/short"
        max_len=8192
        ;;
recipe)
        printf '# a recipe\nFROM tiny\nENV A=1 B="two words"\nWORKDIR /app\nCOPY src a /app/\nRUN make \\\n  all\nRUN ["/bin/sh", "-c", "echo hi"]\n' \
                >"$c/recipe"
        printf 'FROM @mmdebstrap bookworm git,curl\nWORKDIR /workspace\n' >"$c/base"
        max_len=8192
        ;;
etcd)
        # Mode 0: a range answer; 1: a failed txn with its reads; 2: a lease;
        # 3: a placement record; 4: a host record.
        printf '\000{"header":{"revision":"17"},"kvs":[{"key":"aw==","create_revision":"5","mod_revision":"9","version":"2","value":"dg=="}],"count":"1"}' >"$c/range"
        printf '\001{"header":{"revision":"30"},"responses":[{"response_range":{"kvs":[{"key":"aw==","value":"Mw==","mod_revision":"29"}],"count":"1"}},{"response_range":{}}]}' >"$c/txn"
        printf '\002{"result":{"header":{},"ID":"7587862","TTL":"10"}}' >"$c/lease"
        printf '\003{"host":"h1","account":"a","class":"default","generation":2,"recreated":"host_lost"}' >"$c/place"
        printf '\004{"url":"http://10.0.0.2:7070","free":3}' >"$c/host"
        max_len=8192
        ;;
client)
        # Mode 0: a stream (start, stdout "hi", exit); 1: a record; 2: a token.
        printf '\000\007\001\000\000\000\000\000\000Q\000\000\000\000\000\000\000\000{"processId":"p","command":["x"],"state":"running","stdoutFrom":0,"stderrFrom":0}\002\000\000\000\000\000\000\002\000\000\000\000\000\000\000\000hi\004\000\000\000\000\000\000\002\000\000\000\000\000\000\000\000{}' \
                >"$c/stream"
        printf '\001{"processId":"p1","command":["sh"],"state":"exited","exitCode":0,"stdout":"a","stderr":"","stdoutNext":1,"stderrNext":0,"stdoutDropped":0,"stderrDropped":0}' \
                >"$c/output"
        printf '\002e30.eyJpc3MiOiJodHRwOi8vMTI3LjAuMC4xOjcwNzAifQ.s' >"$c/token"
        printf '\003{"headers":{"Authorization":"Bearer x"}}' >"$c/headers"
        max_len=65536
        ;;
dns)
        # A query for WWW.Example.COM (type A), and an answer with a CNAME
        # and an A record behind compression pointers.
        printf '\022\064\001\000\000\001\000\000\000\000\000\000\003WWW\007Example\003COM\000\000\001\000\001' \
                >"$c/query"
        printf '\022\064\201\200\000\001\000\002\000\000\000\000\001a\007example\003com\000\000\001\000\001\300\014\000\005\000\001\000\000\000\074\000\004\001b\300\016\300\014\000\001\000\001\000\000\000\036\000\004\313\000\161\007' \
                >"$c/answer"
        max_len=4096
        ;;
config)
        printf '# a comment\nlisten = 127.0.0.1:7070\nnetwork = "none"\nidle_timeout = 90s\nmemory_limit = 1G\npool_size = 0\nuid_base = auto\n' \
                >"$c/conf"
        max_len=8192
        ;;
esac
"$build/tests/fuzz/fuzz-$target" -max_total_time="$secs" -max_len="$max_len" -timeout=10 \
        -print_final_stats=1 "$c"
