//! The simulator's deterministic world (players with positions, blocks, inventories,
//! crafting) and how one leased step plays out in it. Kept in the ledger file, so a
//! restarted simulator finds the world its previous run left.

use std::collections::BTreeMap;

use helix_core::domain::embodiment::action::{ActionRefusal, Step};
use helix_core::domain::embodiment::chat::chat_text;
use helix_core::domain::embodiment::protocol::Command;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Player {
    pub native_id: String,
    pub name: String,
    pub pos: [i32; 3],
    pub inventory: BTreeMap<String, i32>,
    pub equipped: Option<String>,
}

/// Blocks below y=64 are stone, a few logs stand at y=64; `blocks` holds what differs,
/// keyed `x,y,z`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct World {
    pub players: Vec<Player>,
    pub blocks: BTreeMap<String, String>,
}

fn at(x: i32, y: i32, z: i32) -> String {
    format!("{x},{y},{z}")
}

/// How one step went on this tick.
pub enum Progress {
    Running,
    Done(Value),
    Failed(&'static str),
}

impl World {
    pub fn new(names: &str) -> Self {
        let players = names
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .enumerate()
            .map(|(i, n)| Player {
                native_id: format!("sim-{:08x}-{i}", helix_core::domain::sha256_hex(n).len() as u32 * 7919 + i as u32),
                name: n.to_owned(),
                // Within reach (6 blocks) of the nearest logs (x 5 and 6, z 5): a first break needs no move.
                pos: [4, 64, i as i32 * 2],
                inventory: BTreeMap::from([("minecraft:oak_log".into(), 4), ("minecraft:dirt".into(), 16)]),
                equipped: None,
            })
            .collect();
        let blocks = (0..4).map(|x| (at(x + 5, 64, 5), "minecraft:oak_log".to_owned())).collect();
        World { players, blocks }
    }

    /// Why the connector refuses a command before touching the world (acknowledged
    /// `rejected`): the player is not in the world, an `equip` names an item the player
    /// does not carry, or a `chat` line fails the chat rule a connector applies before
    /// sending (`chat_command`, `chat_text`; a line not in its checked form is `chat_text`).
    pub fn refuses(&self, cmd: &Command) -> Option<&'static str> {
        let Some(p) = self.players.iter().find(|p| p.native_id == cmd.native_id) else {
            return Some("player_offline");
        };
        match &cmd.step {
            Step::Equip(e) if p.inventory.get(&e.item).copied().unwrap_or(0) == 0 => Some("not_in_inventory"),
            Step::Chat(c) => match chat_text(&c.text) {
                Ok(sent) if sent == c.text => None,
                Ok(_) => Some(ActionRefusal::ChatText.reason()),
                Err(refusal) => Some(refusal.reason()),
            },
            _ => None,
        }
    }

    pub fn block(&self, x: i32, y: i32, z: i32) -> String {
        self.blocks
            .get(&at(x, y, z))
            .cloned()
            .unwrap_or_else(|| if y < 64 { "minecraft:stone" } else { "minecraft:air" }.into())
    }

    /// How many ticks (polls) a step takes before its effect: walking is four blocks a
    /// tick (in `step`), digging takes `dig_ticks`, waiting ten game ticks a poll.
    pub fn ticks_for(step: &Step, dig_ticks: u32) -> u32 {
        match step {
            Step::Wait(w) => u32::from(w.ticks).div_ceil(10),
            Step::BreakBlock(_) => dig_ticks.max(1),
            _ => 1,
        }
    }

