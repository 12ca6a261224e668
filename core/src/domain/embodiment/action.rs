//! The typed player actions: a bounded, code-owned set tagged by `type` (the v1 set of
//! the contract, with its exact field names), their JSON Schema (what the tool's
//! `inputSchema` publishes) and the checks every action passes before it is queued.
//! There is no command, teleport, game-mode, shell, file, RCON or process variant, and
//! an unknown `type` does not parse. No I/O.

pub use super::refusal::ActionRefusal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::chat::MAX_CHAT_CHARS;
use super::chat::chat_text;
use super::ids::{ID_PATTERN, check_id};

/// Most steps in one `sequence`.
pub const MAX_SEQUENCE_STEPS: usize = 16;
/// The world's vertical bounds (a Minecraft overworld).
pub const MIN_Y: i32 = -64;
pub const MAX_Y: i32 = 320;
/// The world's horizontal bounds (|x|, |z| at most this), published in the actions' schema.
pub const WORLD_RADIUS: i32 = 30_000_000;
/// The default horizontal region of an environment binding (|x|, |z| at most this).
pub const DEFAULT_REGION_RADIUS: i32 = WORLD_RADIUS;

fn default_range() -> u8 {
    1
}

/// `move_to`: walk to within `range` blocks of a block position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveTo {
    #[schemars(range(min = -WORLD_RADIUS, max = WORLD_RADIUS))]
    pub x: i32,
    #[schemars(range(min = MIN_Y, max = MAX_Y))]
    pub y: i32,
    #[schemars(range(min = -WORLD_RADIUS, max = WORLD_RADIUS))]
    pub z: i32,
    /// How close is close enough, in blocks (0-3, default 1).
    #[serde(default = "default_range")]
    #[schemars(range(min = 0, max = 3))]
    pub range: u8,
}

/// A block position (`look_at`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pos {
    #[schemars(range(min = -WORLD_RADIUS, max = WORLD_RADIUS))]
    pub x: i32,
    #[schemars(range(min = MIN_Y, max = MAX_Y))]
    pub y: i32,
    #[schemars(range(min = -WORLD_RADIUS, max = WORLD_RADIUS))]
    pub z: i32,
}

/// `stop`: stop moving and acting (no fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stop {}

/// `break_block`: break the block at a position, which must be `expected_block`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BreakBlock {
    #[schemars(range(min = -WORLD_RADIUS, max = WORLD_RADIUS))]
    pub x: i32,
    #[schemars(range(min = MIN_Y, max = MAX_Y))]
    pub y: i32,
    #[schemars(range(min = -WORLD_RADIUS, max = WORLD_RADIUS))]
    pub z: i32,
    /// The block id expected there (`minecraft:oak_log`).
    #[schemars(length(min = 3, max = 64), regex(pattern = ID_PATTERN))]
    pub expected_block: String,
}

/// The face of a neighbouring block a block is placed against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Face {
    Up,
    Down,
    North,
    South,
    East,
    West,
}

/// `place_block`: place `item` at a position, against `face`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaceBlock {
    #[schemars(range(min = -WORLD_RADIUS, max = WORLD_RADIUS))]
    pub x: i32,
    #[schemars(range(min = MIN_Y, max = MAX_Y))]
    pub y: i32,
    #[schemars(range(min = -WORLD_RADIUS, max = WORLD_RADIUS))]
    pub z: i32,
    #[schemars(length(min = 3, max = 64), regex(pattern = ID_PATTERN))]
    pub item: String,
    pub face: Face,
}

/// An equipment slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    Mainhand,
    Offhand,
    Head,
    Chest,
    Legs,
    Feet,
}

/// `equip`: move `item` from the inventory into `slot`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Equip {
    #[schemars(length(min = 3, max = 64), regex(pattern = ID_PATTERN))]
    pub item: String,
    pub slot: Slot,
}

/// `craft`: craft `item` `times` times (1-8) from the inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Craft {
    #[schemars(length(min = 3, max = 64), regex(pattern = ID_PATTERN))]
    pub item: String,
    #[schemars(range(min = 1, max = 8))]
    pub times: u8,
}

/// `chat`: say `text` in the world's chat (at most 256 characters, never a `/` command).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Chat {
    #[schemars(length(min = 1, max = 256))]
    pub text: String,
}

/// `wait`: wait `ticks` game ticks (1-200).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    #[schemars(range(min = 1, max = 200))]
    pub ticks: u8,
}

/// One step of a `sequence`: any action but a sequence (no nesting).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Step {
    MoveTo(MoveTo),
    LookAt(Pos),
    Stop(Stop),
    BreakBlock(BreakBlock),
    PlaceBlock(PlaceBlock),
    Equip(Equip),
    Craft(Craft),
    Chat(Chat),
    Wait(Wait),
}

