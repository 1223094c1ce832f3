//! Counts in words, for what people read: "1 session", "3 sessions", never "1 sessions" or
//! "session(s)".

/// `n` and `word`, plural when `n` is not 1 (`word` + "s": the nouns maos counts take it).
pub fn count(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `singular` when `n` is 1, else `plural`: the verb or noun that agrees with a count.
pub fn agree<'a>(n: usize, singular: &'a str, plural: &'a str) -> &'a str {
    if n == 1 { singular } else { plural }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_the_rest_plural() {
        assert_eq!(count(0, "event"), "0 events");
        assert_eq!(count(1, "checkpoint"), "1 checkpoint");
        assert_eq!(count(2, "time"), "2 times");
        assert_eq!(agree(1, "waits", "wait"), "waits");
        assert_eq!(agree(3, "waits", "wait"), "wait");
    }
}
