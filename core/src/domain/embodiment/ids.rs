//! Block and item ids an action may name: only the canonical `namespace:path` form is
//! admitted (`invalid_id` otherwise), then the code-owned deny list applies (`denied`),
//! to the path under any namespace. No I/O.

use super::refusal::ActionRefusal;

/// Longest id, in bytes (ASCII only).
pub const MAX_ID_LEN: usize = 64;

/// Paths no action may name, under any namespace: explosives, fire and lava, spawning,
/// operator-only blocks and items, and what a survival player can never get.
pub const DENIED_PATHS: &[&str] = &[
    // explosives
    "tnt",
    "tnt_minecart",
    "end_crystal",
    "respawn_anchor",
    // fire and lava
    "lava",
    "lava_bucket",
    "lava_cauldron",
    "fire",
    "soul_fire",
    "fire_charge",
    "flint_and_steel",
    // spawning (spawn eggs are the `_spawn_egg` suffix below)
    "wither_skeleton_skull",
    "wither_skeleton_wall_skull",
    "spawner",
    "trial_spawner",
    // operator-only
    "command_block",
    "chain_command_block",
    "repeating_command_block",
    "command_block_minecart",
    "structure_block",
    "structure_void",
    "jigsaw",
    "barrier",
    "light",
    "debug_stick",
    // unobtainable world blocks
    "bedrock",
    "end_portal_frame",
    "end_portal",
    "end_gateway",
    "nether_portal",
];

/// Path suffixes no action may name (every spawn egg).
pub const DENIED_SUFFIXES: &[&str] = &["_spawn_egg"];

/// One path segment (or the namespace) that is neither `.` nor `..`, as a regular expression.
macro_rules! segment {
    () => {
        r"(?:[a-z0-9_-][a-z0-9_.-]*|\.[a-z0-9_-][a-z0-9_.-]*|\.\.[a-z0-9_.-]+)"
    };
}

/// [`canonical_id`]'s rule as the published pattern (the length is the schema's `maxLength`;
/// a unit test holds the two together).
pub const ID_PATTERN: &str = concat!("^", segment!(), ":", segment!(), "(?:/", segment!(), ")*$");

/// Whether `id` is canonical: `namespace:path`, at most 64 bytes; the namespace of
/// `[a-z0-9_.-]`, the path of `[a-z0-9_./-]`, both non-empty; no path segment (between
/// `/`) empty, `.` or `..`, and the namespace neither `.` nor `..`.
pub fn canonical_id(id: &str) -> bool {
    let Some((ns, path)) = id.split_once(':') else { return false };
    let chars =
        |s: &str, extra: &[u8]| s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || extra.contains(&b));
    let dotted = |s: &str| s.is_empty() || s == "." || s == "..";
    id.len() <= MAX_ID_LEN && chars(ns, b"_.-") && chars(path, b"_./-") && !dotted(ns) && !path.split('/').any(dotted)
}

/// Whether a canonical id is on the deny list.
pub fn denied(id: &str) -> bool {
    let path = id.split_once(':').map_or(id, |(_, p)| p);
    DENIED_PATHS.contains(&path) || DENIED_SUFFIXES.iter().any(|s| path.ends_with(s))
}

