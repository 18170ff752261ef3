#!/usr/bin/env bash
# The Debian package (make package, cmake/packaging.cmake), built from this build tree into a scratch folder:
#   1. it holds the binary, the agent's helpers, the units, the configuration, man pages and docs where they belong,
#      with the maintainer scripts and conffiles, and Depends from the libraries it links;
#   2. the unpacked binary runs and finds its installed helpers and data (--version, gpupool-fetch-traces --help,
#      sim claims' scenarios);
#   3. systemd-analyze verify accepts both units, their ExecStart pointed at the unpacked binary (it exits 0 on some
#      errors, so any output fails);
#   4. lintian reports no tag that packaging/lintian-explained.txt does not explain.
#   package_test.sh BUILD_DIR SOURCE_DIR
# Exits 77 (skipped) without cpack, dpkg-deb, help2man or systemd-analyze; lintian is skipped (saying so) when absent.
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
skip() { echo "package_test: skipped: $*"; exit 77; }
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
for tool in cpack dpkg-deb help2man systemd-analyze; do command -v "$tool" >/dev/null || skip "needs $tool"; done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || fail "cpack: $(tail -20 "$work/cpack.log")"
deb=$(ls "$work"/out/gpupool_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "no .deb: $(tail -20 "$work/cpack.log")"
root="$work/root"
dpkg-deb -x "$deb" "$root" || fail "dpkg-deb -x"
dpkg-deb -e "$deb" "$work/control" || fail "dpkg-deb -e"

# 1. What is where.
for f in usr/bin/gpupool usr/bin/gpupool-fetch-traces usr/lib/gpupool/gpupool-shim \
         usr/lib/gpupool/libgpupool-cuda-cap.so usr/lib/gpupool/gpupool-cap-gpu-check \
         usr/share/gpupool/traces/manifest.tsv usr/share/gpupool/traces/derive-fgd-summary.py \
         usr/share/gpupool/scenarios/claims/C-PRIO.yaml \
         lib/systemd/system/gpupool-server.service lib/systemd/system/gpupool-agent.service \
         etc/gpupool/server.yaml etc/default/gpupool-server etc/default/gpupool-agent \
         usr/share/man/man1/gpupool.1.gz usr/share/man/man1/gpupool-server.1.gz usr/share/man/man1/gpupool-agent.1.gz usr/share/man/man1/gpupool-fetch-traces.1.gz \
         usr/share/doc/gpupool/copyright usr/share/doc/gpupool/changelog.gz usr/share/doc/gpupool/operating.md \
         usr/share/doc/gpupool/examples/production/create-node.sh; do
  [ -e "$root/$f" ] || fail "the package lacks /$f"
done
[ -x "$root/usr/lib/gpupool/gpupool-shim" ] || fail "gpupool-shim is not executable"
for s in postinst prerm postrm conffiles; do [ -f "$work/control/$s" ] || fail "no $s in the control archive"; done
grep -qx /etc/gpupool/server.yaml "$work/control/conffiles" || fail "server.yaml is not a conffile"
depends=$(dpkg-deb -f "$deb" Depends)
for d in libc6 libsqlite3 adduser; do
  echo "$depends" | grep -q "$d" || fail "Depends lacks $d: $depends"
done
file "$root/usr/bin/gpupool" | grep -q "not stripped" && fail "the binary is not stripped"

# 2. The unpacked binary finds what it was installed with.
"$root/usr/bin/gpupool" --version | grep -q "^gpupool [0-9]" || fail "gpupool --version"
zcat "$root/usr/share/man/man1/gpupool-server.1.gz" | grep -q -- "-data" || fail "gpupool-server(1) lacks --data"
"$root/usr/bin/gpupool-fetch-traces" --check "$work/no-traces" >"$work/check.log" 2>&1
grep -q "missing: philly-runtime/philly_runtime.csv" "$work/check.log" || fail "gpupool-fetch-traces: $(cat "$work/check.log")"
(cd "$work" && "$root/usr/bin/gpupool" sim claims --only C-NONE >"$work/claims.log" 2>&1)
grep -q "C-NONE" "$work/claims.log" || fail "sim claims: $(cat "$work/claims.log")"
grep -q "cannot open" "$work/claims.log" && fail "sim claims did not find the installed scenarios: $(cat "$work/claims.log")"

# 3. The units verify, against the unpacked binary.
mkdir -p "$work/units"
for u in gpupool-server gpupool-agent; do
  sed -e "s#/usr/bin/gpupool#$root/usr/bin/gpupool#g" -e "s#EnvironmentFile=/etc/default#EnvironmentFile=-$root/etc/default#" \
      "$root/lib/systemd/system/$u.service" >"$work/units/$u.service"
done
(cd "$work/units" && systemd-analyze verify --man=no gpupool-server.service gpupool-agent.service) >"$work/verify.log" 2>&1
if [ -s "$work/verify.log" ]; then fail "systemd-analyze verify: $(cat "$work/verify.log")"; fi

# 4. lintian: every tag explained.
if command -v lintian >/dev/null; then
  lintian --tag-display-limit 0 --no-cfg "$deb" >"$work/lintian.log" 2>&1
  tags=$(sed -n 's/^[EWIXP]: gpupool[^:]*: \([a-z0-9-]*\).*/\1/p' "$work/lintian.log" | sort -u)
  for t in $tags; do
    grep -q "^$t " "$src/packaging/lintian-explained.txt" || fail "lintian tag '$t' is not explained in packaging/lintian-explained.txt: $(grep " $t" "$work/lintian.log" | head -3)"
  done
  echo "package_test: lintian: $(echo $tags | wc -w) tag(s), each explained"
else
  echo "package_test: lintian not installed: lint skipped"
fi
# The example Prometheus configuration of examples/production is valid (when promtool is installed).
if command -v promtool >/dev/null; then
  promtool check config "$src/examples/production/prometheus.yml" >"$work/promtool.log" 2>&1 || fail "promtool: $(cat "$work/promtool.log")"
fi
echo "package_test: all checks passed ($(du -k "$deb" | cut -f1) KiB)"
