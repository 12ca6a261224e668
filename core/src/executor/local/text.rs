//! Sentence work on passage text: sentence ends, chunks of a long block, the sentence
//! that answers a query, bounded excerpts. Pure string functions.

use super::MAX_PASSAGE_CHARS;

pub(super) fn chunk_passage(block: &str) -> Vec<String> {
    if block.chars().count() <= MAX_PASSAGE_CHARS {
        return vec![block.to_owned()];
    }
    let mut chunks = Vec::new();
    let mut rest = block;
    while rest.chars().count() > MAX_PASSAGE_CHARS {
        let limit = rest.char_indices().nth(MAX_PASSAGE_CHARS).map(|(i, _)| i).unwrap_or(rest.len());
        let cut = sentence_ends(rest).into_iter().take_while(|&e| e <= limit).last().unwrap_or(limit);
        chunks.push(rest[..cut].trim().to_owned());
        rest = rest[cut..].trim_start();
    }
    if !rest.is_empty() {
        chunks.push(rest.to_owned());
    }
    chunks
}

/// Byte offsets just after each sentence end: `.`, `!` or `?` followed by a space and
/// an uppercase letter, digit, quote or bracket, but not after a lone initial ("S. K").
fn sentence_ends(text: &str) -> Vec<usize> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut ends = Vec::new();
    for (k, &(pos, c)) in chars.iter().enumerate() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let next = chars.get(k + 1).map(|x| x.1);
        let after = chars.get(k + 2).map(|x| x.1);
        let starts_sentence = after.is_some_and(|a| a.is_uppercase() || a.is_ascii_digit() || "\"'(“‘[".contains(a));
        if next != Some(' ') || !starts_sentence {
            continue;
        }
        let initial =
            c == '.' && k >= 1 && chars[k - 1].1.is_uppercase() && (k == 1 || !chars[k - 2].1.is_alphanumeric());
        if !initial {
            ends.push(pos + c.len_utf8());
        }
    }
    ends
}

fn first_sentence(text: &str) -> &str {
    sentence_ends(text).first().map(|&e| &text[..e]).unwrap_or(text)
}

fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| w.chars().count() >= 4).map(str::to_lowercase)
}

/// The passage's sentence sharing the most query words (of four letters or more), the
/// first sentence on ties: the claim a passage supports for this question.
pub(super) fn best_sentence<'a>(text: &'a str, query: &str) -> &'a str {
    let terms: std::collections::HashSet<String> = words(query).collect();
    let mut best = (0, first_sentence(text));
    let mut start = 0;
    for end in sentence_ends(text) {
        let sentence = text[start..end].trim();
        let score = words(sentence).filter(|w| terms.contains(w)).count();
        if score > best.0 {
            best = (score, sentence);
        }
        start = end;
    }
    best.1
}

pub(super) fn clip_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// About `max` characters, cut at a word boundary when one is near.
pub(super) fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max - 1).collect();
    let cut = match head.rfind(' ') {
        Some(i) if i > head.len() * 3 / 4 => &head[..i],
        _ => head.as_str(),
    };
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_is_the_sentence_that_answers_the_query() {
        let text = "The setup is old. The measured force agreed with theory within five percent. It was hard.";
        assert_eq!(
            best_sentence(text, "what force was measured"),
            "The measured force agreed with theory within five percent."
        );
        assert_eq!(best_sentence(text, "nothing shared"), "The setup is old.");
    }

    #[test]
    fn sentences_and_chunks() {
        assert_eq!(first_sentence("Casimir predicted it in 1948. It is small."), "Casimir predicted it in 1948.");
        assert_eq!(first_sentence("Work by S. K. Lamoreaux. Next."), "Work by S. K. Lamoreaux.");
        assert_eq!(
            first_sentence("The value ζ(3) ≈ 1.202 appears, e.g. here. Then"),
            "The value ζ(3) ≈ 1.202 appears, e.g. here."
        );
        assert_eq!(first_sentence("no end"), "no end");
        let long = "A sentence that repeats. ".repeat(200);
        let chunks = chunk_passage(long.trim());
        assert!(chunks.len() > 1 && chunks.iter().all(|c| c.chars().count() <= MAX_PASSAGE_CHARS && c.ends_with('.')));
        let unbroken = "x".repeat(MAX_PASSAGE_CHARS * 2 + 5);
        assert_eq!(chunk_passage(&unbroken).iter().map(|c| c.len()).sum::<usize>(), unbroken.len());
    }
}