/// The id check of a step: `invalid_id`, then `denied`.
pub fn check_id(id: &str) -> Result<(), ActionRefusal> {
    if !canonical_id(id) {
        Err(ActionRefusal::InvalidId)
    } else if denied(id) {
        Err(ActionRefusal::Denied)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ActionRefusal::*;
    use proptest::prelude::*;

    #[test]
    fn adversarial_ids_are_refused() {
        for (id, want) in [
            ("minecraft:oak_log", Ok(())),
            ("minecraft:stone_pickaxe", Ok(())),
            ("minecraft:block/oak_log", Ok(())),
            ("my-mod.v2:gem_block", Ok(())),
            ("minecraft:tnt", Err(Denied)),
            ("minecraft:./tnt", Err(InvalidId)),
            ("minecraft:tnt/", Err(InvalidId)),
            ("minecraft:/tnt", Err(InvalidId)),
            ("minecraft:a//tnt", Err(InvalidId)),
            ("minecraft:../tnt", Err(InvalidId)),
            ("minecraft:a/../tnt", Err(InvalidId)),
            ("minecraft:.", Err(InvalidId)),
            ("minecraft:..", Err(InvalidId)),
            ("..:tnt", Err(InvalidId)),
            (".:tnt", Err(InvalidId)),
            (":tnt", Err(InvalidId)),
            ("minecraft:", Err(InvalidId)),
            ("tnt", Err(InvalidId)),
            ("minecraft:tnt:x", Err(InvalidId)),
            ("Minecraft:TNT", Err(InvalidId)),
            ("minecraft:tnt ", Err(InvalidId)),
            (" minecraft:tnt", Err(InvalidId)),
            ("minecraft:tnt\u{0}", Err(InvalidId)),
            ("minecraft:tnt\u{200B}", Err(InvalidId)),
            ("minecraft:ｔnt", Err(InvalidId)),
            ("minecraft:t\\nt", Err(InvalidId)),
            ("mine/craft:tnt", Err(InvalidId)),
            ("minecraft:tnt#1", Err(InvalidId)),
            ("minecraft:tnt[lit=true]", Err(InvalidId)),
            ("minecraft:tnt{}", Err(InvalidId)),
            ("minecraft:zombie_spawn_egg", Err(Denied)),
            ("minecraft:wither_skeleton_skull", Err(Denied)),
            ("minecraft:lava", Err(Denied)),
            ("minecraft:lava_bucket", Err(Denied)),
            ("minecraft:fire", Err(Denied)),
            ("minecraft:soul_fire", Err(Denied)),
            ("minecraft:fire_charge", Err(Denied)),
            ("minecraft:flint_and_steel", Err(Denied)),
            ("minecraft:end_crystal", Err(Denied)),
            ("minecraft:respawn_anchor", Err(Denied)),
            ("minecraft:tnt_minecart", Err(Denied)),
            ("minecraft:command_block", Err(Denied)),
            ("minecraft:repeating_command_block", Err(Denied)),
            ("minecraft:chain_command_block", Err(Denied)),
            ("minecraft:command_block_minecart", Err(Denied)),
            ("minecraft:spawner", Err(Denied)),
            ("minecraft:barrier", Err(Denied)),
            ("othermod:tnt", Err(Denied)),
            ("minecraft:fire_coral", Ok(())),
            ("minecraft:spawn_egg_display", Ok(())),
        ] {
            assert_eq!(check_id(id), want, "{id:?}");
        }
        assert_eq!(check_id(&format!("minecraft:{}", "a".repeat(54))), Ok(()), "64 bytes");
        assert_eq!(check_id(&format!("minecraft:{}", "a".repeat(55))), Err(InvalidId), "65 bytes");
    }

    /// The published pattern (with the schema's 64-byte `maxLength`) admits exactly the canonical ids.
    fn published_rule(id: &str) -> bool {
        let pattern = jsonschema::validator_for(&serde_json::json!({"type": "string", "pattern": ID_PATTERN})).unwrap();
        id.len() <= MAX_ID_LEN && pattern.is_valid(&serde_json::json!(id))
    }

    #[test]
    fn the_published_id_pattern_is_the_canonical_rule() {
        for id in [
            "minecraft:oak_log",
            "a:b",
            "minecraft:./tnt",
            "x/y:z.w",
            ":oak",
            "minecraft:",
            "Minecraft:oak",
            "minecraft:oak log",
            "minecraft:oak:log",
            "mine-craft:oak",
            "minecraft:\u{e9}",
            "000",
            "minecraft:a/..",
            "minecraft:a/...",
            "..:a",
            "...:a",
            ".a:.b",
            "minecraft:tnt/",
            "minecraft:a//b",
            "a:.-/..x/.y",
        ] {
            assert_eq!(published_rule(id), canonical_id(id), "{id:?}");
        }
    }

    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just(".".to_owned()),
            Just("..".to_owned()),
            Just("tnt".to_owned()),
            Just("lava".to_owned()),
            Just("zombie_spawn_egg".to_owned()),
            "[a-z0-9_.-]{1,6}",
            "[ -~]{1,4}",
            "\\PC{1,3}",
        ]
    }

    proptest! {
        /// Whatever is admitted is canonical (re-checked segment by segment here) and its
        /// path is not denied; a denied path is refused under any namespace and in any
        /// non-canonical spelling.
        #[test]
        fn an_admitted_id_is_canonical_and_not_denied(
            ns in prop_oneof![Just("minecraft".to_owned()), segment()],
            segs in proptest::collection::vec(segment(), 1..4),
            sep in prop_oneof![Just(":"), Just("::"), Just(""), Just(" :")],
        ) {
            let path = segs.join("/");
            let id = format!("{ns}{sep}{path}");
            if check_id(&id).is_ok() {
                let (n, p) = id.split_once(':').unwrap();
                prop_assert!(id.len() <= MAX_ID_LEN && id.is_ascii());
                prop_assert!(!matches!(n, "" | "." | ".."));
                prop_assert!(n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b)));
                for s in p.split('/') {
                    prop_assert!(!matches!(s, "" | "." | ".."), "{id:?}");
                    prop_assert!(s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b)));
                }
                prop_assert!(!DENIED_PATHS.contains(&p) && !p.ends_with("_spawn_egg"), "{id:?}");
            }
            prop_assert_eq!(published_rule(&id), canonical_id(&id), "{:?}", id);
            if DENIED_PATHS.contains(&path.as_str()) || path.ends_with("_spawn_egg") {
                prop_assert!(check_id(&id).is_err(), "{id:?}");
            }
        }
    }
}
