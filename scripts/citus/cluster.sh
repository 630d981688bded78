#!/usr/bin/env bash
# Starts, stops and inspects a local Citus cluster (a coordinator and N workers) for
# corotask's development and tests. It needs a PostgreSQL installation that already has the
# citus extension installed; it checks that, and builds nothing. See docs/scaling.md.
set -euo pipefail

prog=${0##*/}

usage() {
	cat <<EOF
Usage: $prog COMMAND --dir DIR [flags]

Run a local Citus cluster: a coordinator and N workers, each a PostgreSQL server
of its own on 127.0.0.1, under DIR. The PostgreSQL installation (found with
pg_config) must already have the citus extension installed: this script checks
that and builds nothing.

Commands:
  start              initdb the nodes (the first time), start them, create the
                     database (--database) on every node with the citus
                     extension, register the coordinator and the workers in it,
                     and print COROTASK_CITUS_URL=<the coordinator's URL>
  stop               stop every node (fast shutdown); the data stays in DIR
  status             say which nodes run, and list the active workers of the
                     database (--database); exit 3 when a node is stopped
  createdb DB        create DB on every node with the extension, register the
                     nodes in it, and print COROTASK_CITUS_URL for it
  distribute DB      migrate DB and distribute its corotask schema over the
                     workers: 'corotask migrate --citus' (the binary \$COROTASK,
                     else 'go run ./cmd/corotask' of this repository)
  restart NODE       restart one node (coordinator, worker1, ...): a fast
                     shutdown, or with --immediate one without a checkpoint
                     (recovery at start-up), as a crash; a node found stopped
                     is started. The fault harness on Citus uses it
                     (-faults.citus-dir)

Flags:
  --dir DIR          the cluster's directory (default \$COROTASK_CITUS_DIR);
                     start creates it, and it must be new or one start made
  --port PORT        the coordinator's port; worker i listens on PORT+i
                     (default 9700; start only, then read from DIR)
  --workers N        the number of workers (default 2; start only)
  --database DB      the database start creates and status inspects
                     (default corotask)
  --pg-config PATH   pg_config of the PostgreSQL installation to use (default
                     \$PG_CONFIG, else pg_config on the PATH, else the newest
                     /usr/lib/postgresql/*/bin/pg_config)
  --os-user USER     when run as root, run the servers as USER (default
                     postgres): initdb and postgres refuse to run as root
  --immediate        restart only: stop the node at once, as a crash
  --help             print this help

Every node listens on 127.0.0.1 only, trusts local connections (no password:
for development only), has shared_preload_libraries = 'citus' and
wal_level = logical (for online shard moves), its socket in
DIR/run and its log in DIR/log/NODE.log. Citus does not propagate CREATE
DATABASE, and its node list is kept per database: so each database is created
on every node and the nodes are registered in each one.

Example:
  export "\$($prog start --dir /tmp/citus)"   # sets COROTASK_CITUS_URL
  $prog distribute --dir /tmp/citus corotask   # corotask migrate --citus
  $prog status --dir /tmp/citus
  $prog stop --dir /tmp/citus && rm -rf /tmp/citus
EOF
}

die() {
	echo "$prog: $*" >&2
	exit 1
}

usage_error() {
	echo "$prog: $*" >&2
	echo "Run '$prog --help' for usage." >&2
	exit 2
}

say() {
	echo "$prog: $*" >&2
}

# --- arguments ---

command=
dir=${COROTASK_CITUS_DIR:-}
port=
workers=
database=corotask
pg_config=${PG_CONFIG:-}
os_user=postgres
immediate=
args=()

while [ $# -gt 0 ]; do
	case $1 in
	--help | -h) usage; exit 0 ;;
	--dir) [ $# -ge 2 ] || usage_error "$1 needs a value"; dir=$2; shift 2 ;;
	--dir=*) dir=${1#*=}; shift ;;
	--port) [ $# -ge 2 ] || usage_error "$1 needs a value"; port=$2; shift 2 ;;
	--port=*) port=${1#*=}; shift ;;
	--workers) [ $# -ge 2 ] || usage_error "$1 needs a value"; workers=$2; shift 2 ;;
	--workers=*) workers=${1#*=}; shift ;;
	--database) [ $# -ge 2 ] || usage_error "$1 needs a value"; database=$2; shift 2 ;;
	--database=*) database=${1#*=}; shift ;;
	--pg-config) [ $# -ge 2 ] || usage_error "$1 needs a value"; pg_config=$2; shift 2 ;;
	--pg-config=*) pg_config=${1#*=}; shift ;;
	--os-user) [ $# -ge 2 ] || usage_error "$1 needs a value"; os_user=$2; shift 2 ;;
	--os-user=*) os_user=${1#*=}; shift ;;
	--immediate) immediate=1; shift ;;
	-*) usage_error "unknown flag $1" ;;
	*)
		if [ -z "$command" ]; then command=$1; else args+=("$1"); fi
		shift
		;;
	esac
done

case $command in
start | stop | status) [ ${#args[@]} -eq 0 ] || usage_error "$command takes no argument (got ${args[*]})" ;;
createdb | distribute) [ ${#args[@]} -eq 1 ] || usage_error "$command takes one argument, the database"; database=${args[0]} ;;
restart) [ ${#args[@]} -eq 1 ] || usage_error "restart takes one argument, the node (coordinator, worker1, ...)" ;;
'') usage_error "no command (start, stop, status, createdb, distribute or restart)" ;;
*) usage_error "unknown command $command" ;;
esac

[ -n "$dir" ] || usage_error "no cluster directory: pass --dir DIR or set COROTASK_CITUS_DIR"
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
dir=${dir%/}

is_uint() {
	case $1 in '' | *[!0-9]*) return 1 ;; esac
}

[ -z "$port" ] || { is_uint "$port" && [ "$port" -ge 1 ] && [ "$port" -le 65000 ]; } ||
	usage_error "--port must be a port number, got '$port'"
[ -z "$workers" ] || { is_uint "$workers" && [ "$workers" -ge 1 ] && [ "$workers" -le 32 ]; } ||
	usage_error "--workers must be a number from 1 to 32, got '$workers'"
# A plain identifier: the same in SQL and in the URL, with nothing to quote.
[[ $database =~ ^[a-z_][a-z0-9_]{0,62}$ ]] ||
	usage_error "the database name must be lower-case letters, digits and _ (starting with a letter or _), got '$database'"

# --- the PostgreSQL installation ---

find_pg_config() {
	if [ -n "$pg_config" ]; then
		[ -x "$pg_config" ] || command -v "$pg_config" >/dev/null ||
			die "pg_config '$pg_config' (--pg-config or \$PG_CONFIG) is not an executable"
		return
	fi
	if command -v pg_config >/dev/null; then
		pg_config=pg_config
		return
	fi
	local c
	for c in $(ls -d /usr/lib/postgresql/*/bin/pg_config 2>/dev/null | sort -V -r); do
		pg_config=$c
		return
	done
	die "no pg_config found (not on the PATH, nor under /usr/lib/postgresql/*/bin): install PostgreSQL's server (on Debian/Ubuntu: apt-get install postgresql postgresql-server-dev-all) or pass --pg-config PATH"
}

find_pg_config
bindir=$("$pg_config" --bindir)
pkglibdir=$("$pg_config" --pkglibdir)
sharedir=$("$pg_config" --sharedir)
pgversion=$("$pg_config" --version)

check_installation() {
	local missing=() b
	for b in initdb pg_ctl postgres psql; do
		[ -x "$bindir/$b" ] || missing+=("$bindir/$b")
	done
	[ ${#missing[@]} -eq 0 ] ||
		die "$pgversion at $bindir lacks ${missing[*]}: install its server package (on Debian/Ubuntu, postgresql-<major>)"
	missing=()
	[ -f "$pkglibdir/citus.so" ] || missing+=("$pkglibdir/citus.so")
	[ -f "$sharedir/extension/citus.control" ] || missing+=("$sharedir/extension/citus.control")
	[ ${#missing[@]} -eq 0 ] ||
		die "the citus extension is not installed in $pgversion (pg_config: $pg_config): missing ${missing[*]}. Install Citus for this PostgreSQL version first (a package from Citus' own repository, or Citus built from its source with this pg_config); this script builds nothing"
}

check_installation

# --- running as root ---

as_server=()
if [ "$(id -u)" -eq 0 ]; then
	id -u "$os_user" >/dev/null 2>&1 ||
		die "run as root, the servers must run as another user, and '$os_user' (--os-user) does not exist"
	command -v runuser >/dev/null || die "run as root, this script needs runuser (util-linux) to run the servers as $os_user"
	as_server=(runuser -u "$os_user" --)
fi

# run_server CMD...: a command that must not run as root (initdb, pg_ctl).
run_server() {
	"${as_server[@]}" "$@"
}

# --- the cluster's shape ---

conf=$dir/cluster.conf
nodes=()

load_shape() {
	[ -f "$conf" ] || die "$dir is not a cluster directory ($conf is missing): run '$prog start --dir $dir' first"
	local k v
	while IFS='=' read -r k v; do
		case $k in
		port) cport=$v ;;
		workers) cworkers=$v ;;
		esac
	done <"$conf"
	is_uint "${cport:-}" && is_uint "${cworkers:-}" || die "$conf is damaged (it needs port=N and workers=N)"
	[ -z "$port" ] || [ "$port" -eq "$cport" ] ||
		die "the cluster in $dir has its coordinator on port $cport, not $port: pass --port $cport or another --dir"
	[ -z "$workers" ] || [ "$workers" -eq "$cworkers" ] ||
		die "the cluster in $dir has $cworkers workers, not $workers: use another --dir for another shape"
	port=$cport
	workers=$cworkers
	set_nodes
}

set_nodes() {
	nodes=(coordinator)
	local i
	for ((i = 1; i <= workers; i++)); do nodes+=("worker$i"); done
}

node_port() {
	case $1 in
	coordinator) echo "$port" ;;
	worker*) echo $((port + ${1#worker})) ;;
	esac
}

# plural N WORD: "1 WORD", "2 WORDs".
plural() {
	if [ "$1" -eq 1 ]; then echo "1 $2"; else echo "$1 $2s"; fi
}

url() {
	echo "postgres://postgres@127.0.0.1:$port/$1"
}

# psql_node NODE DB [psql args...]: psql as the superuser, over TCP to the node.
psql_node() {
	local node=$1 db=$2
	shift 2
	"$bindir/psql" -X -q -w -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(node_port "$node")" -U postgres -d "$db" "$@"
}

node_running() {
	run_server "$bindir/pg_ctl" -D "$dir/$1" status >/dev/null 2>&1
}

# port_answers PORT: whether some server accepts TCP connections on 127.0.0.1:PORT.
port_answers() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# --- commands ---

init_cluster() {
	port=${port:-9700}
	workers=${workers:-2}
	set_nodes
	local node p
	for node in "${nodes[@]}"; do
		p=$(node_port "$node")
		! port_answers "$p" || die "port $p (for $node) is taken by another server: choose another --port (the ports used are $port to $((port + workers)))"
	done
	if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
		die "$dir exists and is not empty, but holds no cluster ($conf): give a new or empty directory"
	fi
	local made=
	[ -e "$dir" ] || { mkdir -p "$dir" && made=1; }
	if [ ${#as_server[@]} -gt 0 ]; then
		chown "$os_user:" "$dir"
		if ! run_server test -w "$dir" -a -x "$dir"; then
			[ -z "$made" ] || rmdir "$dir"
			die "$os_user cannot write to $dir (a parent directory closed to it?): choose a directory $os_user can reach, e.g. under /tmp"
		fi
	fi
	mkdir -p "$dir/run" "$dir/log"
	[ ${#as_server[@]} -eq 0 ] || chown "$os_user:" "$dir/run" "$dir/log"
	for node in "${nodes[@]}"; do
		say "initdb $node in $dir/$node"
		run_server "$bindir/initdb" -D "$dir/$node" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
			>"$dir/log/initdb-$node.log" 2>&1 ||
			die "initdb of $node failed: see $dir/log/initdb-$node.log"
		# initdb --auth=trust trusts the local socket, 127.0.0.1/32 and ::1/128 only.
		cat >>"$dir/$node/postgresql.conf" <<EOF

# Citus node '$node', written by scripts/citus/cluster.sh
port = $(node_port "$node")
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir/run'
shared_preload_libraries = 'citus'
# Moving shards while writes go on (citus_rebalance_start's default) copies
# them through logical replication.
wal_level = logical
EOF
	done
	printf 'port=%s\nworkers=%s\n' "$port" "$workers" >"$conf"
}

start_nodes() {
	local node p
	for node in "${nodes[@]}"; do
		if node_running "$node"; then
			say "$node already running on port $(node_port "$node")"
			continue
		fi
		p=$(node_port "$node")
		! port_answers "$p" || die "port $p (for $node) is taken by another server"
		say "starting $node on port $p"
		if ! run_server "$bindir/pg_ctl" -D "$dir/$node" -l "$dir/log/$node.log" -w -t 60 start >/dev/null; then
			tail -n 20 "$dir/log/$node.log" >&2 || true
			die "$node did not start: see $dir/log/$node.log"
		fi
	done
}

create_database() {
	local db=$1 node exists
	for node in "${nodes[@]}"; do
		node_running "$node" || die "$node is not running: run '$prog start --dir $dir' first"
		exists=$(psql_node "$node" postgres -tA -v db="$db" <<'SQL'
SELECT count(*) FROM pg_database WHERE datname = :'db';
SQL
		)
		if [ "$exists" = 0 ]; then
			say "creating database $db on $node"
			psql_node "$node" postgres -v db="$db" <<'SQL'
CREATE DATABASE :"db";
SQL
		fi
		psql_node "$node" "$db" <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS citus;
SQL
	done
	say "registering the coordinator and $(plural "$workers" worker) in $db"
	{
		echo "SET client_min_messages = warning;"
		echo "SELECT citus_set_coordinator_host('127.0.0.1', $port);"
		local i
		for ((i = 1; i <= workers; i++)); do
			echo "SELECT citus_add_node('127.0.0.1', $((port + i)));"
		done
	} | psql_node coordinator "$db" >/dev/null
	local active
	active=$(psql_node coordinator "$db" -tA -c "SELECT count(*) FROM citus_get_active_worker_nodes()")
	[ "$active" = "$workers" ] || die "$db has $active active workers, not $workers: see $dir/log/coordinator.log"
	say "$db: $(psql_node coordinator "$db" -tA -c "SELECT citus_version()" | cut -d, -f1), $(plural "$active" "active worker")"
	echo "COROTASK_CITUS_URL=$(url "$db")"
}

cmd_start() {
	if [ -f "$conf" ]; then
		load_shape
	else
		init_cluster
	fi
	start_nodes
	create_database "$database"
}

cmd_stop() {
	load_shape
	local node
	# The coordinator first: it is where clients and distributed transactions start.
	for node in "${nodes[@]}"; do
		if node_running "$node"; then
			say "stopping $node"
			run_server "$bindir/pg_ctl" -D "$dir/$node" -m fast -w -t 60 stop >/dev/null
		else
			say "$node is not running"
		fi
	done
}

cmd_status() {
	load_shape
	local node stopped=0 pid
	for node in "${nodes[@]}"; do
		if node_running "$node"; then
			pid=$(head -n 1 "$dir/$node/postmaster.pid" 2>/dev/null || echo '?')
			printf '%-12s port %-5s running (pid %s)\n' "$node" "$(node_port "$node")" "$pid"
		else
			printf '%-12s port %-5s stopped\n' "$node" "$(node_port "$node")"
			stopped=1
		fi
	done
	if node_running coordinator; then
		local has
		has=$(psql_node coordinator postgres -tA -v db="$database" <<'SQL'
SELECT count(*) FROM pg_database WHERE datname = :'db';
SQL
		)
		if [ "$has" = 0 ]; then
			echo "database $database: none on the coordinator (create it with '$prog createdb --dir $dir $database')"
		else
			echo "database $database: $(url "$database"), active workers:"
			psql_node coordinator "$database" -c "SELECT * FROM citus_get_active_worker_nodes() ORDER BY node_port" ||
				echo "  (no citus extension in $database)"
		fi
	fi
	[ "$stopped" -eq 0 ] || exit 3
}

cmd_createdb() {
	load_shape
	create_database "$database"
}

cmd_restart() {
	load_shape
	local node=${args[0]} n mode=fast
	for n in "${nodes[@]}"; do
		[ "$n" != "$node" ] || break
	done
	[ "$n" = "$node" ] || die "no node $node in this cluster (its nodes: ${nodes[*]})"
	[ -z "$immediate" ] || mode=immediate
	# A node found stopped (a restart that failed half-way) is started.
	if node_running "$node"; then
		say "restarting $node ($mode)"
		# On a loaded machine a shutdown has been seen to take a minute.
		run_server "$bindir/pg_ctl" -D "$dir/$node" -m "$mode" -w -t 90 stop >/dev/null ||
			die "$node did not stop (see $dir/log/$node.log)"
	else
		say "$node is not running: starting it"
	fi
	run_server "$bindir/pg_ctl" -D "$dir/$node" -l "$dir/log/$node.log" -w -t 60 start >/dev/null ||
		die "$node did not start again (see $dir/log/$node.log)"
}

cmd_distribute() {
	load_shape
	node_running coordinator || die "the coordinator is not running: run '$prog start --dir $dir' first"
	local url root
	url="postgres://postgres@127.0.0.1:$(node_port coordinator)/$database"
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	if [ -n "${COROTASK:-}" ]; then
		"$COROTASK" migrate --citus --database-url "$url"
	else
		(cd "$root" && go run ./cmd/corotask migrate --citus --database-url "$url")
	fi || die "distributing $database failed (see above)"
}

"cmd_$command"
