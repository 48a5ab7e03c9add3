#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests. It listens only on a Unix socket inside its
# own directory, so it needs no free port and nothing outside the machine can reach it.
#
#   .ci/postgres.sh install                  # install Debian's postgresql if absent (root)
#   dir=$(.ci/postgres.sh init)              # a new cluster in a new temporary directory
#   url=$(.ci/postgres.sh start "$dir")      # start it; prints its URL
#   .ci/postgres.sh stop "$dir" [immediate]  # stop it (immediate: as if it crashed)
#   .ci/postgres.sh remove "$dir"            # stop it if running, then delete it
#
# To run the PostgreSQL tests locally:
#   dir=$(.ci/postgres.sh init) && export TERRARIUM_TEST_POSTGRES=$(.ci/postgres.sh start "$dir")
#   go test ./store/...
#   .ci/postgres.sh remove "$dir"
#
# initdb and postgres refuse to run as root; as root, the cluster runs as the user
# "postgres", created if absent. The superuser is "terrarium", trusted without a password
# (only the socket's owner and root can reach the socket).
set -euo pipefail

pg_user=postgres

die() {
	echo "postgres.sh: $*" >&2
	exit 1
}

# find_bindir prints the directory of initdb and pg_ctl, from PATH or else Debian's
# newest, and fails if there is none.
find_bindir() {
	if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
		dirname "$(command -v initdb)"
		return
	fi
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[[ -n $d && -x $d/initdb ]] && echo "$d"
}

bindir() {
	find_bindir || die "PostgreSQL not found: run '.ci/postgres.sh install' as root, or install it yourself"
}

# as_owner runs a PostgreSQL program as the cluster's owner.
as_owner() {
	if [[ $(id -u) == 0 ]]; then
		runuser -u "$pg_user" -- "$@"
	else
		"$@"
	fi
}

check_dir() {
	[[ -n ${1:-} && -f $1/data/PG_VERSION ]] || die "${1:-(none)} is not a cluster made by '.ci/postgres.sh init'"
}

cmd_install() {
	if find_bindir >/dev/null; then
		return
	fi
	[[ $(id -u) == 0 ]] || die "installing PostgreSQL needs root"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	# The package starts a system cluster of its own; the tests use theirs.
	if command -v pg_lsclusters >/dev/null; then
		pg_lsclusters --no-header | while read -r version name _; do
			pg_ctlcluster "$version" "$name" stop || true
		done
	fi
}

cmd_init() {
	local bin dir
	bin=$(bindir)
	dir=$(mktemp -d "${TMPDIR:-/tmp}/terrarium-pg.XXXXXX")
	if [[ $(id -u) == 0 ]]; then
		id -u "$pg_user" >/dev/null 2>&1 || useradd --system --user-group --no-create-home "$pg_user"
		chown "$pg_user:" "$dir"
	fi
	as_owner "$bin/initdb" --pgdata="$dir/data" --username=terrarium --auth=trust \
		--encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
		die "initdb failed: $(cat "$dir/initdb.log")"
	cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$dir'
EOF
	echo "$dir"
}

cmd_start() {
	check_dir "${1:-}"
	local dir=$1 bin
	bin=$(bindir)
	as_owner "$bin/pg_ctl" --pgdata="$dir/data" --log="$dir/postgres.log" --wait --silent start ||
		die "PostgreSQL did not start: $(tail -n 20 "$dir/postgres.log")"
	echo "postgres://terrarium@/postgres?host=$dir&sslmode=disable"
}

cmd_stop() {
	check_dir "${1:-}"
	local bin
	bin=$(bindir)
	as_owner "$bin/pg_ctl" --pgdata="$1/data" --mode="${2:-fast}" --wait --silent stop
}

cmd_remove() {
	local dir=${1:-} bin
	[[ -n $dir && -d $dir ]] || return 0
	check_dir "$dir"
	bin=$(bindir)
	if as_owner "$bin/pg_ctl" --pgdata="$dir/data" status >/dev/null 2>&1; then
		cmd_stop "$dir" immediate
	fi
	rm -rf -- "$dir"
}

case ${1:-} in
install | init | start | stop | remove)
	cmd=$1
	shift
	"cmd_$cmd" "$@"
	;;
*) die "usage: postgres.sh install | init | start DIR | stop DIR [fast|immediate] | remove DIR" ;;
esac
