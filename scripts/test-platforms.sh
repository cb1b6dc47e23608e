#!/usr/bin/env bash
# test-platforms.sh: the platform check. The suite (scripts/test.sh) runs on
# the machine's own Debian release; this checks the other supported one and
# the Debian package on both:
#
#   1. a root of the OTHER release (Debian 12 bookworm <-> Debian 13 trixie;
#      debootstrap --variant=minbase from Debian's archive), where
#      scripts/install-deps.sh runs as a user would run it, then the -Werror
#      build with gcc and with clang, the unit tests of both trees, the
#      libFuzzer tree (clang, -Werror, built only),
#      scripts/demo.sh (the simulator with the shared datasets, mongocdc on
#      stdout), and `cpack -G DEB`;
#   2. the package test, for EACH release: a clean minbase root gets
#      `apt-get install ./mongocdc_*.deb` (the host's package, built from
#      MCDC_PLATFORM_HOST_BUILD or a tree of its own, for the host's release;
#      the one built in step 1 for the other), must have the user, the unit
#      and the conffile, validates the shipped example configuration as the
#      daemon's user, then runs the unit's ExecStart as the unit's User
#      against the MongoDB simulator on this machine with the file sink and
#      checks the snapshot and streamed events and the final offsets.
#
# Debian roots are cached as zstd tarballs outside the clone, so a fresh
# clone (CI) starts warm: MCDC_PLATFORM_CACHE (default
# /var/cache/mongocdc-platform) holds <release>-minbase.tar.zst and
# <release>-deps-<hash of install-deps.sh>.tar.zst (the root after
# install-deps), remade when older than MCDC_PLATFORM_MAX_AGE_DAYS (default
# 7), and the .deb files apt fetched for the package test. Roots are unpacked
# under MCDC_PLATFORM_BUILD (default build/platform), with logs in its logs/;
# they are deleted at the end (MCDC_PLATFORM_KEEP=1 keeps them).
#
# Needs root (chroot, mounts; re-runs itself under sudo when it can), network
# access to the Debian archive (MCDC_PLATFORM_MIRROR, default
# http://deb.debian.org/debian) on a cold cache and for the package test, and
# MCDC_SHARED_DIR (default ../shared) for the demo's datasets.
# MCDC_PLATFORM_RELEASES overrides the release(s) of step 1 (e.g. "bookworm
# trixie"). JOBS: build parallelism (default: number of cores).
#
# Prints one line per step ("platform: trixie gcc -Werror build: ok (41 s)")
# and a last summary line; exits non-zero if any step failed.
set -uo pipefail
{ # the whole script is read before it runs: editing it meanwhile is harmless

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    exec sudo -n -E "$0" "$@"
  fi
  echo "test-platforms: FAILED: needs root (debootstrap, chroot, mounts) and sudo -n is not available"
  exit 1
fi

CACHE=${MCDC_PLATFORM_CACHE:-/var/cache/mongocdc-platform}
WORKDIR=${MCDC_PLATFORM_BUILD:-$ROOT/build/platform}
MIRROR=${MCDC_PLATFORM_MIRROR:-http://deb.debian.org/debian}
MAX_AGE_DAYS=${MCDC_PLATFORM_MAX_AGE_DAYS:-7}
SHARED=${MCDC_SHARED_DIR:-$ROOT/../shared}
JOBS=${JOBS:-$(nproc)}
LOGS=$WORKDIR/logs
T0=$SECONDS

# --- releases ----------------------------------------------------------------
# The other supported release than this machine's; both when this machine is
# neither (then the host package test is skipped: no host package to test).
host_rel=$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-unknown}")
case "$host_rel" in
  bookworm) OTHERS=(trixie) ;;
  trixie) OTHERS=(bookworm) ;;
  *) OTHERS=(bookworm trixie) ;;
esac
if [ -n "${MCDC_PLATFORM_RELEASES:-}" ]; then read -r -a OTHERS <<<"$MCDC_PLATFORM_RELEASES"; fi

mkdir -p "$CACHE" "$WORKDIR" "$LOGS" || { echo "test-platforms: FAILED: cannot create $CACHE or $WORKDIR"; exit 1; }
WORKDIR=$(cd "$WORKDIR" && pwd)
# One check at a time per build folder (they would share the roots).
exec 8>"$WORKDIR/.lock"
flock -n 8 || { echo "test-platforms: FAILED: another check is running in $WORKDIR"; exit 1; }

