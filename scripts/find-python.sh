#!/bin/sh
# Print the path of a Python >= 3.12 interpreter, or fail with a message.
# Order: $PYTHON, python3.13, python3.12, python3, python, then pyenv's
# installed versions (whose shims refuse to run without PYENV_VERSION) and
# the usual system locations.
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
for c in ${PYTHON:-} python3.12 python3.13 python3 python; do
  if command -v "$c" >/dev/null 2>&1 && ok "$c"; then command -v "$c"; exit 0; fi
done
roots=""
if command -v pyenv >/dev/null 2>&1; then roots="$(pyenv root 2>/dev/null)"; fi
roots="$roots ${PYENV_ROOT:-$HOME/.pyenv}"
for r in $roots; do
  for c in $(ls -d "$r"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -V); do
    if ok "$c"; then echo "$c"; exit 0; fi
  done
done
for c in /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9] /opt/homebrew/bin/python3.1[2-9]; do
  if [ -x "$c" ] && ok "$c"; then echo "$c"; exit 0; fi
done
echo "mtlirt needs Python >= 3.12; none found. Install one, or set PYTHON=/path/to/python3.12" >&2
exit 1
