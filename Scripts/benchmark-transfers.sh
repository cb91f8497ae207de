#!/usr/bin/env bash
# The transfer benchmark of Benchmarks/README.md ("Files and streams"): on each transport, the
# manager against the raw client of that transport (a URLSession download or upload task;
# AsyncHTTPClient with a FileDownloadDelegate, or a body streamed from the file with
# NonBlockingFileIO), moving one file to and from nginx on 127.0.0.1, one transfer per process, the
# clients taking turns. Prints each run's throughput and the growth of peak resident memory over the
# process's resident memory just before the transfer, then the medians.
#   bash Scripts/benchmark-transfers.sh [--size MiB] [--rounds N] [--modes download,upload,multipart,stall]
# The file is 1024 MiB unless --size says; `stall` streams it through bytes(for:) with the consumer
# asleep for 5 s after the first part and reports the body held then.
set -euo pipefail
cd "$(dirname "$0")/.."
size=1024
rounds=3
modes=download,upload,multipart,stall
while (($#)); do
    case $1 in
    --size) size=$2 ;;
    --rounds) rounds=$2 ;;
    --modes) modes=$2 ;;
    *)
        echo "unknown argument $1" >&2
        exit 64
        ;;
    esac
    shift 2
done

source Scripts/nginx.sh
root=$(mktemp -d -p "${TMPDIR:-/tmp}")
mkdir -p "$root/www" "$root/client"
trap 'nginx_stop "$root"; rm -rf "$root"' EXIT
echo "== Writing a $size MiB file" >&2
head -c $((size << 20)) /dev/urandom > "$root/www/big.bin"
nginx_start_pinned "$root"  # nginx on the last CPU, the client (pin) on the others
pin=("${PIN[@]}")
swift build -c release --package-path Transports/AsyncHTTPClient --product TransferBenchmark >&2
binary=$(swift build -c release --package-path Transports/AsyncHTTPClient --show-bin-path)/TransferBenchmark
echo "nginx $("$(nginx_binary)" -v 2>&1 | sed 's/.*nginx\///') on 127.0.0.1:$NGINX_PORT, a $size MiB file, $rounds rounds"
echo
results="$root/results"
echo "mode transport client bytes seconds MiB/s baseline-KiB peak-KiB growth-MiB [held-MiB]"
for ((round = 1; round <= rounds; round++)); do
    for mode in ${modes//,/ }; do
        for transport in urlsession ahc; do
            clients=(raw manager)
            # URLSession as the transport uses it (a delegate, no completion handler): the fair raw
            # peer on Linux, where FoundationNetworking's delegate path is the slow part.
            if [[ $transport == urlsession ]]; then clients=(raw rawDelegate manager); fi
            if [[ $mode == stall ]]; then clients=(manager); fi
            # The raw clients go first in odd rounds, last in even ones.
            if ((round % 2 == 0)); then mapfile -t clients < <(printf '%s\n' "${clients[@]}" | tac); fi
            for client in "${clients[@]}"; do
                "${pin[@]}" "$binary" --url "http://127.0.0.1:$NGINX_PORT" --transport "$transport" --client "$client" \
                    --mode "$mode" --file "$root/www/big.bin" --dir "$root/client" | tee -a "$results"
            done
        done
    done
done
echo
echo "Medians: throughput, peak memory growth, and the manager's throughput over the raw client's"
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
table = {}
for row in rows:
    table.setdefault((row[0], row[1], row[2]), []).append(row)
print("| mode | transport | client | MiB/s | peak growth MiB | held after the stall MiB | manager / raw | manager / rawDelegate |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for (mode, transport, client), runs in sorted(table.items()):
    speed = statistics.median(float(r[5]) for r in runs)
    growth = max(float(r[8]) for r in runs)
    held = max(float(r[9]) for r in runs) if len(runs[0]) > 9 else None
    ratios = []
    for peer in ("raw", "rawDelegate"):
        ratio = ""
        if client == "manager" and (mode, transport, peer) in table:
            base = statistics.median(float(r[5]) for r in table[(mode, transport, peer)])
            ratio = f"{speed / base:.2f}x"
        ratios.append(ratio)
    print(f"| {mode} | {transport} | {client} | {speed:.0f} | {growth:.1f} (most of {len(runs)}) | "
          f"{'' if held is None else f'{held:.1f}'} | {ratios[0]} | {ratios[1]} |")
PY
