//! `maosd.log` with a size cap: a writer for tracing that rotates the log before a record would
//! take it past `max_bytes`. `maosd.log` is the newest file, `maosd.log.1` the one before, up to
//! `maosd.log.<keep>`; a rotation drops the oldest. Disk use stays within
//! `(keep + 1) × max_bytes`, plus one record when a single record is larger than the cap (it gets
//! a file of its own rather than being split or dropped).
//!
//! Hand-written rather than a crate: every file is mode 0600 whatever the umask, records are
//! never split between two files, and a failure never stops the daemon (see [`LogFile`]).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use tracing_subscriber::fmt::MakeWriter;

/// The smallest cap accepted: a few records must fit in one file for the log to be of use.
pub const MIN_MAX_BYTES: u64 = 4096;
/// The most old files kept: each rotation renames every one of them.
pub const MAX_KEEP: u32 = 100;

/// Whether a record of `record` bytes must go to a new file: the live file holds `len` bytes and
/// may hold `max_bytes`. An empty file takes any record, however large.
pub fn must_rotate(len: u64, record: u64, max_bytes: u64) -> bool {
    len > 0 && len.saturating_add(record) > max_bytes
}

/// Whether a log found at start-up holding `len` bytes is rotated before anything is written to
/// it (it was written under a larger cap, or by a version without one).
pub fn over_cap_at_open(len: u64, max_bytes: u64) -> bool {
    len > max_bytes
}

/// The renames of one rotation as (from, to) generations, 0 being the live file: oldest first,
/// so that each file moves onto a name that has already moved on, and the oldest kept file is
/// replaced. None when `keep` is 0: the live file is only emptied.
pub fn renames(keep: u32) -> impl Iterator<Item = (u32, u32)> {
    (0..keep).rev().map(|g| (g, g + 1))
}

/// The generation a file name in the log directory stands for: `n` for `<base>.<n>` (n ≥ 1,
/// written the way [`generation_path`] writes it), else None.
pub fn generation_of(name: &str, base: &str) -> Option<u32> {
    let digits = name.strip_prefix(base)?.strip_prefix('.')?;
    let n: u32 = digits.parse().ok()?;
    (n >= 1 && n.to_string() == digits).then_some(n)
}

/// The path of generation `n` of the log at `path`: `path` itself for 0, else `<path>.<n>`.
pub fn generation_path(path: &Path, n: u32) -> PathBuf {
    if n == 0 {
        return path.to_path_buf();
    }
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Open (or create) `path` for appending, mode 0600 whatever the umask and whatever mode an
/// existing file had.
fn open_private_append(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// The rotating log: give it to `tracing_subscriber::fmt().with_writer(..)`. Each record the
/// formatter writes is collected whole, then appended under a lock, rotating first when it would
/// not fit.
///
/// A failure to rotate or to write is reported once on stderr (for a daemon started by the
/// client, `logs/maosd.stderr`) and the daemon goes on: after a failed rotation it keeps
/// appending to the file it has open; a record that cannot be written is lost.
pub struct LogFile {
    state: Mutex<State>,
}

struct State {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    file: File,
    /// Bytes in `file`, as far as this process knows.
    len: u64,
    rotate_failed: bool,
    write_failed: bool,
}

impl LogFile {
    /// Open the log at `path` for appending (creating it), after removing old files beyond
    /// `keep` (left by a larger `log_keep`) and rotating a log that is already over the cap.
    /// Only failing to open `path` is an error; the rest is reported and logging goes on.
    pub fn open(path: &Path, max_bytes: u64, keep: u32) -> io::Result<LogFile> {
        let file = open_private_append(path)?;
        let len = file.metadata()?.len();
        let mut state = State {
            path: path.to_path_buf(),
            max_bytes,
            keep,
            file,
            len,
            rotate_failed: false,
            write_failed: false,
        };
        if let Err(e) = state.remove_beyond_keep() {
            state.report_rotate(&e);
        }
        if over_cap_at_open(state.len, max_bytes) {
            state.rotate_or_report();
        }
        Ok(LogFile {
            state: Mutex::new(state),
        })
    }

    /// Append one whole record, rotating first when it would take the file past the cap.
    fn append(&self, record: &[u8]) {
        // A panic elsewhere while holding the lock left the state consistent enough to go on.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.append(record);
    }
}

impl State {
    fn append(&mut self, record: &[u8]) {
        let size = u64::try_from(record.len()).unwrap_or(u64::MAX);
        if must_rotate(self.len, size, self.max_bytes) {
            self.rotate_or_report();
        }
        match self.file.write_all(record) {
            Ok(()) => self.len = self.len.saturating_add(size),
            Err(e) => {
                // Part of it may have gone out: count what the file holds.
                self.len = self.file.metadata().map_or(self.len, |m| m.len());
                if !self.write_failed {
                    self.write_failed = true;
                    eprintln!(
                        "maosd: cannot write to {}: {e}; log records are lost until it can be \
                         written again (reported once)",
                        self.path.display()
                    );
                }
            }
        }
    }

    fn rotate_or_report(&mut self) {
        if let Err(e) = self.rotate() {
            self.report_rotate(&e);
        }
    }

    fn report_rotate(&mut self, e: &str) {
        if !self.rotate_failed {
            self.rotate_failed = true;
            eprintln!(
                "maosd: cannot rotate {}: {e}; logging goes on in the file open (reported once)",
                self.path.display()
            );
        }
    }

    /// Move every kept generation one up and start an empty live file. On failure the file open
    /// so far stays the one written to.
    fn rotate(&mut self) -> Result<(), String> {
        for (from, to) in renames(self.keep) {
            let (from, to) = (
                generation_path(&self.path, from),
                generation_path(&self.path, to),
            );
            match fs::rename(&from, &to) {
                Ok(()) => {}
                // Not that many generations yet.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(format!(
                        "cannot rename {} to {}: {e}",
                        from.display(),
                        to.display()
                    ));
                }
            }
        }
        let fresh = open_private_append(&self.path)
            .and_then(|f| f.set_len(0).map(|()| f))
            .map_err(|e| format!("cannot start a new {}: {e}", self.path.display()))?;
        self.file = fresh;
        self.len = 0;
        Ok(())
    }

    /// Remove `<log>.<n>` for every n > keep in the log's directory.
    fn remove_beyond_keep(&self) -> Result<(), String> {
        let (Some(dir), Some(base)) = (
            self.path.parent(),
            self.path.file_name().and_then(|n| n.to_str()),
        ) else {
            return Ok(());
        };
        let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let beyond = name
                .to_str()
                .and_then(|n| generation_of(n, base))
                .is_some_and(|n| n > self.keep);
            if beyond {
                let old = entry.path();
                match fs::remove_file(&old) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("cannot remove {}: {e}", old.display())),
                }
            }
        }
        Ok(())
    }
}

