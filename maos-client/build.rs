//! Link the `maos` binary statically on x86_64 glibc Linux, from a plain `cargo build`.
//!
//! Agent CLIs start `maos hook` on every tool call, so the client's start-up is hook latency,
//! and a third of a dynamically linked program's start-up is the loader (README,
//! Performance). The usual way, `RUSTFLAGS="-C target-feature=+crt-static"`, needs
//! `--target` (without it the flag reaches the workspace's proc-macros, which cannot be
//! static) and applies to every binary; Cargo has no stable per-package rustflags. So this
//! script does the same for the `maos` binary alone, with link arguments: `-static-pie`, and
//! a directory searched before the system's in which every library rustc asks for (`-lc`,
//! `-lgcc_s`, ...) is a linker script naming the static archive (`libc.a`, `libgcc_eh.a` and
//! `libgcc.a` for `libgcc_s`: what `+crt-static` links). Nothing else changes: the daemon, the
//! tests and the other binaries link as before.
//!
//! Elsewhere (macOS, other architectures, musl, a cross build), or when an archive is missing
//! (`libc6-dev` ships them on Debian), or with `MAOS_CLIENT_LINK=dynamic`, the client links
//! the default way and this script says why with a warning only when it expected to work.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries rustc links a std program against on glibc Linux (dynamic: `-lgcc_s` and
/// these; `+crt-static`: `-lgcc_eh -lgcc` and these).
const LIBS: [&str; 6] = ["c", "m", "rt", "pthread", "dl", "util"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MAOS_CLIENT_LINK");
    println!("cargo:rerun-if-env-changed=CC");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let eligible = var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("TARGET") == var("HOST");
    if !eligible || var("MAOS_CLIENT_LINK") == "dynamic" {
        return;
    }
    let out = PathBuf::from(var("OUT_DIR")).join("static-libs");
    match static_libs(&out) {
        Ok(()) => {
            println!("cargo:rustc-link-arg-bin=maos=-L{}", out.display());
            println!("cargo:rustc-link-arg-bin=maos=-static-pie");
        }
        Err(why) => println!("cargo:warning=maos links dynamically (slower hook start-up): {why}"),
    }
}

/// Write the linker scripts into `dir`.
fn static_libs(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let eh = archive("libgcc_eh.a")?;
    let gcc = archive("libgcc.a")?;
    let write = |name: String, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    // libgcc_s (the unwinder and compiler helpers) from its static counterparts.
    write(
        "libgcc_s.a".into(),
        format!("GROUP ( {} {} )\n", eh.display(), gcc.display()),
    )?;
    for lib in LIBS {
        let real = archive(&format!("lib{lib}.a"))?;
        // libc and libgcc refer to each other: one group, as `+crt-static` links them.
        let text = if lib == "c" {
            format!(
                "GROUP ( {} {} {} )\n",
                real.display(),
                eh.display(),
                gcc.display()
            )
        } else {
            format!("INPUT ( {} )\n", real.display())
        };
        write(format!("lib{lib}.a"), text)?;
    }
    Ok(())
}

/// Where the C compiler finds a static archive.
fn archive(name: &str) -> Result<PathBuf, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg(format!("-print-file-name={name}"))
        .output()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // Without the file, cc prints the bare name back.
    if path.is_absolute() && path.is_file() {
        Ok(path)
    } else {
        Err(format!("{cc} finds no {name}"))
    }
}
