#!/usr/bin/env bash
# Starts the integration tests' HTTP server (httpbin + fixtures under gunicorn) on two loopback
# ports, and a hostile raw-socket server (Tests/IntegrationServer/raw_server.py) on a third,
# and nginx (Scripts/nginx.sh, installed from Debian's packages if missing) on a fourth, serving
# files it generates (a 64 MiB big.bin) from .build-venv/nginx/www, with Range support, and the
# TLS servers of the trust tests (Scripts/tls-server.sh: a test PKI made with openssl, nginx),
# installing them first into .build-venv if needed, and prints the exports the tests read:
#   eval "$(bash Scripts/integration-server.sh start)"   ...   bash Scripts/integration-server.sh stop
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$PWD/.build-venv"
pidfile="$venv/gunicorn.pid"
rawpidfile="$venv/raw-server.pid"
nginxroot="$venv/nginx"
tlsroot="$venv/tls"
source Scripts/nginx.sh
source Scripts/tls-server.sh

case "${1:-start}" in
start)
    if ! "$venv/bin/python" -c "import httpbin, gunicorn, haralyzer" > /dev/null 2>&1; then
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check -r Tests/IntegrationServer/requirements.txt >&2
    fi
    ports=$(free_ports 3)
    read -r first second third <<< "$ports"
    rm -rf "$nginxroot"
    mkdir -p "$nginxroot/www"
    head -c $((64 << 20)) /dev/urandom > "$nginxroot/www/big.bin"
    nginx_start "$nginxroot" >&2
    tls_exports=$(tls_start "$tlsroot")
    nohup "$venv/bin/python" Tests/IntegrationServer/raw_server.py "$third" > "$venv/raw-server.log" 2>&1 &
    echo $! > "$rawpidfile"
    "$venv/bin/gunicorn" --chdir Tests/IntegrationServer --bind "127.0.0.1:$first" --bind "127.0.0.1:$second" \
        --worker-class gthread --workers 1 --threads 32 --keep-alive 30 --timeout 120 \
        --pid "$pidfile" --daemon --error-logfile "$venv/gunicorn.log" app:app
    for _ in $(seq 1 100); do
        if curl -fsS "http://127.0.0.1:$first/get" > /dev/null 2>&1 && curl -fsS "http://127.0.0.1:$second/get" > /dev/null 2>&1 \
            && curl -fsS "http://127.0.0.1:$third/ready" > /dev/null 2>&1; then
            echo "export APIMANAGERKIT_TEST_SERVER=http://127.0.0.1:$first"
            echo "export APIMANAGERKIT_TEST_SERVER_2=http://127.0.0.1:$second"
            echo "export APIMANAGERKIT_RAW_SERVER=http://127.0.0.1:$third"
            echo "export APIMANAGERKIT_NGINX=http://127.0.0.1:$NGINX_PORT"
            echo "export APIMANAGERKIT_NGINX_ROOT=$nginxroot/www"
            echo "$tls_exports"
            exit 0
        fi
        sleep 0.1
    done
    echo "the integration server did not start; its log:" >&2
    cat "$venv/gunicorn.log" "$venv/raw-server.log" >&2 || true
    exit 1
    ;;
stop)
    nginx_stop "$nginxroot"
    tls_stop "$tlsroot"
    for file in "$pidfile" "$rawpidfile"; do
        if [[ -f "$file" ]]; then
            kill "$(cat "$file")" 2> /dev/null || true
            rm -f "$file"
        fi
    done
    ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 64
    ;;
esac
