#!/bin/sh
# Install every maos binary into one directory: `maos` (the client and the hook every agent
# CLI runs), `maosd` (the daemon), `maos-mcp` (`maos mcp`), `maos-top` (`maos top`),
# `maos-dash` (`maos dashboard`) and `maos-demo` (`maos demo`). `maos` runs the others from
# its own directory (else from PATH), so they belong together.
#
#   ./install.sh                      cargo install --locked --path <crate>, each crate, into
#                                     cargo's bin directory ($CARGO_INSTALL_ROOT/bin, else
#                                     $CARGO_HOME/bin, else ~/.cargo/bin)
#   ./install.sh --root DIR           into DIR/bin instead (cargo install --root DIR)
#   ./install.sh --debug              a debug build (cargo install --debug): quicker to build,
#                                     slower to run
#   ./install.sh --from-target DIR    copy already built binaries from DIR (target/release,
#                                     after `cargo build --release --workspace --bins`)
#
# Exit codes: 0 installed; 1 a build or a copy failed; 2 a bad command line.

set -eu

usage() {
    sed -n '2,16s/^# \{0,1\}//p' "$0"
}

here=$(cd "$(dirname "$0")" && pwd)
root=
debug=
from=
while [ $# -gt 0 ]; do
    case $1 in
        --root)
            [ $# -ge 2 ] || { echo "install.sh: --root needs a directory" >&2; exit 2; }
            root=$2; shift 2 ;;
        --root=*) root=${1#--root=}; shift ;;
        --debug) debug=1; shift ;;
        --from-target)
            [ $# -ge 2 ] || { echo "install.sh: --from-target needs a directory (e.g. target/release)" >&2; exit 2; }
            from=$2; shift 2 ;;
        --from-target=*) from=${1#--from-target=}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown argument '$1' (see ./install.sh --help)" >&2; exit 2 ;;
    esac
done
if [ -n "$debug" ] && [ -n "$from" ]; then
    echo "install.sh: --debug builds, --from-target copies: give one of them" >&2
    exit 2
fi

# Each binary and the crate (directory, package) it is built from.
crates="maos-client:maos maosd:maosd maos-mcp:maos-mcp maos-top:maos-top maos-dash:maos-dash maos-demo:maos-demo"

# cargo's own rule for where `cargo install` puts binaries.
if [ -z "$root" ]; then
    root=${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}
fi
case $root in
    /*) ;;
    *) root=$(pwd)/$root ;;
esac
bin=$root/bin

if [ -n "$from" ]; then
    case $from in
        /*) ;;
        *) from=$(pwd)/$from ;;
    esac
    for pair in $crates; do
        name=${pair#*:}
        if [ ! -x "$from/$name" ]; then
            echo "install.sh: $from/$name is missing: build it first with \`cargo build --release --workspace --bins\` (or drop --from-target)" >&2
            exit 1
        fi
    done
    mkdir -p "$bin"
    for pair in $crates; do
        name=${pair#*:}
        # Beside the old file, then renamed over it: a running maos keeps its own copy.
        cp "$from/$name" "$bin/.$name.tmp"
        chmod 755 "$bin/.$name.tmp"
        mv -f "$bin/.$name.tmp" "$bin/$name"
    done
else
    command -v cargo >/dev/null 2>&1 || {
        echo "install.sh: cargo is not on PATH: install Rust (https://rustup.rs) first" >&2
        exit 1
    }
    for pair in $crates; do
        dir=${pair%%:*}
        echo "install.sh: cargo install --locked --path $dir${debug:+ --debug}" >&2
        # --force: replace the binaries an earlier install (or a copy by hand) left there.
        if ! cargo install --locked --force --root "$root" ${debug:+--debug} --path "$here/$dir"; then
            echo "install.sh: building $dir failed (see above); nothing after it was installed" >&2
            exit 1
        fi
    done
fi

echo "maos installed in $bin:"
for pair in $crates; do
    echo "  $bin/${pair#*:}"
done
case ":${PATH:-}:" in
    *":$bin:"*)
        found=$(command -v maos 2>/dev/null || true)
        if [ -n "$found" ] && [ "$found" != "$bin/maos" ]; then
            echo "warning: $found comes before $bin/maos on PATH: agent hooks run that one; remove it or put $bin first" >&2
        fi
        ;;
    *)
        echo "warning: $bin is not on PATH; agent CLIs run \`maos hook\` from PATH. Add it, e.g. in ~/.profile:" >&2
        echo "  export PATH=\"$bin:\$PATH\"" >&2
        ;;
esac
echo "next: in each project your agents work on (or once with --user):"
echo "  maos install-hooks && maos doctor"
echo "then restart Claude Code (add --codex or --gemini for those CLIs). A daemon run as a service: \`maos daemon install\` again."
