#!/usr/bin/env bash
# What `npm run test:all` needs beyond Node and npm, made ready where this machine allows it: spin and a C
# compiler for the protocol model, Chromium for the console's browser tests, PostgreSQL on 127.0.0.1:5432, MariaDB (or MySQL) on 127.0.0.1:3306 with a
# database named test, and Redis on 127.0.0.1:6379. A missing tool
# is installed from the system's packages when we are root with apt-get (set IDEMPOTOOL_NO_INSTALL=1 to
# forbid that); a server that is installed but stopped is started. Whatever is still missing is named, one
# line each, with how to get it, and the script exits 1: the tests that need it would fail, never skip.
set -uo pipefail
missing=0
say() { echo "test:all: $*" >&2; }

may_install() { [[ ${IDEMPOTOOL_NO_INSTALL:-} != 1 && $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; }
apt_updated=false
apt_install() {
  $apt_updated || { apt-get update -qq >/dev/null 2>&1; apt_updated=true; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1
}

need_command() { # need_command <command> <Debian package> <advice>
  command -v "$1" >/dev/null 2>&1 && return 0
  if may_install; then
    say "installing $2 (for $1) from the system's packages"
    apt_install "$2" && command -v "$1" >/dev/null 2>&1 && return 0
  fi
  say "missing $1: $3"
  missing=1
}

need_command spin spin "install spin (Debian/Ubuntu: apt-get install spin; macOS: brew install spin)"
command -v cc >/dev/null 2>&1 || need_command gcc gcc "install a C compiler (apt-get install gcc), which spin's checker needs"
# The console's browser tests drive the system's Chromium (Playwright cannot fetch its own browser here).
need_command chromium chromium "install Chromium (Debian/Ubuntu: apt-get install chromium), which the console's browser tests drive"

wait_for() { for _ in $(seq 1 30); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done; return 1; }

postgres_up() { pg_isready -h 127.0.0.1 -p 5432 -q; }
if ! postgres_up 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [[ -d /etc/postgresql ]]; then
    say "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start >/dev/null 2>&1
    wait_for postgres_up
  fi
  postgres_up 2>/dev/null || {
    say "PostgreSQL is not up on 127.0.0.1:5432: start one with trust auth and a database named test (apt-get install postgresql)"
    missing=1
  }
fi

mysql_up() { mysqladmin -h 127.0.0.1 -P 3306 -u root ping; }
if ! mysql_up >/dev/null 2>&1; then
  if command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]]; then
    say "starting MariaDB"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd >/dev/null 2>&1
    wait_for mysql_up
  fi
  mysql_up >/dev/null 2>&1 || {
    say "MariaDB is not up on 127.0.0.1:3306: start one with root and an empty password (apt-get install mariadb-server)"
    missing=1
  }
fi
if mysql_up >/dev/null 2>&1; then
  mysql -h 127.0.0.1 -P 3306 -u root -e "CREATE DATABASE IF NOT EXISTS test" >/dev/null 2>&1 || {
    say "cannot create the database test on MariaDB at 127.0.0.1:3306 as root"
    missing=1
  }
fi

redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping; }
if ! redis_up >/dev/null 2>&1; then
  if command -v redis-server >/dev/null 2>&1; then
    say "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null 2>&1
    wait_for redis_up
  fi
  redis_up >/dev/null 2>&1 || {
    say "Redis is not up on 127.0.0.1:6379: start one (apt-get install redis-server)"
    missing=1
  }
fi

exit $missing
