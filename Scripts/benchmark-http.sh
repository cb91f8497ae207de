#!/usr/bin/env bash
# The HTTP benchmark of Benchmarks/README.md: APIManagerKit (manager + URLSessionTransport) against raw
# URLSession, both fetching from nginx on 127.0.0.1 with keep-alive, in one run.
# Installs Debian's nginx-light if nginx is missing (needs root and the Debian registry).
#   bash Scripts/benchmark-http.sh [--requests N] [--rounds N] [--candidates manager,transport,delegated,busyN,postN]
#   bash Scripts/benchmark-http.sh --instructions
#   bash Scripts/benchmark-http.sh --instructions-ahc
#   bash Scripts/benchmark-http.sh --ahc [--requests N] [--rounds N]
# --instructions counts retired instructions per request instead (valgrind --tool=callgrind, the
# slope between 300 and 900 requests, 8 in flight, 205 B and 64 KiB) for raw URLSession, the
# transport and the manager (on its work queue, and inline); it repeats within about 1 % on a busy machine, where wall time does not.
set -euo pipefail
cd "$(dirname "$0")/.."
# --instructions-ahc does the same for raw URLSession, raw AsyncHTTPClient and the manager on
# AsyncHTTPClientTransport, with the benchmark built by Transports/AsyncHTTPClient (HTTPBenchmarkAHC).
# --ahc runs the wall-clock comparison and the memory runs with that benchmark too (candidates ahc
# and managerAHC, memory of raw URLSession, raw AsyncHTTPClient and the manager on it).
instructions=false
ahc=false
if [[ "${1:-}" == "--ahc" ]]; then
    ahc=true
    shift
    if [[ " $* " != *" --candidates "* ]]; then set -- --candidates ahc,managerAHC "$@"; fi
fi
if [[ "${1:-}" == "--instructions-ahc" ]]; then
    ahc=true
    set -- --instructions "${@:2}"
fi
if [[ "${1:-}" == "--instructions" ]]; then
    instructions=true
    shift
    if ! command -v valgrind > /dev/null 2>&1; then
        echo "== Installing valgrind" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >&2
    fi
fi

if ! command -v nginx > /dev/null 2>&1 && [[ ! -x /usr/sbin/nginx ]]; then
    echo "== Installing nginx-light" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >&2
fi
nginx_binary=$(command -v nginx || echo /usr/sbin/nginx)

root=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$root/www" "$root/temp"
chmod 755 "$root"  # nginx workers run as another user and must read the files
# A 205-byte JSON body and a 64 KiB binary body.
python3 - "$root/www" <<'PY'
import json, os, sys
body = json.dumps({"id": 1, "name": "benchmark item", "tags": ["a", "b", "c"], "price": 9.99, "note": ""})
body = body[:-2] + '"' + "x" * (205 - len(body) - 1) + '"}'
assert len(body) == 205, len(body)
open(os.path.join(sys.argv[1], "small.json"), "w").write(body)
open(os.path.join(sys.argv[1], "large.bin"), "wb").write(bytes(i % 251 for i in range(65536)))
PY
chmod -R a+rX "$root/www"
cat > "$root/nginx.conf" <<CONF
worker_processes 1;
daemon on;
pid $root/nginx.pid;
error_log $root/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 120;
    client_body_temp_path $root/temp;
    proxy_temp_path $root/temp;
    fastcgi_temp_path $root/temp;
    uwsgi_temp_path $root/temp;
    scgi_temp_path $root/temp;
    types { application/json json; application/octet-stream bin; }
    server {
        listen 127.0.0.1:$port;
        root $root/www;
    }
}
CONF
# On two or more CPUs, nginx gets the last one and the client the others, so they do not take
# turns on one core (the noise then drops from about ±10 % to ±1 %).
cpus=$(nproc)
if ((cpus >= 2)); then
    server_cpu=$((cpus - 1))
    client_cpus="0-$((cpus - 2))"
    taskset -c "$server_cpu" "$nginx_binary" -c "$root/nginx.conf" -p "$root"
    pin=(taskset -c "$client_cpus")
else
    "$nginx_binary" -c "$root/nginx.conf" -p "$root"
    pin=()
fi
trap 'kill "$(cat "$root/nginx.pid")" 2> /dev/null || true; rm -rf "$root"' EXIT
curl -fsS "http://127.0.0.1:$port/small.json" > /dev/null

if $ahc; then
    swift build -c release --package-path Transports/AsyncHTTPClient --product HTTPBenchmarkAHC >&2
    # valgrind 3.19 cannot read this binary's debug information (it gives up at once): count a copy
    # without it; the totals are the same.
    binary="$root/HTTPBenchmarkAHC"
    cp "$(swift build -c release --package-path Transports/AsyncHTTPClient --show-bin-path)/HTTPBenchmarkAHC" "$binary"
    strip --strip-debug "$binary"
