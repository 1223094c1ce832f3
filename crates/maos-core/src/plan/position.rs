//! Positions: where each part of the plan is in the file, and a byte offset as a line and
//! column.

use std::collections::HashMap;
use std::ops::Range;

use super::check::Loc;
use super::model::PlanError;
use crate::text::escape_controls;

/// Byte ranges of the places `check` can name, recorded while reading the file.
#[derive(Default)]
pub(super) struct Spans(pub(super) HashMap<Loc, Range<usize>>);

impl Spans {
    pub(super) fn put(&mut self, at: Loc, span: Range<usize>) {
        self.0.insert(at, span);
    }

    /// The place's range, else its nearest enclosing place's, else the start of the file.
    pub(super) fn at(&self, at: Loc) -> Range<usize> {
        let mut cur = Some(at);
        while let Some(loc) = cur {
            if let Some(span) = self.0.get(&loc) {
                return span.clone();
            }
            cur = loc.parent();
        }
        0..0
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

pub(super) fn error_at(text: &str, offset: usize, message: String) -> PlanError {
    let (line, column) = line_column(text, offset);
    PlanError {
        line,
        column,
        message: escape_controls(&message),
    }
}
