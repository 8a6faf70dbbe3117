# Sourced by load/bench.sh, idle_rooms.sh and open_pages.sh: the servers a script starts, on free
# loopback ports, and how it stops them. The caller defines die() and TMP, and keeps PIDS: one
# "pid:signal" per server, stopped in reverse order (nginx: TERM is its fast shutdown; Pingora:
# INT is, TERM waits the grace period; redis-server: TERM).
# shellcheck shell=bash

PIDS=()
USED_PORTS=" "

stop_pid() { # pid signal [seconds, default 5]: signal, wait, then SIGKILL
    local pid=$1 sig=$2 tenths=$((${3:-5} * 10)) i
    kill -0 "$pid" 2>/dev/null || return 0
    kill "-$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < tenths; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

stop_servers() { # [seconds]: every server of PIDS, the last started first
    local i entry
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        entry=${PIDS[i]}
        stop_pid "${entry%%:*}" "${entry#*:}" "${1:-5}"
    done
    wait 2>/dev/null || true
}

stop_server() { # pid: stops one of PIDS now and forgets it
    local pid=$1 i entry
    for i in "${!PIDS[@]}"; do
        entry=${PIDS[i]}
        if [[ ${entry%%:*} == "$pid" ]]; then
            stop_pid "$pid" "${entry#*:}"
            wait "$pid" 2>/dev/null || true
            unset 'PIDS[i]'
        fi
    done
    PIDS=(${PIDS[@]+"${PIDS[@]}"})
}

keep_or_remove_tmp() { # name failed keep: TMP is kept after a failure or when asked
    if [[ $2 == 1 || $3 == 1 ]]; then
        echo "$1: logs and configs kept in $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}

free_port() { # var-name: sets it to a port nothing on this host uses, below the ephemeral range
    local p i
    for ((i = 0; i < 200; i++)); do
        p=$((20000 + RANDOM % 12000))
        [[ $USED_PORTS == *" $p "* ]] && continue
        if [[ -z $(ss -Htan "( sport = :$p or dport = :$p )" 2>/dev/null) ]]; then
            USED_PORTS+="$p "
            printf -v "$1" '%s' "$p"
            return 0
        fi
    done
    die "no free port found"
}

wait_listening() { # port name pid [seconds, default 10]
    local port=$1 name=$2 pid=$3 seconds=${4:-10} i
    for ((i = 0; i < seconds * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || die "$name exited at start; see $TMP/$name.log"
        if (exec 9<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    die "$name does not listen on 127.0.0.1:$port after $seconds s; see $TMP/$name.log"
}

bare_pingora_bin() { # target-dir: sets BARE_BIN to the bare Pingora proxy (examples/bare_pingora.rs), built if missing
    BARE_BIN=${BARE_BIN:-$1/release/examples/bare_pingora}
    [[ -x $BARE_BIN ]] || CARGO_TARGET_DIR="$1" cargo build --release --example bare_pingora >&2 ||
        die "cannot build examples/bare_pingora"
    [[ -x $BARE_BIN ]] || die "no bare Pingora proxy at $BARE_BIN"
}

start_bare_pingora() { # port origin-port threads: the bare Pingora proxy; sets BARE_PID
    "$BARE_BIN" "127.0.0.1:$1" "127.0.0.1:$2" "$3" >"$TMP/bare.log" 2>&1 &
    BARE_PID=$!
    PIDS+=("$BARE_PID:INT")
    wait_listening "$1" bare "$BARE_PID" 30
}
