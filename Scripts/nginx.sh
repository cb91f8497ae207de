#!/usr/bin/env bash
# nginx on 127.0.0.1 for the benchmarks and the integration suite, sourced by the scripts that need it:
#   source Scripts/nginx.sh
#   nginx_start ROOT [CPU]   serves ROOT/www (which the caller fills) on a free port, pinned to CPU if given;
#                            sets NGINX_PORT. POST /upload reads the whole body and answers 200; /slow/FILE
#                            is FILE at 4 MiB/s, unless the request has a Range header.
#   nginx_start_pinned ROOT  as nginx_start, on the last CPU when there are two or more; sets PIN to the
#                            command prefix that runs a client on the others (empty on one CPU)
#   nginx_stop ROOT
#   free_ports N             prints N free ports of 127.0.0.1
# Installs Debian's nginx-light if nginx is missing (needs root and the Debian registry).

nginx_binary() {
    command -v nginx || echo /usr/sbin/nginx
}

# free_ports N: N ports of 127.0.0.1 nobody listens on now, on one line.
free_ports() {
    python3 -c '
import socket, sys
sockets = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in sockets))' "$1"
}

nginx_install() {
    if ! command -v nginx > /dev/null 2>&1 && [[ ! -x /usr/sbin/nginx ]]; then
        echo "== Installing nginx-light" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >&2
    fi
}

nginx_start() {
    local root=$1 cpu=${2:-}
    nginx_install
    NGINX_PORT=$(free_ports 1)
    mkdir -p "$root/www" "$root/temp"
    chmod 755 "$root" # nginx workers run as another user and must read the files
    chmod -R a+rX "$root/www"
    cat > "$root/nginx.conf" << CONF
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
    types { application/json json; application/octet-stream bin; text/plain txt; }
    # /slow/ serves the same files at 4 MiB/s, unless the request asks for a range (a resume).
    map \$http_range \$first_rate { "" 4m; default 0; }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $root/www;
        # An upload sink: the proxy module reads the whole body (to a temporary file) before it
        # asks the upstream, here nginx itself, for the small answer.
        location /slow/ {
            alias $root/www/;
            limit_rate \$first_rate;
        }
        location = /upload {
            client_max_body_size 0;
            proxy_method GET;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_pass http://127.0.0.1:$NGINX_PORT/small.json;
        }
    }
}
CONF
    if [[ ! -f "$root/www/small.json" ]]; then echo '{"ok":true}' > "$root/www/small.json"; fi
    chmod a+r "$root/www/small.json"
    if [[ -n "$cpu" ]]; then
        taskset -c "$cpu" "$(nginx_binary)" -c "$root/nginx.conf" -p "$root"
    else
        "$(nginx_binary)" -c "$root/nginx.conf" -p "$root"
    fi
    for _ in $(seq 1 50); do
        if curl -fsS "http://127.0.0.1:$NGINX_PORT/small.json" > /dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    echo "nginx did not start; its log:" >&2
    cat "$root/error.log" >&2 || true
    return 1
}

nginx_start_pinned() {
    local cpus
    cpus=$(nproc)
    # nginx on one CPU and the client on the others, so they do not take turns on one core.
    if ((cpus >= 2)); then
        nginx_start "$1" $((cpus - 1))
        PIN=(taskset -c "0-$((cpus - 2))")
    else
        nginx_start "$1"
        PIN=()
    fi
}

nginx_stop() {
    local root=$1
    if [[ -f "$root/nginx.pid" ]]; then kill "$(cat "$root/nginx.pid")" 2> /dev/null || true; fi
}