    /// Plays one tick of `cmd`; `ticks_left` counts down the fixed-length steps. The world
    /// changes only when the step completes.
    pub fn step(&mut self, cmd: &Command, hazard: bool, ticks_left: &mut u32) -> Progress {
        let Some(i) = self.players.iter().position(|p| p.native_id == cmd.native_id) else {
            return Progress::Failed("unknown_player");
        };
        *ticks_left = ticks_left.saturating_sub(1);
        let waiting = *ticks_left > 0;
        match &cmd.step {
            Step::MoveTo(m) => {
                let p = &mut self.players[i];
                let target = [m.x, m.y, m.z];
                let mut left = 4;
                for (pos, goal) in p.pos.iter_mut().zip(target) {
                    while *pos != goal && left > 0 {
                        *pos += (goal - *pos).signum();
                        left -= 1;
                    }
                }
                let close = (0..3).all(|a| (p.pos[a] - target[a]).abs() <= i32::from(m.range));
                if close { Progress::Done(json!({ "position": p.pos })) } else { Progress::Running }
            }
            Step::BreakBlock(b) => {
                if hazard {
                    return Progress::Failed("hazard");
                }
                if self.block(b.x, b.y, b.z) != b.expected_block {
                    return Progress::Failed("unexpected_block");
                }
                if waiting {
                    return Progress::Running; // still digging: nothing changed yet
                }
                self.blocks.insert(at(b.x, b.y, b.z), "minecraft:air".into());
                *self.players[i].inventory.entry(b.expected_block.clone()).or_default() += 1;
                Progress::Done(json!({ "block_at_target": self.block(b.x, b.y, b.z) }))
            }
            Step::PlaceBlock(p) => {
                let free = self.blocks.get(&at(p.x, p.y, p.z)).is_none_or(|b| b == "minecraft:air");
                let inv = &mut self.players[i].inventory;
                match inv.get_mut(&p.item) {
                    Some(n) if *n > 0 && free => {
                        *n -= 1;
                        self.blocks.insert(at(p.x, p.y, p.z), p.item.clone());
                        Progress::Done(json!({ "block_at_target": p.item }))
                    }
                    _ => Progress::Failed("cannot_place"),
                }
            }
            Step::Equip(e) => {
                let p = &mut self.players[i];
                if p.inventory.get(&e.item).copied().unwrap_or(0) == 0 {
                    return Progress::Failed("not_in_inventory");
                }
                p.equipped = Some(e.item.clone());
                Progress::Done(json!({ "equipped": e.item }))
            }
            Step::Craft(c) => {
                // One log makes four planks; any other item needs one log per craft.
                let p = &mut self.players[i];
                let logs = p.inventory.entry("minecraft:oak_log".into()).or_default();
                let need = i32::from(c.times);
                if *logs < need {
                    return Progress::Failed("missing_ingredients");
                }
                *logs -= need;
                let made = if c.item == "minecraft:oak_planks" { 4 * need } else { need };
                *p.inventory.entry(c.item.clone()).or_default() += made;
                Progress::Done(json!({ "inventory_delta": [[c.item, made]] }))
            }
            Step::Chat(c) => Progress::Done(json!({ "chat_echo": c.text })),
            Step::Wait(_) if waiting => Progress::Running,
            Step::Wait(_) | Step::LookAt(_) | Step::Stop(_) => {
                Progress::Done(json!({ "position": self.players[i].pos }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use helix_core::domain::embodiment::action::Chat;

    fn chat(world: &World, text: &str) -> Option<&'static str> {
        let cmd = Command {
            workflow_ref: "wf_1".into(),
            lease_token: "t".into(),
            step_index: 0,
            step: Step::Chat(Chat { text: text.into() }),
            native_id: world.players[0].native_id.clone(),
            deadline_ms: 0,
        };
        world.refuses(&cmd)
    }

    /// The connector applies the chat rule before sending, whatever Helix delivered.
    #[test]
    fn a_chat_line_that_fails_the_rule_is_rejected_before_it_is_sent() {
        let world = World::new("Alex");
        for (text, want) in [
            ("hello", None),
            ("/op mallory", Some("chat_command")),
            (" /op mallory", Some("chat_command")),
            ("\u{3000}/op", Some("chat_command")),
            ("\u{00a0}/op", Some("chat_command")),
            ("\u{2028}/op", Some("chat_command")),
            ("\u{200b}/op", Some("chat_command")),
            ("\u{feff}/op", Some("chat_command")),
            ("\u{202e}/op", Some("chat_command")),
            ("\u{ff0f}op", Some("chat_command")),
            ("\u{2215}op", Some("chat_command")),
            ("§4red", Some("chat_text")),
            ("del\u{7f}", Some("chat_text")),
            ("ｈｉ", Some("chat_text")),
        ] {
            assert_eq!(chat(&world, text), want, "{text:?}");
        }
    }
}
