#!/bin/sh
# Installs a pinned npm package into a cache outside the repository and prints the directory.
# Usage: install.sh PACKAGE VERSION   (e.g. install.sh @anthropic-ai/claude-code 2.1.328)
# Reused when the marker file from a finished install is present.
set -eu
pkg="$1"
version="$2"
cache="${MAOS_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/maos-conformance}"
dir="$cache/$(printf '%s' "$pkg" | tr '/' '+')@$version"
marker="$dir/.maos-installed"
if [ ! -f "$marker" ]; then
    tmp="$dir.partial.$$"
    rm -rf "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp"
    npm install --no-audit --no-fund --loglevel=error --prefix "$tmp" "$pkg@$version" >&2
    touch "$tmp/.maos-installed"
    if [ -f "$marker" ]; then
        # Another run finished first: keep its copy, which may be in use.
        rm -rf "$tmp"
    else
        rm -rf "$dir"
        mv "$tmp" "$dir"
    fi
    trap - EXIT
fi
printf '%s\n' "$dir"
