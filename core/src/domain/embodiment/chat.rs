//! The rule for a `chat` step's text, applied by Helix before it queues the step and by
//! the connector before it sends the line (docs/embodiment.md gives it as an algorithm
//! with test vectors). The text is normalised first (NFKC), every blank or invisible
//! character at its start is stripped, and then: a leading `/` or a character that looks
//! like one is a command (`chat_command`); an empty line, more than 256 characters, or a
//! character a vanilla server refuses in chat is `chat_text`. The delivered text is the
//! normalised one (what was checked is what is sent). No I/O.

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

use super::refusal::ActionRefusal;

/// Longest `chat` text, in characters (vanilla's limit).
pub const MAX_CHAT_CHARS: usize = 256;

/// The characters that read as `/` at the start of a line: `/` itself, every character
/// whose UTS #39 confusable skeleton begins with `/` (or whose NFKC form does), and the
/// combining solidus overlays. A unit test checks it against the Unicode data.
pub const SLASH_LIKE: &[char] = &[
    '\u{002F}',
    '\u{0337}',
    '\u{0338}',
    '\u{1735}',
    '\u{2041}',
    '\u{2044}',
    '\u{2215}',
    '\u{2571}',
    '\u{27CB}',
    '\u{29F6}',
    '\u{29F8}',
    '\u{2AFB}',
    '\u{2AFD}',
    '\u{2CC6}',
    '\u{2CC7}',
    '\u{2F03}',
    '\u{3033}',
    '\u{30CE}',
    '\u{31D2}',
    '\u{31D3}',
    '\u{4E3F}',
    '\u{FF0F}',
    '\u{FF89}',
    '\u{1D23A}',
];

/// Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), as ranges.
const DEFAULT_IGNORABLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
];

/// Whether vanilla Minecraft admits `c` in a chat message (its `isAllowedChatCharacter`:
/// not `§`, not below U+0020, not DEL).
pub fn vanilla_chat_char(c: char) -> bool {
    c != '§' && c >= ' ' && c != '\u{7F}'
}

/// A character stripped from the start of a line before the command check: Unicode
/// White_Space, a control (Cc) or format (Cf) character, a Default_Ignorable_Code_Point,
/// or the blank braille pattern U+2800.
pub fn blank_at_start(c: char) -> bool {
    c.is_whitespace()
        || matches!(get_general_category(c), GeneralCategory::Control | GeneralCategory::Format)
        || DEFAULT_IGNORABLE.iter().any(|&(lo, hi)| (lo..=hi).contains(&u32::from(c)))
        || c == '\u{2800}'
}

