#!/bin/sh
# demo.sh - build, then run erlang-sample against a VM.
#   scripts/demo.sh          start a small demo VM (Debian's erlang-base),
#                            profile it, show --pstack and --blame, stop it
#   scripts/demo.sh PID      profile that VM for 5 seconds instead
set -eu
cd "$(dirname "$0")/.."
if ! command -v erl >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq erlang-base >/dev/null
fi
./build.sh
if [ $# -ge 1 ]; then
	exec build/erlang-sample -d 5 "$1"
fi
work=$(mktemp -d)
trap 'kill $vm 2>/dev/null; rm -rf "$work"' EXIT INT TERM
erlc -o "$work" tests/workloads/xb_split.erl tests/workloads/xb_deep.erl tests/workloads/xb_copy.erl
erl -noshell +S 2:2 -pa "$work" -eval 'xb_split:start(75), xb_deep:start(), xb_copy:start(), receive after infinity -> ok end.' &
erlpid=$!
# erl execs erlexec which execs beam.smp: same PID once it is up.
for i in $(seq 50); do
	case "$(readlink /proc/$erlpid/exe 2>/dev/null)" in *beam*) break ;; esac
	sleep 0.1
done
vm=$erlpid
sleep 1
echo "== erlang-sample -d 3 $vm (xb_split spends 75% in hot_a/1, 25% in hot_b/1)"
build/erlang-sample -d 3 -t 12 "$vm"
echo
echo "== erlang-sample --pstack $vm"
build/erlang-sample --pstack "$vm"
echo
echo "== erlang-sample -d 3 --blame copy_struct $vm (xb_copy sends a large term)"
build/erlang-sample -d 3 -t 5 --blame copy_struct "$vm"