else
    swift build -c release --package-path Benchmarks --product HTTPBenchmark >&2
    binary=$(swift build -c release --package-path Benchmarks --show-bin-path)/HTTPBenchmark
fi
echo "nginx $("$nginx_binary" -v 2>&1 | sed 's/.*nginx\///') on 127.0.0.1:$port, keep-alive"
echo
if $instructions; then
    # Instructions of one run of CLIENT fetching BODY COUNT times, 8 in flight.
    count_instructions() {
        local out="$root/callgrind.$1.$2.$3"
        valgrind --tool=callgrind --callgrind-out-file="$out" "$binary" --url "http://127.0.0.1:$port" \
            --only "$1" --body "$2" --requests "$3" > /dev/null 2>&1
        # awk reads to the end, so callgrind_annotate never dies of a closed pipe (pipefail).
        callgrind_annotate "$out" 2> /dev/null | awk '/PROGRAM TOTALS/ && !seen { print $1; seen = 1 }' | tr -d ,
    }
    if $ahc; then
        echo "| body | in flight | raw URLSession | raw AsyncHTTPClient | manager on AsyncHTTPClientTransport | manager / raw URLSession | manager / raw AsyncHTTPClient |"
        echo "|---|---:|---:|---:|---:|---:|---:|"
        for setup in "small 1" "small 8" "large 8"; do
            read -r body flight <<< "$setup"
            declare -A per
            for client in raw ahc managerAHC; do
                out_low="$root/cg.$client.$body.$flight.low"
                out_high="$root/cg.$client.$body.$flight.high"
                valgrind --tool=callgrind --callgrind-out-file="$out_low" "$binary" --url "http://127.0.0.1:$port" \
                    --only "$client" --body "$body" --in-flight "$flight" --requests 300 > /dev/null 2>&1
                valgrind --tool=callgrind --callgrind-out-file="$out_high" "$binary" --url "http://127.0.0.1:$port" \
                    --only "$client" --body "$body" --in-flight "$flight" --requests 900 > /dev/null 2>&1
                low=$(callgrind_annotate "$out_low" 2> /dev/null | awk '/PROGRAM TOTALS/ && !seen { print $1; seen = 1 }' | tr -d ,)
                high=$(callgrind_annotate "$out_high" 2> /dev/null | awk '/PROGRAM TOTALS/ && !seen { print $1; seen = 1 }' | tr -d ,)
                per[$client]=$(((high - low) / 600))
            done
            label=$([[ $body == small ]] && echo "205 B" || echo "64 KiB")
            awk -v b="$label" -v f="$flight" -v r="${per[raw]}" -v a="${per[ahc]}" -v m="${per[managerAHC]}" 'BEGIN {
                printf "| %s | %d | %.0fk | %.0fk | %.0fk | %.3fx | %.3fx |\n", b, f, r / 1000, a / 1000, m / 1000, m / r, m / a }'
        done
        echo
        echo "instructions per request, valgrind --tool=callgrind, slope between 300 and 900 requests"
        exit 0
    fi
    echo "| body | raw URLSession | transport | manager (work queue) | manager (inline) | transport / raw | manager / raw | inline manager / raw |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for body in small large; do
        declare -A per
        for client in raw transport manager managerInline; do
            low=$(count_instructions "$client" "$body" 300)
            high=$(count_instructions "$client" "$body" 900)
            per[$client]=$(((high - low) / 600))
        done
        label=$([[ $body == small ]] && echo "205 B" || echo "64 KiB")
        awk -v b="$label" -v r="${per[raw]}" -v t="${per[transport]}" -v m="${per[manager]}" \
            -v i="${per[managerInline]}" 'BEGIN {
            printf "| %s | %.0fk | %.0fk | %.0fk | %.0fk | %.3fx | %.3fx | %.3fx |\n", b, r / 1000, t / 1000, m / 1000,
                i / 1000, t / r, m / r, i / r }'
    done
    echo
    echo "instructions per request, valgrind --tool=callgrind, slope between 300 and 900 requests, 8 in flight"
    exit 0
fi
"${pin[@]}" "$binary" --url "http://127.0.0.1:$port" "$@"
echo
echo "Memory: a fresh process per client, 205-byte bodies, 8 in flight"
memory_clients=(raw manager)
if $ahc; then memory_clients=(raw ahc managerAHC); fi
for client in "${memory_clients[@]}"; do
    echo
    "${pin[@]}" "$binary" --url "http://127.0.0.1:$port" --memory "$client"
done
