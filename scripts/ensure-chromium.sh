#!/bin/sh
# Make sure Debian's chromium is installed for the report's headless-browser test
# (tests/test_report.py). As root, installs it with apt-get when it is missing;
# otherwise says what to do. Never fails: the test itself fails under CI=true
# when no browser is found, and is skipped elsewhere.
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium (Debian package) for the headless-browser test"
    if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
        exit 0
    fi
    echo "warning: apt-get could not install chromium" >&2
else
    echo "note: chromium is not installed and this is not root: the browser test will be skipped (fails under CI=true);" \
         "install it with: sudo apt-get install chromium" >&2
fi
exit 0