/// The text a `chat` step delivers, or why it is refused: NFKC, then the blank start
/// stripped, then a leading slash (or look-alike) refused as `chat_command`; the original
/// and the delivered text must be free of characters vanilla refuses (and of any control
/// character), and the delivered text 1-256 characters, else `chat_text`.
pub fn chat_text(text: &str) -> Result<String, ActionRefusal> {
    let normal: String = text.nfkc().collect();
    let delivered = normal.trim_start_matches(blank_at_start);
    if delivered.starts_with(SLASH_LIKE) {
        return Err(ActionRefusal::ChatCommand);
    }
    let clean = |s: &str| s.chars().all(|c| vanilla_chat_char(c) && !c.is_control());
    let n = delivered.chars().count();
    if n == 0 || n > MAX_CHAT_CHARS || !clean(text) || !clean(delivered) {
        return Err(ActionRefusal::ChatText);
    }
    Ok(delivered.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ActionRefusal::*;

    /// The test vectors docs/embodiment.md lists for connectors (input, outcome).
    pub(crate) const VECTORS: &[(&str, Result<&str, ActionRefusal>)] = &[
        ("hello", Ok("hello")),
        ("/op mallory", Err(ChatCommand)),
        (" /op mallory", Err(ChatCommand)),
        ("\t/op", Err(ChatCommand)),
        ("\u{3000}/op", Err(ChatCommand)),
        ("\u{00A0}/op", Err(ChatCommand)),
        ("\u{2028}/op", Err(ChatCommand)),
        ("\u{2029}/op", Err(ChatCommand)),
        ("\u{200B}/op", Err(ChatCommand)),
        ("\u{200D}/op", Err(ChatCommand)),
        ("\u{2060}/op", Err(ChatCommand)),
        ("\u{FEFF}/op", Err(ChatCommand)),
        ("\u{202E}/op", Err(ChatCommand)),
        ("\u{2066}/op", Err(ChatCommand)),
        ("\u{200E}\u{200F}/op", Err(ChatCommand)),
        ("\u{180E}/op", Err(ChatCommand)),
        ("\u{3164}/op", Err(ChatCommand)),
        ("\u{FFA0}/op", Err(ChatCommand)),
        ("\u{2800}/op", Err(ChatCommand)),
        ("\u{E0020}/op", Err(ChatCommand)),
        ("\u{FE0F}/op", Err(ChatCommand)),
        ("\u{FF0F}op", Err(ChatCommand)),
        ("\u{2044}op", Err(ChatCommand)),
        ("\u{2215}op", Err(ChatCommand)),
        ("\u{29F8}op", Err(ChatCommand)),
        ("\u{1735}op", Err(ChatCommand)),
        ("\u{2571}op", Err(ChatCommand)),
        ("\u{0338}op", Err(ChatCommand)),
        (" \u{200B}\u{3000}\u{FF0F}op", Err(ChatCommand)),
        ("§cred", Err(ChatText)),
        ("red §c", Err(ChatText)),
        ("bell\u{7}", Err(ChatText)),
        ("del\u{7F}", Err(ChatText)),
        ("nul\u{0}", Err(ChatText)),
        ("c1\u{85}", Err(ChatText)),
        ("line\nbreak", Err(ChatText)),
        ("", Err(ChatText)),
        ("   ", Err(ChatText)),
        ("\u{200B}", Err(ChatText)),
        ("  hi", Ok("hi")),
        ("\u{200B}hi", Ok("hi")),
        ("ｈｅｌｌｏ", Ok("hello")),
        ("a/b", Ok("a/b")),
        ("hi /op", Ok("hi /op")),
        ("x²", Ok("x2")),
        ("👍\u{200D}ok", Ok("👍\u{200D}ok")),
        ("é", Ok("é")),
    ];

    #[test]
    fn the_documented_vectors_hold() {
        for (input, want) in VECTORS {
            assert_eq!(chat_text(input).as_deref().map_err(|e| *e), *want, "{input:?}");
        }
    }

    #[test]
    fn the_length_counts_characters_of_the_delivered_text() {
        assert!(chat_text(&"é".repeat(256)).is_ok(), "characters, not bytes");
        assert_eq!(chat_text(&"x".repeat(257)), Err(ChatText));
        assert_eq!(chat_text(&format!("  {}", "x".repeat(256))).map(|t| t.len()), Ok(256));
        // NFKC may lengthen a line past the limit (U+FDFA is 18 characters).
        assert_eq!(chat_text(&"\u{FDFA}".repeat(15)), Err(ChatText));
    }

    /// Every character that Unicode's confusable data (UTS #39) or NFKC turns into a
    /// leading `/`, after any blank prefix, is refused; so is every character vanilla refuses.
    #[test]
    fn every_slash_look_alike_and_every_refused_character_is_refused() {
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let one = c.to_string();
            let skeleton: String = unicode_security::skeleton(&one).collect();
            let nfkc: String = one.nfkc().collect();
            if skeleton.starts_with('/') || nfkc.starts_with('/') {
                assert!(SLASH_LIKE.contains(&c), "U+{:04X} looks like / and is not listed", u32::from(c));
                assert_eq!(chat_text(&format!("{c}op")), Err(ChatCommand), "U+{:04X}", u32::from(c));
                assert_eq!(chat_text(&format!("\u{3000}\u{200B}{c}op")), Err(ChatCommand));
            }
            if !vanilla_chat_char(c) {
                assert_eq!(chat_text(&format!("a{c}b")), Err(ChatText), "U+{:04X}", u32::from(c));
            }
            if c.is_whitespace() || matches!(get_general_category(c), GeneralCategory::Format) {
                assert_eq!(chat_text(&format!("{c}/op")), Err(ChatCommand), "U+{:04X}", u32::from(c));
            }
        }
    }

    #[test]
    fn the_delivered_text_passes_the_rule_unchanged() {
        for (input, _) in VECTORS {
            if let Ok(t) = chat_text(input) {
                assert_eq!(chat_text(&t), Ok(t.clone()), "a connector applying the rule sends what Helix delivered");
            }
        }
    }
    /// `docs/connector-protocol/chat-rule.json` is this rule as data for connectors (the
    /// look-alike slashes, the invisible ranges stripped at the start, the length, and
    /// every documented vector with its outcome); the Minecraft connector's test checks
    /// its own rule against it. `HELIX_UPDATE_PROTOCOL_SCHEMAS=1` rewrites it.
    #[test]
    fn the_committed_chat_rule_file_is_current() {
        let vectors: Vec<serde_json::Value> = VECTORS
            .iter()
            .map(|(input, want)| match want {
                Ok(text) => serde_json::json!({"input": input, "delivered": text}),
                Err(e) => serde_json::json!({"input": input, "refused": e.reason()}),
            })
            .collect();
        let rule = serde_json::json!({
            "description": "The chat rule of a chat step (docs/embodiment.md): NFKC, strip the leading characters that are White_Space, Cc, Cf, Default_Ignorable_Code_Point or U+2800, refuse a leading slash_like character as chat_command; refuse an empty line, more than max_chars characters, or any Cc character, U+00A7 or U+007F in the text or the delivered text as chat_text. Generated from core/src/domain/embodiment/chat.rs.",
            "max_chars": MAX_CHAT_CHARS,
            "slash_like": SLASH_LIKE.iter().map(|c| u32::from(*c)).collect::<Vec<_>>(),
            "default_ignorable": DEFAULT_IGNORABLE,
            "also_blank": [0x2800],
            "vectors": vectors,
        });
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/connector-protocol/chat-rule.json");
        let want = serde_json::to_string_pretty(&rule).unwrap() + "\n";
        if std::env::var_os("HELIX_UPDATE_PROTOCOL_SCHEMAS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        assert!(
            std::fs::read_to_string(&path).unwrap_or_default() == want,
            "docs/connector-protocol/chat-rule.json is stale: run \
             HELIX_UPDATE_PROTOCOL_SCHEMAS=1 cargo test -p helix-core --lib chat_rule_file"
        );
    }
}
