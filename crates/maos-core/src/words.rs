//! Words for what people read: counts ("1 session", "3 sessions", never "1 sessions" or
//! "session(s)"), and the word someone probably meant ([`closest`]).

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

/// The candidate closest to `word` by edit distance, if close enough to be a typo.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let n = word.chars().count();
    let limit = if n <= 2 { 1 } else { (n / 3).clamp(2, 3) };
    // Sharing all but the last character ("retry", "retries") counts as one edit.
    let prefix = |c: &str| {
        let common = word
            .chars()
            .zip(c.chars())
            .take_while(|(a, b)| a == b)
            .count();
        n >= 3 && common >= n - 1
    };
    candidates
        .into_iter()
        .map(|c| (if prefix(c) { 1 } else { edit_distance(word, c) }, c))
        .filter(|&(d, _)| d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance, in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
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