/// One record on its way to the log: collected whole, appended when the formatter drops it.
pub struct Record<'a> {
    log: &'a LogFile,
    buf: Vec<u8>,
}

impl Write for Record<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Record<'_> {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.log.append(&self.buf);
        }
    }
}

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = Record<'a>;

    fn make_writer(&'a self) -> Record<'a> {
        Record {
            log: self,
            buf: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_record_rotates_only_when_it_would_pass_the_cap() {
        assert!(!must_rotate(0, 10, 100));
        assert!(!must_rotate(90, 10, 100), "exactly at the cap still fits");
        assert!(must_rotate(91, 10, 100));
        assert!(must_rotate(100, 1, 100));
        // An empty file takes a record larger than the cap: never split, never dropped.
        assert!(!must_rotate(0, 1000, 100));
        assert!(must_rotate(1, 1000, 100));
        assert!(
            must_rotate(u64::MAX - 1, u64::MAX, u64::MAX - 1),
            "no overflow"
        );
        assert!(!must_rotate(u64::MAX, u64::MAX, u64::MAX), "no cap to pass");
    }

    #[test]
    fn a_log_over_the_cap_at_start_is_rotated() {
        assert!(!over_cap_at_open(0, 100));
        assert!(!over_cap_at_open(100, 100));
        assert!(over_cap_at_open(101, 100));
    }

    #[test]
    fn renames_go_oldest_first() {
        assert_eq!(renames(0).count(), 0);
        assert_eq!(renames(1).collect::<Vec<_>>(), [(0, 1)]);
        assert_eq!(renames(3).collect::<Vec<_>>(), [(2, 3), (1, 2), (0, 1)]);
    }

    #[test]
    fn generations_are_named_and_recognised() {
        let p = Path::new("/h/logs/maosd.log");
        assert_eq!(generation_path(p, 0), p);
        assert_eq!(generation_path(p, 2), Path::new("/h/logs/maosd.log.2"));
        for (name, n) in [
            ("maosd.log.1", Some(1)),
            ("maosd.log.12", Some(12)),
            ("maosd.log", None),
            ("maosd.log.0", None),
            ("maosd.log.02", None),
            ("maosd.log.+2", None),
            ("maosd.log.x", None),
            ("maosd.log.1.gz", None),
            ("maosd.log1", None),
            ("maosd.stderr", None),
            ("maosd.log.99999999999", None),
        ] {
            assert_eq!(generation_of(name, "maosd.log"), n, "{name}");
        }
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// Records `first..first+n`, each 10 bytes with its newline.
    fn write_records(log: &LogFile, first: usize, n: usize) {
        for i in first..first + n {
            let mut w = log.make_writer();
            write!(w, "record{i:03}").unwrap();
            w.write_all(b"\n").unwrap();
        }
    }

    fn read(p: &Path) -> String {
        fs::read_to_string(p).unwrap()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn rotation_keeps_the_newest_files_in_order_whole_and_private() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("maosd.log");
        let log = LogFile::open(&path, 35, 2).unwrap();
        // Three 10-byte records fit in 35 bytes: 0-2, 3-5, 6-8, 9; the first file was dropped.
        write_records(&log, 0, 10);
        assert_eq!(names(t.path()), ["maosd.log", "maosd.log.1", "maosd.log.2"]);
        assert_eq!(read(&path), "record009\n");
        assert_eq!(
            read(&generation_path(&path, 1)),
            "record006\nrecord007\nrecord008\n"
        );
        assert_eq!(
            read(&generation_path(&path, 2)),
            "record003\nrecord004\nrecord005\n"
        );
        for n in 0..=2 {
            let p = generation_path(&path, n);
            assert_eq!(mode(&p), 0o600, "{}", p.display());
            assert!(fs::metadata(&p).unwrap().len() <= 35);
        }
    }

    #[test]
    fn keep_zero_only_empties_the_log() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("maosd.log");
        let log = LogFile::open(&path, 25, 0).unwrap();
        write_records(&log, 0, 5);
        assert_eq!(names(t.path()), ["maosd.log"]);
        assert_eq!(read(&path), "record004\n");
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn a_record_larger_than_the_cap_gets_a_file_of_its_own() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("maosd.log");
        let log = LogFile::open(&path, 25, 3).unwrap();
        write_records(&log, 0, 1);
        let big = "x".repeat(60) + "\n";
        log.make_writer().write_all(big.as_bytes()).unwrap();
        write_records(&log, 1, 1);
        assert_eq!(read(&generation_path(&path, 2)), "record000\n");
        assert_eq!(read(&generation_path(&path, 1)), big);
        assert_eq!(read(&path), "record001\n");
    }

    #[test]
    fn at_start_an_oversized_log_is_rotated_and_extra_old_files_removed() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("maosd.log");
        fs::write(&path, "old\n".repeat(20)).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        for n in 1..=5 {
            fs::write(generation_path(&path, n), format!("gen {n}\n")).unwrap();
        }
        fs::write(t.path().join("maosd.stderr"), "not ours\n").unwrap();
        let log = LogFile::open(&path, 40, 2).unwrap();
        assert_eq!(
            names(t.path()),
            ["maosd.log", "maosd.log.1", "maosd.log.2", "maosd.stderr"]
        );
        assert_eq!(read(&path), "");
        assert_eq!(read(&generation_path(&path, 1)), "old\n".repeat(20));
        assert_eq!(read(&generation_path(&path, 2)), "gen 1\n");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(
            mode(&generation_path(&path, 1)),
            0o600,
            "made private at open"
        );

        // A log under the cap is appended to, its mode closed.
        drop(log);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
        fs::write(&path, "kept\n").unwrap();
        let log = LogFile::open(&path, 40, 2).unwrap();
        write_records(&log, 0, 1);
        assert_eq!(read(&path), "kept\nrecord000\n");
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn a_failed_rotation_keeps_logging_to_the_open_file() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("maosd.log");
        // A non-empty directory where the first old generation goes: rename cannot replace it.
        fs::create_dir_all(generation_path(&path, 1).join("x")).unwrap();
        let log = LogFile::open(&path, 25, 1).unwrap();
        write_records(&log, 0, 5);
        let all: String = (0..5).map(|i| format!("record{i:03}\n")).collect();
        assert_eq!(read(&path), all, "nothing lost, nothing split");
        let state = log.state.lock().unwrap();
        assert!(state.rotate_failed && !state.write_failed);
        assert_eq!(state.len, 50);
    }

    #[test]
    fn a_failed_write_is_reported_not_fatal() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("maosd.log");
        let log = LogFile::open(&path, 25, 1).unwrap();
        // Swap in a descriptor that cannot be written.
        log.state.lock().unwrap().file = File::open(&path).unwrap();
        write_records(&log, 0, 3);
        let state = log.state.lock().unwrap();
        assert!(state.write_failed);
        assert_eq!(state.len, 0);
    }
}
