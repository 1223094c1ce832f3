#!/bin/sh
# Installs a pinned PyPI package into a virtual environment in a cache outside the repository
# and prints the environment's directory (its python is bin/python).
# Usage: install_py.sh PACKAGE VERSION   (e.g. install_py.sh mcp 2.3.0)
# Reused when the marker file from a finished install is present.
set -eu
pkg="$1"
version="$2"
cache="${MAOS_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/maos-conformance}"
dir="$cache/pypi+$pkg@$version"
marker="$dir/.maos-installed"
if [ ! -f "$marker" ]; then
    tmp="$dir.partial.$$"
    rm -rf "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$cache"
    python3 -m venv "$tmp" >&2
    "$tmp/bin/python" -m pip install --quiet --disable-pip-version-check "$pkg==$version" >&2
    touch "$tmp/.maos-installed"
    if [ -f "$marker" ]; then
        rm -rf "$tmp"
    else
        rm -rf "$dir"
        # A venv's scripts name its directory: it is made where it stays.
        mv "$tmp" "$dir"
    fi
    trap - EXIT
fi
printf '%s\n' "$dir"