/// `sequence`: 1-16 steps, run in order; the first failing step ends the workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sequence {
    #[schemars(length(min = 1, max = 16))]
    pub steps: Vec<Step>,
}

/// A typed player action, tagged by `type` (`{"type": "wait", "ticks": 5}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    MoveTo(MoveTo),
    LookAt(Pos),
    Stop(Stop),
    BreakBlock(BreakBlock),
    PlaceBlock(PlaceBlock),
    Equip(Equip),
    Craft(Craft),
    Chat(Chat),
    Wait(Wait),
    Sequence(Sequence),
}

/// The owner-set bounds of an environment binding an action must stay within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub radius: i32,
}

impl Default for Region {
    fn default() -> Self {
        Region { radius: DEFAULT_REGION_RADIUS }
    }
}

impl Region {
    fn admits(&self, x: i32, y: i32, z: i32) -> bool {
        x.unsigned_abs() <= self.radius.unsigned_abs()
            && z.unsigned_abs() <= self.radius.unsigned_abs()
            && (MIN_Y..=MAX_Y).contains(&y)
    }
}

impl Action {
    /// Parses an `action` argument: anything outside the admitted set is `UnknownType`.
    pub fn parse(value: &serde_json::Value) -> Result<Action, ActionRefusal> {
        let action: Action = serde_json::from_value(value.clone()).map_err(|_| ActionRefusal::UnknownType)?;
        Ok(action)
    }

    /// The steps this action runs, in order (one, or a sequence's).
    pub fn steps(&self) -> Vec<Step> {
        match self {
            Action::Sequence(s) => s.steps.clone(),
            Action::MoveTo(a) => vec![Step::MoveTo(a.clone())],
            Action::LookAt(a) => vec![Step::LookAt(a.clone())],
            Action::Stop(a) => vec![Step::Stop(a.clone())],
            Action::BreakBlock(a) => vec![Step::BreakBlock(a.clone())],
            Action::PlaceBlock(a) => vec![Step::PlaceBlock(a.clone())],
            Action::Equip(a) => vec![Step::Equip(a.clone())],
            Action::Craft(a) => vec![Step::Craft(a.clone())],
            Action::Chat(a) => vec![Step::Chat(a.clone())],
            Action::Wait(a) => vec![Step::Wait(a.clone())],
        }
    }

    /// The action as it is queued and delivered, once [`Action::check`] passed: each
    /// `chat` text in its normalised form (`chat::chat_text`).
    pub fn normalized(self) -> Action {
        let chat = |c: Chat| Chat { text: chat_text(&c.text).unwrap_or(c.text) };
        let step = |s: Step| match s {
            Step::Chat(c) => Step::Chat(chat(c)),
            other => other,
        };
        match self {
            Action::Chat(c) => Action::Chat(chat(c)),
            Action::Sequence(s) => Action::Sequence(Sequence { steps: s.steps.into_iter().map(step).collect() }),
            other => other,
        }
    }

    /// Every check before queuing: the sequence length, then each step's bounds.
    pub fn check(&self, region: &Region) -> Result<(), ActionRefusal> {
        if let Action::Sequence(s) = self
            && !(1..=MAX_SEQUENCE_STEPS).contains(&s.steps.len())
        {
            return Err(ActionRefusal::SequenceLength);
        }
        self.steps().iter().try_for_each(|s| s.check(region))
    }
}

