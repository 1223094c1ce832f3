//! TOML with positions: the file as a tree of values, each with its byte range.
//!
//! `toml::Spanned` fails on values toml has no position for (implicit tables such as `a` in
//! `a.b = 1`: toml 0.8 answers "invalid type: string \"b\", expected a borrowed string"), and
//! `toml::de::ValueDeserializer` gives no positions at all, so the tree below speaks
//! serde_spanned's protocol itself: a deserializer that knows positions answers
//! `deserialize_struct(SPANNED_NAME, SPANNED_FIELDS)` with a map of start, end and value; one
//! that does not, answers as for any value. The names are
//! serde_spanned 0.6's (the version toml 0.8 uses); `errors_table` and
//! `implicit_tables_have_positions` fail if they change.

use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

pub(super) const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
pub(super) const SPANNED_START: &str = "$__serde_spanned_private_start";
pub(super) const SPANNED_END: &str = "$__serde_spanned_private_end";
pub(super) const SPANNED_VALUE: &str = "$__serde_spanned_private_value";
pub(super) const SPANNED_FIELDS: &[&str] = &[SPANNED_START, SPANNED_END, SPANNED_VALUE];
/// The one key of the map toml presents a datetime as.
pub(super) const DATETIME_FIELD: &str = "$__toml_private_datetime";

/// A TOML value.
pub(super) enum Raw {
    Str(String),
    Int(i64),
    Float,
    Bool,
    Datetime,
    Array(Vec<Item>),
    Table(Vec<Entry>),
}

impl Raw {
    /// "a string", "an integer", ... for type errors.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Raw::Str(_) => "a string",
            Raw::Int(_) => "an integer",
            Raw::Float => "a float",
            Raw::Bool => "a boolean",
            Raw::Datetime => "a datetime",
            Raw::Array(_) => "an array",
            Raw::Table(_) => "a table",
        }
    }
}

/// A value and its byte range.
pub(super) struct Item {
    pub(super) span: Range<usize>,
    pub(super) raw: Raw,
}

/// A table entry: the key, its byte range, the value.
pub(super) struct Entry {
    pub(super) key: String,
    pub(super) key_span: Range<usize>,
    pub(super) value: Item,
}

/// A key, with its range when the deserializer knows it.
pub(super) struct Key {
    pub(super) span: Option<Range<usize>>,
    pub(super) text: String,
}

/// A value, with its range when the deserializer knows it.
pub(super) struct MaybeSpanned {
    pub(super) span: Option<Range<usize>>,
    pub(super) raw: Raw,
}

/// Read the rest of a spanned map (the start key was read): start, end, value.
pub(super) fn spanned_rest<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
) -> Result<(Range<usize>, T), A::Error> {
    let start: usize = map.next_value()?;
    let mut end = start;
    let mut value = None;
    while let Some(k) = map.next_key::<String>()? {
        match k.as_str() {
            SPANNED_END => end = map.next_value()?,
            SPANNED_VALUE => value = Some(map.next_value()?),
            _ => {
                return Err(de::Error::custom(format!(
                    "unexpected key {k} in a spanned value"
                )));
            }
        }
    }
    let value = value.ok_or_else(|| de::Error::custom("a spanned value without its value"))?;
    Ok((start..end, value))
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key {
                    span: None,
                    text: v.to_owned(),
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Key, A::Error> {
                match map.next_key::<String>()?.as_deref() {
                    Some(SPANNED_START) => {
                        let (span, text) = spanned_rest(&mut map)?;
                        Ok(Key {
                            span: Some(span),
                            text,
                        })
                    }
                    _ => Err(de::Error::custom("a key must be a string")),
                }
            }
        }
        d.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, V)
    }
}

/// Visits any TOML value.
pub(super) struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Raw, E> {
        Ok(Raw::Bool)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::Int(i64::try_from(v).unwrap_or(i64::MAX)))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Raw, E> {
        Ok(Raw::Float)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element::<MaybeSpanned>()? {
            items.push(Item {
                span: v.span.unwrap_or_default(),
                raw: v.raw,
            });
        }
        Ok(Raw::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        match map.next_key::<Key>()? {
            None => Ok(Raw::Table(Vec::new())),
            Some(first) => table_rest(first, map),
        }
    }
}

/// Read a table whose first key was read (or a datetime, which toml presents as a map).
pub(super) fn table_rest<'de, A: MapAccess<'de>>(first: Key, mut map: A) -> Result<Raw, A::Error> {
    if first.span.is_none() && first.text == DATETIME_FIELD {
        map.next_value::<de::IgnoredAny>()?;
        return Ok(Raw::Datetime);
    }
    let mut entries = Vec::new();
    let mut key = Some(first);
    while let Some(k) = key {
        let v: MaybeSpanned = map.next_value()?;
        let key_span = k.span.unwrap_or_default();
        entries.push(Entry {
            key: k.text,
            // An implicit table (`a` of `a.b = 1`) has no range of its own: use its key's.
            value: Item {
                span: v.span.unwrap_or_else(|| key_span.clone()),
                raw: v.raw,
            },
            key_span,
        });
        key = map.next_key()?;
    }
    Ok(Raw::Table(entries))
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

impl<'de> Deserialize<'de> for MaybeSpanned {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        fn plain<E>(raw: Result<Raw, E>) -> Result<MaybeSpanned, E> {
            raw.map(|raw| MaybeSpanned { span: None, raw })
        }
        impl<'de> Visitor<'de> for V {
            type Value = MaybeSpanned;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a TOML value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_i64(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_u64(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_f64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_str(v))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_string(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<MaybeSpanned, A::Error> {
                plain(RawVisitor.visit_seq(seq))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MaybeSpanned, A::Error> {
                match map.next_key::<Key>()? {
                    None => plain(Ok(Raw::Table(Vec::new()))),
                    Some(k) if k.span.is_none() && k.text == SPANNED_START => {
                        let (span, raw) = spanned_rest(&mut map)?;
                        Ok(MaybeSpanned {
                            span: Some(span),
                            raw,
                        })
                    }
                    Some(first) => plain(table_rest(first, map)),
                }
            }
        }
        d.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, V)
    }
}
