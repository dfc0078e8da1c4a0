#!/bin/sh
# Slurm Epilog= for nodes that run bothy: stop and remove every sandbox the
# ending job started, as the job's user (SLURM_JOB_USER, SLURM_JOB_ID are
# set by slurmd). A sandbox of an unprivileged user is already gone when
# Slurm's proctrack/cgroup ended the job's processes (it stays in the job's
# cgroup); this removes its record, upper directory and network, and ends
# what root's sandboxes (which have cgroups of their own) left running.
#
#   Epilog=/usr/share/bothy/slurm-epilog.sh   (docs/slurm.md)
#
# BOTHY: the bothy binary (default: bothy on PATH). BOTHY_EPILOG_ROOT: where
# the job's sandboxes are looked for, a list separated by colons (default:
# "default"). "default" is the user's default state directories (root's
# /var/lib/bothy; a user's ~/.local/share/bothy), any other entry a state
# root as jobs set it with BOTHY_ROOT, in which %u stands for the job's user
# (BOTHY_EPILOG_ROOT=default:/var/tmp/bothy-%u for jobs that set
# BOTHY_ROOT=/var/tmp/bothy-$USER, a root per user and node kept across jobs,
# and for those that set none; docs/slurm.md). An entry that does not exist
# on the node is skipped, and nothing is made for it: a user who never ran
# bothy here costs nothing.
# BOTHY_EPILOG_TIMEOUT (seconds, default 120) bounds each prune: a job stays
# COMPLETING until its epilog ends, and a prune that hung would hold it
# there (what a killed prune leaves, the next bothy prune removes).
set -uf # -f: no pathname expansion of the list below
# slurmd gives epilogs no PATH: timeout's execvp would not find setpriv
# and bothy without one.
export PATH="${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}"
BOTHY=${BOTHY:-bothy}
[ -n "${SLURM_JOB_ID:-}" ] || { echo "slurm-epilog: SLURM_JOB_ID is not set" >&2; exit 0; }
user=${SLURM_JOB_USER:-root}
limit=${BOTHY_EPILOG_TIMEOUT:-120}
if [ "$user" = root ] || [ "$(id -un)" = "$user" ]; then
	# prune [--root DIR]: the job's sandboxes there, as the job's user.
	prune() {
		timeout -k 5 "$limit" env -u XDG_RUNTIME_DIR "$BOTHY" "$@" prune --slurm-job "$SLURM_JOB_ID" >/dev/null
	}
	data=${HOME:-/}/.local/share/bothy
else
	# As the job's user, by setpriv (util-linux): its uid, primary group and
	# groups, no capability left, and the HOME bothy finds its default
	# state directories from. runuser, which does the same through PAM,
	# took twice the time (7.8 against 4.4 ms here), on every job's end.
	home=$(getent passwd "$user" | cut -d: -f6)
	gid=$(id -g "$user" 2>/dev/null)
	if [ -z "$home" ] || [ -z "$gid" ]; then
		echo "slurm-epilog: no such user $user" >&2
		exit 0
	fi
	prune() {
		timeout -k 5 "$limit" setpriv --reuid="$user" --regid="$gid" --init-groups --inh-caps=-all -- \
			env -u XDG_RUNTIME_DIR HOME="$home" USER="$user" LOGNAME="$user" \
			"$BOTHY" "$@" prune --slurm-job "$SLURM_JOB_ID" >/dev/null
	}
	data=$home/.local/share/bothy
fi
[ "$(id -u)" = 0 ] && [ "$user" = root ] && data=/var/lib/bothy
IFS=:
for entry in ${BOTHY_EPILOG_ROOT:-default}; do
	case $entry in
	'') ;;
	default) [ -d "$data" ] && prune ;;
	*%u*)
		case $user in
		*[!A-Za-z0-9_.-]* | .* | '')
			echo "slurm-epilog: user name $user cannot name a directory: $entry skipped" >&2
			continue
			;;
		esac
		dir=$(printf '%s' "$entry" | sed "s/%u/$user/g")
		[ -d "$dir" ] && prune --root "$dir"
		;;
	*) [ -d "$entry" ] && prune --root "$entry" ;;
	esac
done
# An epilog that fails drains the node: a sandbox that could not be
# removed is reported in slurmd's log, not by draining.
exit 0