impl Step {
    /// The step's `type` tag.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::MoveTo(_) => "move_to",
            Step::LookAt(_) => "look_at",
            Step::Stop(_) => "stop",
            Step::BreakBlock(_) => "break_block",
            Step::PlaceBlock(_) => "place_block",
            Step::Equip(_) => "equip",
            Step::Craft(_) => "craft",
            Step::Chat(_) => "chat",
            Step::Wait(_) => "wait",
        }
    }

    /// The bounds of one step (the schema's, enforced here again, and the region's).
    pub fn check(&self, region: &Region) -> Result<(), ActionRefusal> {
        let at = |x, y, z| if region.admits(x, y, z) { Ok(()) } else { Err(ActionRefusal::OutOfRegion) };
        let id = check_id;
        match self {
            Step::MoveTo(m) if m.range > 3 => Err(ActionRefusal::FieldBounds),
            Step::MoveTo(m) => at(m.x, m.y, m.z),
            Step::LookAt(p) => at(p.x, p.y, p.z),
            Step::Stop(_) => Ok(()),
            Step::BreakBlock(b) => at(b.x, b.y, b.z).and_then(|_| id(&b.expected_block)),
            Step::PlaceBlock(p) => at(p.x, p.y, p.z).and_then(|_| id(&p.item)),
            Step::Equip(e) => id(&e.item),
            Step::Craft(c) if !(1..=8).contains(&c.times) => Err(ActionRefusal::FieldBounds),
            Step::Craft(c) => id(&c.item),
            Step::Chat(c) => chat_text(&c.text).map(|_| ()),
            Step::Wait(w) if !(1..=200).contains(&w.ticks) => Err(ActionRefusal::FieldBounds),
            Step::Wait(_) => Ok(()),
        }
    }

    /// Whether the step may change the world (a block, the inventory): such a step whose
    /// outcome was not confirmed is `outcome_unknown`, never retried blindly.
    pub fn mutates(&self) -> bool {
        matches!(self, Step::BreakBlock(_) | Step::PlaceBlock(_) | Step::Craft(_) | Step::Equip(_) | Step::Chat(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: serde_json::Value) -> Result<Action, ActionRefusal> {
        let a = Action::parse(&v)?;
        a.check(&Region::default()).map(|_| a)
    }

    #[test]
    fn the_v1_set_parses_with_its_exact_field_names() {
        for v in [
            json!({"type": "move_to", "x": 1, "y": 64, "z": -3}),
            json!({"type": "move_to", "x": 1, "y": 64, "z": -3, "range": 0}),
            json!({"type": "look_at", "x": 1, "y": 64, "z": 2}),
            json!({"type": "stop"}),
            json!({"type": "break_block", "x": 1, "y": 64, "z": 2, "expected_block": "minecraft:oak_log"}),
            json!({"type": "place_block", "x": 1, "y": 64, "z": 2, "item": "minecraft:dirt", "face": "up"}),
            json!({"type": "equip", "item": "minecraft:stone_pickaxe", "slot": "mainhand"}),
            json!({"type": "craft", "item": "minecraft:oak_planks", "times": 8}),
            json!({"type": "chat", "text": "hello"}),
            json!({"type": "wait", "ticks": 5}),
            json!({"type": "sequence", "steps": [{"type": "wait", "ticks": 1}, {"type": "chat", "text": "hi"}]}),
        ] {
            assert!(check(v.clone()).is_ok(), "{v}");
        }
        let Ok(Action::MoveTo(m)) = check(json!({"type": "move_to", "x": 1, "y": 2, "z": 3})) else { panic!() };
        assert_eq!(m.range, 1, "range defaults to 1");
    }

    #[test]
    fn everything_else_is_a_typed_refusal() {
        use ActionRefusal::*;
        for (v, want) in [
            (json!({"type": "run_command", "command": "/op me"}), UnknownType),
            (json!({"type": "teleport", "x": 1, "y": 2, "z": 3}), UnknownType),
            (json!({"type": "wait", "ticks": 5, "extra": 1}), UnknownType),
            (json!({"x": 1}), UnknownType),
            (json!({"type": "move_to", "x": 1.5, "y": 2, "z": 3}), UnknownType),
            (json!({"type": "move_to", "x": 1, "y": 2, "z": 3, "range": 4}), FieldBounds),
            (json!({"type": "move_to", "x": 1, "y": 400, "z": 3}), OutOfRegion),
            (json!({"type": "move_to", "x": 31_000_000, "y": 2, "z": 3}), OutOfRegion),
            (json!({"type": "wait", "ticks": 0}), FieldBounds),
            (json!({"type": "wait", "ticks": 201}), FieldBounds),
            (json!({"type": "craft", "item": "minecraft:stick", "times": 9}), FieldBounds),
            (json!({"type": "chat", "text": "/give @s diamond"}), ChatCommand),
            (json!({"type": "chat", "text": "x".repeat(257)}), ChatText),
            (json!({"type": "chat", "text": ""}), ChatText),
            (json!({"type": "place_block", "x": 1, "y": 2, "z": 3, "item": "minecraft:tnt", "face": "up"}), Denied),
            (json!({"type": "equip", "item": "Diamond Sword", "slot": "mainhand"}), InvalidId),
            (json!({"type": "equip", "item": "minecraft:stick", "slot": "hotbar"}), UnknownType),
            (json!({"type": "sequence", "steps": []}), SequenceLength),
            (json!({"type": "sequence", "steps": vec![json!({"type": "stop"}); 17]}), SequenceLength),
            (json!({"type": "sequence", "steps": [{"type": "sequence", "steps": [{"type": "stop"}]}]}), UnknownType),
            (json!({"type": "sequence", "steps": [{"type": "chat", "text": "/kill"}]}), ChatCommand),
        ] {
            assert_eq!(check(v.clone()).err(), Some(want), "{v}");
        }
        assert!(check(json!({"type": "chat", "text": "é".repeat(256)})).is_ok(), "characters, not bytes");
    }
}
