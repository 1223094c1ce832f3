//! Length-prefixed JSON frames over blocking std I/O (the daemon uses tokio-util's
//! `LengthDelimitedCodec` with the same layout: 4-byte big-endian length, then the body).

use maos_core::text::escape_controls;
use serde::{Serialize, de::DeserializeOwned};
use std::io::{self, Read, Write};

/// The largest frame body either side accepts. Larger frames are refused, never buffered.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed by the other side")]
    Closed,
    #[error("frame of {len} bytes is over the {max}-byte cap")]
    TooLarge { len: usize, max: usize },
    /// serde_json quotes names from the input (an unknown variant or field) verbatim, so the
    /// message is made one line.
    #[error("malformed message: {}", escape_controls(&.0.to_string()))]
    Json(#[from] serde_json::Error),
    #[error("socket I/O failed: {0}")]
    Io(#[from] io::Error),
}

/// Serialize `msg` as one frame (length prefix included).
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, msg)?;
    let len = buf.len() - 4;
    if len > MAX_FRAME_LEN {
        return Err(FrameError::TooLarge {
            len,
            max: MAX_FRAME_LEN,
        });
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

/// Write `msg` as one frame with a single `write_all`.
pub fn write_frame<W: Write, T: Serialize>(w: &mut W, msg: &T) -> Result<(), FrameError> {
    let buf = encode(msg)?;
    w.write_all(&buf)?;
    Ok(())
}

/// Read one frame and decode its JSON body. A clean EOF before the length is `Closed`; an EOF
/// inside a frame is an I/O error (truncated frame).
pub fn read_frame<R: Read, T: DeserializeOwned>(r: &mut R) -> Result<T, FrameError> {
    let body = read_frame_bytes(r)?;
    Ok(serde_json::from_slice(&body)?)
}

/// Read one frame's body without decoding it.
pub fn read_frame_bytes<R: Read>(r: &mut R) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_LEN {
        return Err(FrameError::TooLarge {
            len,
            max: MAX_FRAME_LEN,
        });
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_layout() {
        let frame = encode(&serde_json::json!({"a": 1})).unwrap();
        assert_eq!(&frame[..4], &7u32.to_be_bytes());
        let v: serde_json::Value = read_frame(&mut &frame[..]).unwrap();
        assert_eq!(v["a"], 1);
    }

    #[test]
    fn eof_cases() {
        let r: Result<serde_json::Value, _> = read_frame(&mut &[][..]);
        assert!(matches!(r, Err(FrameError::Closed)));
        let r: Result<serde_json::Value, _> = read_frame(&mut &[0u8, 0][..]);
        assert!(matches!(r, Err(FrameError::Io(_))));
        let r: Result<serde_json::Value, _> = read_frame(&mut &[0u8, 0, 0, 9, b'{'][..]);
        assert!(matches!(r, Err(FrameError::Io(_))));
    }

    #[test]
    fn over_cap_is_refused_before_reading_the_body() {
        let len = (MAX_FRAME_LEN as u32 + 1).to_be_bytes();
        let r: Result<serde_json::Value, _> = read_frame(&mut &len[..]);
        assert!(matches!(r, Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn json_errors_are_one_line() {
        let body = br#"{"kind":"request","id":1,"body":{"request":"tele\nport\u001b[2J"}}"#;
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        let e = read_frame::<_, crate::ClientMsg>(&mut &f[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains(r"unknown variant `tele\nport\u{1b}[2J`"), "{e}");
        assert!(!e.chars().any(char::is_control), "{e:?}");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = read_frame::<_, crate::ClientMsg>(&mut &bytes[..]);
        }

        #[test]
        fn strings_round_trip(s in ".*") {
            let frame = encode(&s).unwrap();
            let back: String = read_frame(&mut &frame[..]).unwrap();
            prop_assert_eq!(back, s);
        }
    }
}
