//! A run's statuses as the console pages say them to a person. The wire words stay the
//! data (`data-wire`); what a person reads differs in one case: a run waiting for its
//! person's answer says "needs your answer" on an amber badge, never a red "blocked" (an
//! authority held back only until the answer comes is not an alarm). The words go to the
//! page script through a hidden list (`#status-words`), so the rule is written here only.

use crate::domain::run::Completion;
use crate::domain::wire::RunView;

/// What a run waiting for its person's answer reads.
pub const NEEDS_ANSWER: &str = "needs your answer";
/// Its badge colour (account.css).
const NEEDS_ANSWER_TONE: &str = "needs_answer";
/// The wire statuses that, on a run waiting for an answer, mean only that.
const WAITING_WORDS: &[&str] = &["needs_input", "blocked", "missing", "not_evaluated"];

/// One status badge: the word shown, its colour (`data-status`) and its wire word.
pub struct Badge {
    pub word: String,
    pub tone: String,
    pub wire: String,
}

impl Badge {
    fn of(wire: String, needs_answer: bool) -> Self {
        if needs_answer && WAITING_WORDS.contains(&wire.as_str()) {
            return Badge { word: NEEDS_ANSWER.into(), tone: NEEDS_ANSWER_TONE.into(), wire };
        }
        Badge { word: wire.clone(), tone: wire.clone(), wire }
    }
}

/// The wire name of a status (`running`, `needs_input`, ...).
fn name<T: serde::Serialize>(status: &T) -> String {
    serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// A run's three statuses as badges, and whether it waits for its person's answer.
pub struct Statuses {
    pub lifecycle: Badge,
    pub completion: Badge,
    pub authority: Badge,
    pub needs_answer: bool,
}

impl Statuses {
    pub fn of(run: &RunView) -> Self {
        let needs_answer = needs_answer(run);
        Statuses {
            lifecycle: Badge::of(name(&run.lifecycle_status), false),
            completion: Badge::of(name(&run.completion_status), needs_answer),
            authority: Badge::of(name(&run.terminal_authority_status), needs_answer),
            needs_answer,
        }
    }
}

/// A run waits for its person's answer: its turn asked (`needs_input`) and it has not ended.
pub fn needs_answer(run: &RunView) -> bool {
    run.completion_status == Completion::NeedsInput
}

/// The words of `#status-words` for the page script: (wire word, word shown) on a run
/// waiting for an answer.
pub fn waiting_words() -> Vec<(&'static str, &'static str)> {
    WAITING_WORDS.iter().map(|w| (*w, NEEDS_ANSWER)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_waiting_for_an_answer_says_so_and_is_never_a_red_blocked() {
        let b = Badge::of("blocked".into(), true);
        assert_eq!((b.word.as_str(), b.tone.as_str(), b.wire.as_str()), (NEEDS_ANSWER, "needs_answer", "blocked"));
        let b = Badge::of("needs_input".into(), true);
        assert_eq!(b.word, NEEDS_ANSWER);
        let b = Badge::of("blocked".into(), false);
        assert_eq!((b.word.as_str(), b.tone.as_str()), ("blocked", "blocked"), "blocked for another reason stays");
        let b = Badge::of("completed".into(), true);
        assert_eq!(b.word, "completed");
    }
}
