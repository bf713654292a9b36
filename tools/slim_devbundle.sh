#!/usr/bin/env bash
# Shrinks .devbundle/ (made by ../shared/device/make_bundle.sh) so that the tree travels beside it:
# a GPU call carries 64 MiB in all, and the bundle's wheels (32 MB, deflate) left the tree 0.3 MB.
# The wheels are installed here into one folder for the GPU image's Python (3.12, x86-64), packed
# with xz (14 MB), and setup.sh unpacks that folder instead of installing the wheels.
#
#   bash ../shared/device/make_bundle.sh execnet websocket-client && bash tools/slim_devbundle.sh
set -euo pipefail
B=.devbundle
[ -d "$B/whl" ] || { echo "slim_devbundle: no $B/whl (run make_bundle.sh first, from the project root)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform any)
for p in manylinux1 manylinux2014 manylinux_2_5 manylinux_2_17 manylinux_2_26 manylinux_2_27 manylinux_2_28; do
  PLAT+=(--platform "${p}_x86_64")
done
python3 -m pip install -q --no-index --no-deps --no-compile --target "$T/site" "${PLAT[@]}" "$B"/whl/*.whl
# scripts name this machine's Python: make them name the one found there
sed -i '1s|^#!.*python.*$|#!/usr/bin/env python3|' "$T"/site/bin/* 2>/dev/null || true
tar -C "$T/site" -cf - . | xz -9 -T0 > "$B/site.tar.xz"
rm -rf "$B/whl"
sed -i 's|^python3 -m pip install .*whl/\*\.whl$|mkdir -p /tmp/site \&\& tar -xJf "$B/site.tar.xz" -C /tmp/site|' "$B/setup.sh"
grep -q 'site.tar.xz' "$B/setup.sh" || { echo "slim_devbundle: setup.sh has no pip line to replace" >&2; exit 1; }
du -sb "$B" | awk '{printf "slim_devbundle: .devbundle is %.1f MB\n", $1 / 1e6}'
