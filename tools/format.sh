#!/usr/bin/env bash
# Formats memsim's C++ sources (*.cpp, *.hpp, *.cu, *.cuh under the source folders) with clang-format 14 and the
# repository's .clang-format.
#   tools/format.sh           rewrites the files that differ from the style
#   tools/format.sh --check   changes nothing: lists the files that differ and exits 1 if there are any
# Exit 77 when clang-format-14 is not installed (ctest then reports the format test as skipped);
# CLANG_FORMAT=path picks another binary.
set -euo pipefail

usage() { sed -n '2,7s/^# \{0,1\}//p' "$0"; }
check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  -h|--help) usage; exit 0 ;;
  *) echo "format.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
esac

clang_format=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$clang_format" >/dev/null; then
  echo "format.sh: $clang_format not found (Debian package clang-format-14; ./bootstrap.sh installs it)" >&2
  exit 77
fi

cd "$(dirname "$0")/.."
folders=(common hwmodels traces planners sim experiments runtime tests bench fuzz)
mapfile -d '' files < <(find "${folders[@]}" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) \
                          -print0 | LC_ALL=C sort -z)

if [ "$check" = 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 "$clang_format" -i --style=file
  exit 0
fi

differing=0
for file in "${files[@]}"; do
  if ! "$clang_format" --style=file "$file" | cmp -s - "$file"; then
    [ "$differing" -gt 0 ] || echo "format.sh: these files differ from .clang-format (run tools/format.sh to fix them):"
    echo "  $file"
    differing=$((differing + 1))
  fi
done
if [ "$differing" -gt 0 ]; then
  echo "format.sh: $differing of ${#files[@]} files differ"
  exit 1
fi
echo "format.sh: all ${#files[@]} files follow .clang-format"