RESULTS=()   # "ok|FAILED <step>"
FAILED=0
MOUNTS=()    # mount points to undo, in order
ROOTS=()     # unpacked roots to delete
PIDS=()      # background processes started here
SIM_OUT=""
TB=""        # the tarball minbase_tarball or deps_tarball chose

say() { echo "platform: $*"; }

# step NAME LOG CMD...: runs CMD with output to LOG, reports the result line.
step() {
  local name=$1 log=$2 t=$SECONDS rc
  shift 2
  "$@" >"$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    RESULTS+=("ok      $name ($((SECONDS - t)) s)")
    say "$name: ok ($((SECONDS - t)) s)"
  else
    RESULTS+=("FAILED  $name (exit $rc, log $log)")
    FAILED=$((FAILED + 1))
    say "$name: FAILED (exit $rc after $((SECONDS - t)) s); last lines of $log:"
    tail -n 40 "$log" | sed 's/^/    /'
  fi
  return $rc
}

mount_at() { # mount args... (last one: the mount point)
  mount "$@" && MOUNTS+=("${!#}")
}

# Processes whose root directory lies in one of our roots (a daemon or
# simulator a failed step left behind), by pid.
kill_in_roots() {
  local r p link
  for r in "${ROOTS[@]}"; do
    for p in /proc/[0-9]*; do
      link=$(readlink "$p/root" 2>/dev/null) || continue
      case "$link" in "$r" | "$r"/*) kill -KILL "${p#/proc/}" 2>/dev/null ;; esac
    done
  done
}

unmount_all() {
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    umount "${MOUNTS[$i]}" 2>/dev/null || umount -l "${MOUNTS[$i]}" 2>/dev/null
  done
  MOUNTS=()
}

# Deletes an unpacked root, never through a mount still in it.
remove_root() {
  local r=$1
  if grep -q " $r[/ ]" /proc/self/mounts; then
    echo "test-platforms: $r still has mounts; not deleting it" >&2
    return 1
  fi
  rm -rf --one-file-system "$r"
}

cleanup() {
  set +e
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  sleep 0.5
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  kill_in_roots
  sleep 0.2
  unmount_all
  if [ "${MCDC_PLATFORM_KEEP:-0}" != 1 ]; then
    for p in "${ROOTS[@]}"; do remove_root "$p"; done
  fi
  # Run through sudo: what it wrote in the user's tree goes back to the user.
  if [ -n "${SUDO_UID:-}" ] && [ -n "${SUDO_GID:-}" ]; then
    chown "$SUDO_UID:$SUDO_GID" "$WORKDIR" "$WORKDIR"/* 2>/dev/null
    chown -R "$SUDO_UID:$SUDO_GID" "$LOGS" "$WORKDIR"/deb-* "$WORKDIR/host-build" \
      ${MCDC_PLATFORM_HOST_BUILD:+"$MCDC_PLATFORM_HOST_BUILD"} 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Runs a command in ROOT with a clean environment (nothing of the caller's
# MCDC_* or build settings leaks in).
in_root() { # root cmd...
  local r=$1
  shift
  chroot "$r" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM=dumb MONGOC_DISABLE_SHM=1 DEBIAN_FRONTEND=noninteractive "$@"
}

# Mounts what the steps need in a root: /proc (ps, java, ctest), a tmpfs on
# /dev/shm (Python's multiprocessing); with a third argument, the cache of the
# .debs apt fetched for the package test (a few runtime libraries, so it stays
# small); copies the host's resolver configuration.
prepare_root() { # root release [apt-cache]
  local r=$1 rel=$2
  cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null
  mkdir -p "$r/proc" "$r/dev/shm"
  mount_at -t proc proc "$r/proc" &&
    mount_at -t tmpfs -o mode=1777,size=512m shm "$r/dev/shm" || return 1
  if [ -n "${3:-}" ]; then
    mkdir -p "$CACHE/apt-$rel/partial"
    mount_at --bind "$CACHE/apt-$rel" "$r/var/cache/apt/archives"
  fi
}

release_roots() { # root...: unmounts everything and deletes the roots given
  local r
  kill_in_roots
  unmount_all
  if [ "${MCDC_PLATFORM_KEEP:-0}" != 1 ]; then
    for r in "$@"; do remove_root "$r"; done
  fi
}

fresh() { # tarball: true when it exists and is younger than MAX_AGE_DAYS
  [ -f "$1" ] && [ -z "$(find "$1" -mtime +"$MAX_AGE_DAYS" 2>/dev/null)" ]
}

unpack() { # tarball dir
  rm -rf --one-file-system "$2" && mkdir -p "$2" && tar -C "$2" --zstd -xpf "$1"
}

pack() { # dir tarball: written beside and renamed, so readers never see half of it
  tar -C "$1" --zstd -cpf "$2.tmp.$$" --one-file-system . && mv -f "$2.tmp.$$" "$2"
}

# The minbase tarball of a release, made with debootstrap when missing or
# old; sets TB to its path.
minbase_tarball() { # release
  local rel=$1 tb="$CACHE/$1-minbase.tar.zst" d
  if ! fresh "$tb"; then
    d=$WORKDIR/debootstrap-$rel
    rm -rf --one-file-system "$d"
    debootstrap --variant=minbase "$rel" "$d" "$MIRROR" &&
      in_root "$d" apt-get clean &&
      pack "$d" "$tb"
    local rc=$?
    rm -rf --one-file-system "$d"
    [ $rc -eq 0 ] || return 1
  fi
  TB=$tb
}

# The release's root after scripts/install-deps.sh, cached per content of
# install-deps.sh: a change to the package list makes a new one. Sets TB to
# its path.
deps_tarball() { # release
  local rel=$1 hash tb base d rc
  hash=$(sha256sum "$ROOT/scripts/install-deps.sh" | cut -c1-12)
  tb="$CACHE/$rel-deps-$hash.tar.zst"
  if ! fresh "$tb" || [ "$(find "$CACHE/$rel-minbase.tar.zst" -newer "$tb" 2>/dev/null)" ]; then
    minbase_tarball "$rel" || return 1
    base=$TB
    d=$WORKDIR/deps-$rel
    ROOTS+=("$d")
    unpack "$base" "$d" && prepare_root "$d" "$rel" &&
      cp "$ROOT/scripts/install-deps.sh" "$d/root/install-deps.sh" &&
      in_root "$d" /root/install-deps.sh
    rc=$?
    # A cached root must have everything: an optional package missing here
    # (the JDK) would make every run from it reinstall and fail alike.
    if [ $rc -eq 0 ]; then in_root "$d" /root/install-deps.sh | grep -q 'already installed' || rc=1; fi
    release_roots
    if [ $rc -eq 0 ]; then
      in_root "$d" apt-get clean
      rm -rf "$d/var/lib/apt/lists/"* "$d/root/install-deps.sh"
      pack "$d" "$tb" || rc=1
      find "$CACHE" -maxdepth 1 -name "$rel-deps-*.tar.zst" ! -name "$(basename "$tb")" -delete
    fi
    remove_root "$d"
    [ $rc -eq 0 ] || return 1
  fi
  TB=$tb
}

# One lock for the cache: two checks at once share the tarballs but only one
# makes them.
exec 9>"$CACHE/.lock"

# The source as a user's checkout has it (tracked and untracked files, not
# ignored ones such as build trees) to /src, the datasets to /shared.
copy_source() { # root
  local r=$1
  mkdir -p "$r/src" "$r/shared" || return 1
  # safe.directory: under sudo, the checkout belongs to another user.
  git -c safe.directory="$ROOT" ls-files -co --exclude-standard -z >"$WORKDIR/files.lst" || return 1
  tar --null -T "$WORKDIR/files.lst" -cf - | tar -C "$r/src" -xf - || return 1
  [ -f "$r/src/CMakeLists.txt" ] || return 1
  [ ! -d "$SHARED/datasets" ] || cp -r "$SHARED/datasets" "$r/shared/"
}

# --- step 1: the other release's build, tests, demo and package -------------
declare -A DEB   # release -> .deb to test
[ -d "$SHARED/datasets" ] || say "no datasets in $SHARED (set MCDC_SHARED_DIR): the demo step will fail"
for rel in "${OTHERS[@]}"; do
  r=$WORKDIR/$rel-build
  flock 9
  step "$rel root with install-deps (cache $CACHE)" "$LOGS/$rel-root.log" deps_tarball "$rel"
  rc=$?
  flock -u 9
  [ $rc -eq 0 ] || continue
  tb=$TB
  ROOTS+=("$r")
  if ! step "$rel unpack" "$LOGS/$rel-unpack.log" unpack "$tb" "$r"; then continue; fi
  prepare_root "$r" "$rel" || { say "$rel: mounts failed"; FAILED=$((FAILED + 1)); release_roots "$r"; continue; }
  step "$rel source and datasets copied in" "$LOGS/$rel-copy.log" copy_source "$r" || { release_roots "$r"; continue; }
  step "$rel install-deps.sh (as a user runs it)" "$LOGS/$rel-install-deps.log" \
    in_root "$r" bash -c 'cd /src && scripts/install-deps.sh'
  for cc in gcc clang; do
    if step "$rel $cc -Werror build" "$LOGS/$rel-$cc-build.log" in_root "$r" bash -c \
        "cd /src && $cc --version | head -n 1 && cmake -S . -B /b/$cc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=$cc -DMCDC_WERROR=ON && cmake --build /b/$cc -j $JOBS"; then
      step "$rel $cc unit tests" "$LOGS/$rel-$cc-unit.log" in_root "$r" \
        ctest --test-dir /b/$cc -L unit -j "$JOBS" --output-on-failure --timeout 300
    fi
  done
  # The libFuzzer tree (clang, ASan+UBSan, as scripts/test.sh builds it):
  # built with warnings as errors; the short fuzz runs stay in test.sh.
  step "$rel clang libFuzzer tree -Werror build" "$LOGS/$rel-fuzz-build.log" in_root "$r" bash -c \
    "cd /src && cmake -S . -B /b/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DMCDC_FUZZ=ON -DMCDC_WERROR=ON && cmake --build /b/fuzz -j $JOBS"
  if [ -x "$r/b/gcc/mongocdc" ]; then
    # demo.sh exits with mongocdc's status; every streamed change must have
    # come out too (it only reports a shortfall).
    step "$rel scripts/demo.sh" "$LOGS/$rel-demo.log" in_root "$r" \
      env MCDC_SHARED_DIR=/shared DEMO_BUILD_DIR=/b/gcc bash -c \
      'cd /src && scripts/demo.sh 2>&1 | tee /tmp/demo.log; [ "${PIPESTATUS[0]}" -eq 0 ] &&
       grep -q "snapshot complete" /tmp/demo.log && ! grep -q "not every change arrived" /tmp/demo.log'
    if step "$rel cpack -G DEB" "$LOGS/$rel-cpack.log" in_root "$r" bash -c 'cd /b/gcc && cpack -G DEB'; then
      mkdir -p "$WORKDIR/deb-$rel"
      rm -f "$WORKDIR/deb-$rel"/*.deb
      cp "$r"/b/gcc/mongocdc_*.deb "$WORKDIR/deb-$rel/" && DEB[$rel]=$(ls "$WORKDIR/deb-$rel"/mongocdc_*.deb)
    fi
  fi
  release_roots "$r"
done

# --- the host's package ------------------------------------------------------
host_deb() {
  local b=${MCDC_PLATFORM_HOST_BUILD:-$WORKDIR/host-build}
  if [ -z "${MCDC_PLATFORM_HOST_BUILD:-}" ]; then
    cmake -S "$ROOT" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCDC_BUILD_TESTS=OFF &&
      cmake --build "$b" --target mongocdc -j "$JOBS" || return 1
  fi
  rm -f "$b"/mongocdc_*.deb
  (cd "$b" && cpack -G DEB) || return 1
  mkdir -p "$WORKDIR/deb-$host_rel"
  rm -f "$WORKDIR/deb-$host_rel"/*.deb
  cp "$b"/mongocdc_*.deb "$WORKDIR/deb-$host_rel/"
}
case "$host_rel" in
  bookworm | trixie)
    if step "$host_rel (host) cpack -G DEB" "$LOGS/$host_rel-cpack.log" host_deb; then
      DEB[$host_rel]=$(ls "$WORKDIR/deb-$host_rel"/mongocdc_*.deb)
    fi
    ;;
esac

# --- step 2: the package in a clean root of each release ---------------------
start_simulator() {
  SIM_OUT=$WORKDIR/sim.out
  /usr/bin/python3 "$ROOT/tests/mongosim/mongosim.py" --topology replset --members 1 --base-port 0 \
    >"$SIM_OUT" 2>"$LOGS/sim.err" &
  PIDS+=($!)
  local i
  for i in $(seq 1 120); do
    grep -q '"ready"' "$SIM_OUT" 2>/dev/null && break
    sleep 0.5
  done
  SIM_URI=$(/usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1]):
    l=l.strip()
    if l.startswith("{") and json.loads(l).get("ready"): print(json.loads(l)["uri"]); break' "$SIM_OUT")
  [ -n "$SIM_URI" ]
}

# The package test proper, in the clean root R of release REL; a subshell
# with set -e (the first failing command fails it).
package_test() ( # release deb root
  set -e
  local rel=$1 deb=$2 r=$3 db=pkg_${1} unit user exec_start pid i
  cp "$deb" "$r/tmp/"
  in_root "$r" apt-get update -qq
  in_root "$r" apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")"
  echo "== installed: $(in_root "$r" dpkg-query -W -f='${Package} ${Version}, Installed-Size ${Installed-Size} KiB' mongocdc)"
  echo "== Depends: $(in_root "$r" dpkg-query -W -f='${Depends}' mongocdc)"
  in_root "$r" dpkg-query -W -f='${Conffiles}\n' mongocdc | grep -q '/etc/mongocdc/mongocdc.yaml' ||
    { echo "/etc/mongocdc/mongocdc.yaml is not a conffile"; return 1; }
  unit=$r/usr/lib/systemd/system/mongocdc.service
  [ -f "$unit" ] || { echo "no unit at /usr/lib/systemd/system/mongocdc.service"; return 1; }
  [ -f "$r/usr/share/doc/mongocdc/README.md" ] || { echo "no /usr/share/doc/mongocdc/README.md"; return 1; }
  head -n 1 "$r/usr/share/doc/mongocdc/copyright" |
    grep -qx 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
    { echo "no machine-readable /usr/share/doc/mongocdc/copyright"; return 1; }
  user=$(sed -n 's/^User=//p' "$unit" | tail -n 1)
  exec_start=$(sed -n 's/^ExecStart=//p' "$unit" | tail -n 1)
  echo "== unit: User=$user ExecStart=$exec_start"
  in_root "$r" getent passwd "$user"
  # The shipped example, read as the daemon's user (0640 root:mongocdc).
  in_root "$r" setpriv --reuid="$user" --regid="$user" --init-groups -- \
    /usr/bin/mongocdc --validate -c /etc/mongocdc/mongocdc.yaml
  # What StateDirectory= and LogsDirectory= make before the start.
  install -d -m 0750 "$r/var/lib/mongocdc" "$r/var/log/mongocdc"
  in_root "$r" chown "$user:$user" /var/lib/mongocdc /var/log/mongocdc
  cat >"$r/etc/mongocdc/mongocdc.yaml" <<YAML
topic.prefix: pkgtest
mongodb.connection.string: "$SIM_URI"
collection.include.list: [$db\\..*]
snapshot.mode: initial
cursor.max.await.time.ms: 500
sink:
  type: file
  path: /var/lib/mongocdc/events.jsonl
offsets:
  storage: file
  file.path: /var/lib/mongocdc/offsets.json
  flush.interval.ms: 1000
log:
  level: info
YAML
  /usr/bin/python3 - "$SIM_URI" "$db" <<'EOF'
import sys
from pymongo import MongoClient
c = MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
c[sys.argv[2]].items.insert_many([{"_id": i, "n": i} for i in range(1, 4)])
EOF
  # Started directly (not through in_root, a function: $! would be the
  # subshell's pid, not the daemon's). The log of an earlier run must not
  # answer the wait below before this daemon has written its own.
  rm -f "$LOGS/$rel-pkg-daemon.out" "$LOGS/$rel-pkg-daemon.log"
  : >"$LOGS/$rel-pkg-daemon.log"
  # shellcheck disable=SC2086 # ExecStart's words, as systemd splits them
  chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    setpriv --reuid="$user" --regid="$user" --init-groups -- $exec_start \
    >"$LOGS/$rel-pkg-daemon.out" 2>"$LOGS/$rel-pkg-daemon.log" &
  pid=$!
  PIDS+=($pid)
  for i in $(seq 1 120); do
    grep -q 'snapshot complete' "$LOGS/$rel-pkg-daemon.log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$LOGS/$rel-pkg-daemon.log"; echo "mongocdc exited"; return 1; }
    sleep 0.5
  done
  /usr/bin/python3 - "$SIM_URI" "$db" <<'EOF'
import sys
from pymongo import MongoClient
c = MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
items = c[sys.argv[2]].items
items.insert_one({"_id": 10, "n": 10})
items.update_one({"_id": 1}, {"$set": {"n": 100}})
items.delete_one({"_id": 2})
EOF
  for i in $(seq 1 60); do
    [ "$(grep -c '"op":"[cud]"' "$r/var/lib/mongocdc/events.jsonl" 2>/dev/null)" -ge 3 ] && break
    sleep 0.5
  done
  kill -TERM "$pid"
  local st=0
  wait "$pid" || st=$?
  echo "== mongocdc exited with status $st; its log:"
  cat "$LOGS/$rel-pkg-daemon.log"
  [ $st -eq 0 ] || return 1
  /usr/bin/python3 - "$r/var/lib/mongocdc/events.jsonl" "$r/var/lib/mongocdc/offsets.json" "pkgtest.$db.items" <<'EOF'
import collections, json, sys
ops = collections.Counter()
for line in open(sys.argv[1], encoding="utf-8"):
    rec = json.loads(line)
    assert rec["topic"] == sys.argv[3], rec["topic"]
    v = rec["value"]
    ops["tombstone" if v is None else v.get("payload", v)["op"]] += 1
print("== events:", dict(sorted(ops.items())))
want = {"r": 3, "c": 1, "u": 1, "d": 1}
for op, n in want.items():
    assert ops[op] == n, "expected %d %r events, got %d" % (n, op, ops[op])
offsets = json.load(open(sys.argv[2], encoding="utf-8"))
assert offsets, "empty offsets file"
print("== offsets written:", json.dumps(offsets)[:200])
EOF
)

# Each release once (MCDC_PLATFORM_RELEASES may name the host's own).
ALL_RELS=()
for rel in "$host_rel" "${OTHERS[@]}"; do
  case "$rel" in bookworm | trixie) ;; *) continue ;; esac
  [[ " ${ALL_RELS[*]} " == *" $rel "* ]] || ALL_RELS+=("$rel")
done
pkg_releases=()
for rel in "${ALL_RELS[@]}"; do
  [ -n "${DEB[$rel]:-}" ] && pkg_releases+=("$rel")
done
for rel in "${ALL_RELS[@]}"; do
  [ -n "${DEB[$rel]:-}" ] || { RESULTS+=("FAILED  $rel package test (no package was built)"); FAILED=$((FAILED + 1)); }
done
if [ ${#pkg_releases[@]} -gt 0 ]; then
  if [ -z "$SIM_OUT" ] && ! step "MongoDB simulator on the host" "$LOGS/sim.log" start_simulator; then
    pkg_releases=()
  fi
fi
for rel in "${pkg_releases[@]}"; do
  r=$WORKDIR/$rel-clean
  flock 9
  step "$rel clean root (cache $CACHE)" "$LOGS/$rel-clean-root.log" minbase_tarball "$rel"
  rc=$?
  flock -u 9
  [ $rc -eq 0 ] || continue
  tb=$TB
  ROOTS+=("$r")
  if unpack "$tb" "$r" && prepare_root "$r" "$rel" apt-cache; then
    step "$rel package test: apt install $(basename "${DEB[$rel]}"), ExecStart as User, events" \
      "$LOGS/$rel-package-test.log" package_test "$rel" "${DEB[$rel]}" "$r"
    grep -E '^== (installed|Depends|events)' "$LOGS/$rel-package-test.log" | sed 's/^==/    /'
  else
    RESULTS+=("FAILED  $rel clean root unpack/mounts")
    FAILED=$((FAILED + 1))
  fi
  release_roots "$r"
done
for rel in "${!DEB[@]}"; do
  say "package for $rel: $(basename "${DEB[$rel]}"), $(stat -c %s "${DEB[$rel]}") bytes"
done

echo "== platform check summary (host $host_rel, checked ${OTHERS[*]}; logs in $LOGS)"
printf '  %s\n' "${RESULTS[@]}"
if [ $FAILED -eq 0 ] && [ ${#RESULTS[@]} -gt 0 ]; then
  echo "test-platforms: all ${#RESULTS[@]} steps passed in $((SECONDS - T0)) s"
  exit 0
fi
echo "test-platforms: FAILED: $FAILED of ${#RESULTS[@]} steps failed ($((SECONDS - T0)) s)"
exit 1
}
