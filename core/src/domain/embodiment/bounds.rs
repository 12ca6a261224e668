//! The owner-set bounds of an environment binding and the reach of a player: an
//! axis-aligned box every coordinate of every step must lie in, and the distance from
//! the subject's known position within which it may break, place or look at a block.
//! No I/O.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::action::{MAX_Y, MIN_Y, Pos, Step};

/// How far (Euclidean, in blocks) a player reaches from where it stands: a `break_block`,
/// `place_block` or `look_at` target farther than this (plus a preceding `move_to`'s
/// `range`) is `out_of_reach`.
pub const REACH_BLOCKS: i64 = 6;

/// An owner-set axis-aligned box (both corners included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegionBox {
    pub min: Pos,
    pub max: Pos,
}

impl RegionBox {
    /// A well-formed box: `min` ≤ `max` on every axis and inside the world's height.
    pub fn well_formed(&self) -> bool {
        let (a, b) = (&self.min, &self.max);
        a.x <= b.x && a.y <= b.y && a.z <= b.z && a.y >= MIN_Y && b.y <= MAX_Y
    }

    pub fn admits(&self, x: i32, y: i32, z: i32) -> bool {
        (self.min.x..=self.max.x).contains(&x)
            && (self.min.y..=self.max.y).contains(&y)
            && (self.min.z..=self.max.z).contains(&z)
    }

    /// Every coordinate of every step lies inside the box.
    pub fn admits_steps(&self, steps: &[Step]) -> bool {
        steps.iter().filter_map(target).all(|[x, y, z]| self.admits(x, y, z))
    }
}

/// The block position a step names (none for equip, craft, chat, wait, stop).
pub fn target(step: &Step) -> Option<[i32; 3]> {
    match step {
        Step::MoveTo(m) => Some([m.x, m.y, m.z]),
        Step::LookAt(p) => Some([p.x, p.y, p.z]),
        Step::BreakBlock(b) => Some([b.x, b.y, b.z]),
        Step::PlaceBlock(p) => Some([p.x, p.y, p.z]),
        _ => None,
    }
}

fn within(from: [i32; 3], to: [i32; 3], reach: i64) -> bool {
    let d2: i64 = (0..3).map(|a| (i64::from(from[a]) - i64::from(to[a])).pow(2)).sum();
    d2 <= reach * reach
}

/// Whether every reaching step (break, place, look) is within [`REACH_BLOCKS`] of where
/// the subject stands then: `start` (its last reported position) or the target of the
/// preceding `move_to` in the sequence, whose `range` is added to the reach. A reaching
/// step with no known position before it is not checked.
pub fn within_reach(start: Option<[i32; 3]>, steps: &[Step]) -> bool {
    let mut at = start.map(|p| (p, 0i64));
    for step in steps {
        match step {
            Step::MoveTo(m) => at = Some(([m.x, m.y, m.z], i64::from(m.range))),
            Step::BreakBlock(_) | Step::PlaceBlock(_) | Step::LookAt(_) => {
                let to = target(step).expect("a reaching step names a block");
                if let Some((from, slack)) = at
                    && !within(from, to, REACH_BLOCKS + slack)
                {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::embodiment::Action;
    use serde_json::json;

    fn steps(v: serde_json::Value) -> Vec<Step> {
        Action::parse(&v).unwrap().steps()
    }

    fn boxed(min: [i32; 3], max: [i32; 3]) -> RegionBox {
        let p = |[x, y, z]: [i32; 3]| Pos { x, y, z };
        RegionBox { min: p(min), max: p(max) }
    }

    #[test]
    fn a_region_admits_only_steps_whose_every_coordinate_is_inside() {
        let r = boxed([-10, 60, -10], [10, 80, 10]);
        assert!(r.well_formed());
        assert!(r.admits_steps(&steps(json!({"type": "move_to", "x": 10, "y": 60, "z": -10}))), "corners included");
        assert!(!r.admits_steps(&steps(json!({"type": "move_to", "x": 11, "y": 64, "z": 0}))));
        assert!(!r.admits_steps(&steps(json!({"type": "look_at", "x": 0, "y": 81, "z": 0}))));
        let seq = json!({"type": "sequence", "steps": [
            {"type": "chat", "text": "hi"},
            {"type": "break_block", "x": 0, "y": 64, "z": 11, "expected_block": "minecraft:stone"}]});
        assert!(!r.admits_steps(&steps(seq)), "one step outside refuses the sequence");
        assert!(r.admits_steps(&steps(json!({"type": "chat", "text": "no position"}))));
        assert!(!boxed([1, 64, 0], [0, 64, 0]).well_formed());
        assert!(!boxed([0, -65, 0], [0, 64, 0]).well_formed());
    }

    #[test]
    fn reach_counts_from_the_reported_position_or_the_preceding_move() {
        let brk = |x: i32| json!({"type": "break_block", "x": x, "y": 64, "z": 0, "expected_block": "minecraft:stone"});
        assert!(within_reach(Some([0, 64, 0]), &steps(brk(6))));
        assert!(!within_reach(Some([0, 64, 0]), &steps(brk(7))));
        assert!(!within_reach(Some([0, 64, 0]), &steps(json!({"type": "look_at", "x": 5, "y": 64, "z": 5}))));
        assert!(within_reach(None, &steps(brk(7))), "no known position: not checked");
        let moved =
            json!({"type": "sequence", "steps": [{"type": "move_to", "x": 20, "y": 64, "z": 0, "range": 2}, brk(28)]});
        assert!(within_reach(Some([0, 64, 0]), &steps(moved)), "6 + the move's range 2");
        let far =
            json!({"type": "sequence", "steps": [{"type": "move_to", "x": 20, "y": 64, "z": 0, "range": 2}, brk(29)]});
        assert!(!within_reach(Some([0, 64, 0]), &steps(far)));
        let unknown_then_move =
            json!({"type": "sequence", "steps": [brk(40), {"type": "move_to", "x": 40, "y": 64, "z": 0}]});
        assert!(!within_reach(Some([0, 64, 0]), &steps(unknown_then_move)), "the move comes after the break");
    }
}
