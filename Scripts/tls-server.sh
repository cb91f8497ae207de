#!/usr/bin/env bash
# TLS servers on 127.0.0.1 for the trust tests (Transports/AsyncHTTPClient, TrustTests), sourced by
# Scripts/integration-server.sh:
#   tls_start ROOT   makes a test PKI in ROOT/certs with openssl, starts nginx (Scripts/nginx.sh)
#                    with one server per case, and prints the exports the tests read
#   tls_stop ROOT
# The PKI: two roots (ours, "ca", and one the client does not know, "other-ca"); server
# certificates signed by ours for localhost and 127.0.0.1 (valid, expired in 2020, for another
# host), one signed by the other root, and a client certificate (PEM and PKCS #12, password
# "test"). Each server answers every request with a line of JSON; its access log records each
# request it was sent (`port method uri status`), so a test can tell that nothing was. Beside nginx,
# Tests/IntegrationServer/tls_mutual_server.py refuses a client without a certificate in the
# handshake itself (nginx answers 400 instead).

tls_certificates() {
    local dir=$1
    rm -rf "$dir"
    mkdir -p "$dir/db"
    (
        cd "$dir"
        for ca in ca other-ca; do
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $ca.key -out $ca.pem \
                -days 30 -subj "/O=APIManagerKit tests/CN=APIManagerKit test root $ca" \
                -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2> /dev/null
        done
        : > db/index.txt
        echo 1000 > db/serial
        cat > ca.cnf << 'CNF'
[ca]
default_ca = test
[test]
database = db/index.txt
serial = db/serial
new_certs_dir = db
default_md = sha256
policy = any
unique_subject = no
copy_extensions = copy
[any]
commonName = supplied
organizationName = optional
CNF
        # leaf NAME ROOT SUBJECT-ALT-NAMES EXTENDED-KEY-USAGE [START END]
        leaf() {
            local name=$1 ca=$2 san=$3 usage=$4 dates=(-days 2)
            if [[ -n ${5:-} ]]; then dates=(-startdate "$5" -enddate "$6"); fi
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $name.key -out $name.csr \
                -subj "/O=APIManagerKit tests/CN=$name" -addext "subjectAltName=$san" \
                -addext "extendedKeyUsage=$usage" 2> /dev/null
            openssl ca -batch -config ca.cnf -cert $ca.pem -keyfile $ca.key "${dates[@]}" -notext \
                -in $name.csr -out $name.pem 2> /dev/null
        }
        leaf server ca "DNS:localhost,IP:127.0.0.1" serverAuth
        leaf expired ca "DNS:localhost,IP:127.0.0.1" serverAuth 20200101000000Z 20200201000000Z
        leaf wronghost ca "DNS:wrong.example" serverAuth
        leaf unknown other-ca "DNS:localhost,IP:127.0.0.1" serverAuth
        leaf client ca "DNS:client.example" clientAuth
        openssl pkcs12 -export -in client.pem -inkey client.key -certfile ca.pem -out client.p12 -passout pass:test
        # The pins, as OkHttp's documentation makes them: the SHA-256 of the SubjectPublicKeyInfo, base64.
        for name in server ca other-ca unknown; do
            openssl x509 -in $name.pem -pubkey -noout | openssl pkey -pubin -outform der \
                | openssl dgst -sha256 -binary | base64 > $name.pin
        done
        chmod a+r ./*
    )
}

tls_start() {
    local root=$1 certs=$1/certs
    nginx_install
    tls_certificates "$certs"
    mkdir -p "$root/temp"
    chmod 755 "$root" "$certs"
    local ports
    read -r -a ports <<< "$(free_ports 6)"
    # One server per case: PORT CERTIFICATE ANSWER, and for the last, the client certificate it requires.
    tls_server() {
        printf '    server {\n        listen 127.0.0.1:%s ssl;\n' "$1"
        printf '        ssl_certificate %s/%s.pem;\n        ssl_certificate_key %s/%s.key;\n' "$certs" "$2" "$certs" "$2"
        if [[ -n ${4:-} ]]; then
            printf '        ssl_client_certificate %s/ca.pem;\n        ssl_verify_client on;\n' "$certs"
        fi
        printf "        location / { return 200 '%s\\\\n'; }\n    }\n" "$3"
    }
    local servers
    servers=$(
        tls_server "${ports[0]}" server '{"server":"trusted"}'
        tls_server "${ports[1]}" expired '{"server":"expired"}'
        tls_server "${ports[2]}" wronghost '{"server":"wrong host"}'
        tls_server "${ports[3]}" unknown '{"server":"unknown root"}'
        tls_server "${ports[4]}" server '{"client":"$ssl_client_s_dn"}' mutual
    )
    cat > "$root/nginx.conf" << CONF
worker_processes 1;
daemon on;
pid $root/nginx.pid;
error_log $root/error.log;
events { worker_connections 256; }
http {
    log_format line '\$server_port \$request_method \$request_uri \$status';
    access_log $root/access.log line;
    client_body_temp_path $root/temp;
    proxy_temp_path $root/temp;
    fastcgi_temp_path $root/temp;
    uwsgi_temp_path $root/temp;
    scgi_temp_path $root/temp;
    default_type application/json;
$servers
}
CONF
    "$(nginx_binary)" -c "$root/nginx.conf" -p "$root"
    nohup python3 Tests/IntegrationServer/tls_mutual_server.py "${ports[5]}" "$certs" > "$root/mutual.log" 2>&1 &
    echo $! > "$root/mutual.pid"
    for _ in $(seq 1 50); do
        if curl -fsS --cacert "$certs/ca.pem" "https://127.0.0.1:${ports[0]}/ready" > /dev/null 2>&1 \
            && curl -fsS --cacert "$certs/ca.pem" --cert "$certs/client.pem" --key "$certs/client.key" \
                "https://127.0.0.1:${ports[5]}/ready" > /dev/null 2>&1; then
            echo "export APIMANAGERKIT_TLS_CERTIFICATES=$certs"
            echo "export APIMANAGERKIT_TLS_ACCESS_LOG=$root/access.log"
            echo "export APIMANAGERKIT_TLS_SERVER=https://127.0.0.1:${ports[0]}"
            echo "export APIMANAGERKIT_TLS_EXPIRED=https://127.0.0.1:${ports[1]}"
            echo "export APIMANAGERKIT_TLS_WRONG_HOST=https://127.0.0.1:${ports[2]}"
            echo "export APIMANAGERKIT_TLS_UNKNOWN_ROOT=https://127.0.0.1:${ports[3]}"
            echo "export APIMANAGERKIT_TLS_MUTUAL=https://127.0.0.1:${ports[4]}"
            echo "export APIMANAGERKIT_TLS_MUTUAL_STRICT=https://127.0.0.1:${ports[5]}"
            return 0
        fi
        sleep 0.1
    done
    echo "the TLS servers did not start; their logs:" >&2
    cat "$root/error.log" "$root/mutual.log" >&2 || true
    return 1
}

tls_stop() {
    nginx_stop "$1"
    if [[ -f "$1/mutual.pid" ]]; then
        kill "$(cat "$1/mutual.pid")" 2> /dev/null || true
        rm -f "$1/mutual.pid"
    fi
}
