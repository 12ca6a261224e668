//! Turn building: the artifact of one turn from the admitted capabilities — live room
//! observations, an answered environment probe, the research library — with evidence,
//! claims and a terminal candidate signed for exactly this run, step and claim.

use super::ranking::answer_text;
use super::text::{best_sentence, clip_chars, excerpt};
use super::{ANSWER_WEIGHT, CAPABILITY, CLAIM_CHARS, EVIDENCE_FAMILY, EXCERPT_CHARS, LocalExecutor, Passage};
use crate::domain::run::{Question, Requirement, RequirementKind};
use crate::domain::source::{PROBE_CAPABILITY, PROBE_FAMILY, ROOM_EVIDENCE_CAPABILITY, ROOM_EVIDENCE_FAMILY};
use crate::domain::turn::{ArtifactEvidence, SolverStatus, TurnArtifact};
use crate::executor::TurnRequest;

impl LocalExecutor {
    /// A turn with admitted live room observations uses them as passages: each fresh
    /// observation becomes a `shared_live_room_evidence` item and an observation ref of
    /// this turn, and the terminal candidate cites them. An answered environment probe
    /// becomes a `shared_live_room_environment_probe` item the same way. A run that also
    /// admits the research library gets both, cited together.
    pub(super) fn solve(&self, req: &TurnRequest) -> TurnArtifact {
        let room = req
            .room_evidence
            .as_ref()
            .filter(|e| !e.observations.is_empty())
            .filter(|_| req.capabilities.iter().any(|c| c == ROOM_EVIDENCE_CAPABILITY));
        let probe = req.room_probe.as_ref().filter(|_| req.capabilities.iter().any(|c| c == PROBE_CAPABILITY));
        if room.is_none() && probe.is_none() {
            return self.solve_library(req);
        }
        let mut evidence: Vec<ArtifactEvidence> = vec![];
        let mut families: Vec<String> = vec![];
        let mut texts: Vec<String> = vec![];
        let mut claims: Vec<String> = vec![];
        let mut summaries: Vec<String> = vec![];
        if let Some(probe) = probe {
            let a = &probe.answer;
            let item = ArtifactEvidence {
                reference: a.observation_ref.clone(),
                family: PROBE_FAMILY.into(),
                source: format!("room-source:{}#probe:{}", a.provenance.source_id, probe.probe_id),
                content_sha256: a.content_sha256.clone(),
                excerpt: excerpt(&format!("{} ({})", a.summary, inventory_text(&a.data)), EXCERPT_CHARS),
            };
            texts.push(format!(
                "Inventory check of world {} (probe {}): {} [{}]",
                a.provenance.world_id, probe.probe_id, item.excerpt, item.reference
            ));
            claims.push(item.excerpt.clone());
            families.push(PROBE_FAMILY.into());
            summaries.push(format!("Read the answer to environment probe {}.", probe.probe_id));
            evidence.push(item);
        }
        if let Some(room) = room {
            let items: Vec<ArtifactEvidence> = room
                .observations
                .iter()
                .map(|o| ArtifactEvidence {
                    reference: o.observation_ref.clone(),
                    family: ROOM_EVIDENCE_FAMILY.into(),
                    source: format!("room-source:{}#{}", o.provenance.source_id, o.provenance.request_id),
                    content_sha256: o.content_sha256.clone(),
                    excerpt: excerpt(&o.summary, EXCERPT_CHARS),
                })
                .collect();
            let latest: Vec<&ArtifactEvidence> = items.iter().rev().take(5).collect();
            texts.push(format!(
                "Live room observations ({} fresh, world {}): {}",
                room.observations.len(),
                room.observations[0].provenance.world_id,
                latest.iter().rev().map(|e| format!("{} [{}]", e.excerpt, e.reference)).collect::<Vec<_>>().join("; ")
            ));
            claims.extend(latest.iter().rev().map(|e| e.excerpt.clone()));
            families.push(ROOM_EVIDENCE_FAMILY.into());
            summaries.push(format!("Read {} fresh observation(s) of the bound room.", room.observations.len()));
            evidence.extend(items);
        }
        let observation_refs: Vec<String> = evidence.iter().map(|e| e.reference.clone()).collect();
        let mut refs = observation_refs.clone();
        let mut text = texts.join(" ");
        let mut summary = summaries.join(" ");
        let mut resolved = vec![];
        if req.capabilities.iter().any(|c| c == CAPABILITY) {
            let library = self.solve_library(req);
            if library.solver_status == SolverStatus::Succeeded {
                refs.extend(library.evidence.iter().map(|e| e.reference.clone()));
                families.extend(library.satisfied_evidence_families.clone());
                claims.extend(library.supported_claims.clone());
                if let Some(c) = &library.terminal_candidate {
                    text = format!("{text} {}", c.text);
                }
                summary = format!("{summary} {}", library.summary);
                evidence.extend(library.evidence);
            }
            resolved = library.resolved_requirements;
        }
        TurnArtifact {
            observation_refs,
            evidence,
            satisfied_evidence_families: families,
            resolved_requirements: resolved,
            supported_claims: claims,
            terminal_candidate: Some(self.signer.sign(&req.run_id, req.step, &req.claim_token, &text, refs)),
            ..artifact(SolverStatus::Succeeded, summary)
        }
    }

    fn solve_library(&self, req: &TurnRequest) -> TurnArtifact {
        if !req.capabilities.iter().any(|c| c == CAPABILITY) {
            return TurnArtifact {
                unresolved_requirements: vec![Requirement {
                    id: format!("capability:{CAPABILITY}"),
                    kind: RequirementKind::Solver("capability".into()),
                    detail: format!("the turn was not admitted {CAPABILITY}, so the research library cannot be read"),
                }],
                ..artifact(
                    SolverStatus::Partial,
                    format!(
                        "No retrieval tool was admitted for this turn ({CAPABILITY} is missing); nothing was read."
                    ),
                )
            };
        }
        let answers = answer_text(&req.answers);
        let mut query = req.objective.clone();
        if let Some(instruction) = &req.instruction {
            query.push('\n');
            query.push_str(instruction);
        }
        for _ in 0..ANSWER_WEIGHT {
            if !answers.is_empty() {
                query.push('\n');
                query.push_str(&answers);
            }
        }
        let mut hits = self.retrieve(&query);
        if hits.is_empty() && !answers.is_empty() {
            // The answer is the user's own narrowing: search for it alone.
            hits = self.retrieve(&answers);
        }
        if hits.is_empty() {
            let prompt = if answers.is_empty() {
                "The research library has nothing on that objective. Which topic or keyword should the next turn search for?"
            } else {
                "The research library has nothing on that objective or on the topic you gave. Which other topic or keyword should the next turn search for?"
            };
            return TurnArtifact {
                pending_questions: vec![Question {
                    question_id: format!("q_step{}_focus", req.step),
                    prompt: prompt.into(),
                }],
                resolved_requirements: vec![format!("capability:{CAPABILITY}")],
                ..artifact(
                    SolverStatus::Partial,
                    format!(
                        "No passage among {} in the research library matched the {}; asked which topic to search next.",
                        self.passages.len(),
                        if answers.is_empty() { "objective" } else { "objective or the answers given" }
                    ),
                )
            };
        }

        let chosen: Vec<&Passage> = hits.iter().map(|(i, _)| &self.passages[*i]).collect();
        let evidence: Vec<ArtifactEvidence> = chosen
            .iter()
            .map(|p| ArtifactEvidence {
                reference: p.reference(),
                family: EVIDENCE_FAMILY.into(),
                source: p.source(),
                content_sha256: p.sha256.clone(),
                excerpt: excerpt(&p.text, EXCERPT_CHARS),
            })
            .collect();
        let refs: Vec<String> = evidence.iter().map(|e| e.reference.clone()).collect();
        let claims: Vec<String> =
            chosen.iter().map(|p| clip_chars(best_sentence(&p.text, &query), CLAIM_CHARS)).collect();
        let text = claims.iter().zip(&refs).map(|(c, r)| format!("{c} [{r}]")).collect::<Vec<_>>().join(" ");
        let mut titles: Vec<&str> = Vec::new();
        for p in &chosen {
            if !titles.contains(&p.title.as_str()) {
                titles.push(&p.title);
            }
        }
        let summary = format!(
            "Retrieved {} passage{} from the research library ({}) and composed an extractive answer citing them.",
            chosen.len(),
            if chosen.len() == 1 { "" } else { "s" },
            titles.join("; ")
        );
        TurnArtifact {
            evidence,
            satisfied_evidence_families: vec![EVIDENCE_FAMILY.into()],
            resolved_requirements: vec![format!("capability:{CAPABILITY}")],
            supported_claims: claims,
            terminal_candidate: Some(self.signer.sign(&req.run_id, req.step, &req.claim_token, &text, refs)),
            ..artifact(SolverStatus::Succeeded, summary)
        }
    }
}

fn artifact(solver_status: SolverStatus, summary: String) -> TurnArtifact {
    TurnArtifact {
        capabilities_used: vec![],
        room_mutation: None,
        solver_status,
        summary,
        observation_refs: vec![],
        evidence: vec![],
        receipt_refs: vec![],
        satisfied_evidence_families: vec![],
        unresolved_requirements: vec![],
        resolved_requirements: vec![],
        contradictions: vec![],
        supported_claims: vec![],
        pending_questions: vec![],
        terminal_candidate: None,
    }
}

/// A probe answer's inventory as text: "Steve: 12 minecraft:oak_log, 3 minecraft:bread; Alex: nothing".
fn inventory_text(data: &serde_json::Map<String, serde_json::Value>) -> String {
    let players = data.get("inventory").and_then(|i| i["players"].as_array()).cloned().unwrap_or_default();
    if players.is_empty() {
        return "nobody online".into();
    }
    players
        .iter()
        .map(|p| {
            let items: Vec<String> = p["items"]
                .as_array()
                .map(|items| {
                    items.iter().map(|i| format!("{} {}", i["count"], i["item"].as_str().unwrap_or_default())).collect()
                })
                .unwrap_or_default();
            let carried = if items.is_empty() { "nothing".to_string() } else { items.join(", ") };
            format!("{}: {carried}", p["player"].as_str().unwrap_or_default())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::authority::TrustedKeys;
    use crate::executor::local::tests::{executor, probe_input, request, run};

    #[tokio::test]
    async fn an_answered_probe_becomes_cited_probe_evidence_only_with_its_capability() {
        let ex = executor();
        let mut req = request("What do the players carry?", None, vec![]);
        req.capabilities = vec![PROBE_CAPABILITY.into()];
        req.room_probe = Some(probe_input());
        let a = run(&ex, req.clone()).await;
        assert_eq!(a.solver_status, SolverStatus::Succeeded);
        assert_eq!(a.satisfied_evidence_families, vec![PROBE_FAMILY.to_string()]);
        assert_eq!(a.observation_refs, vec!["obsv_0123456789abcdef01234567".to_string()]);
        assert_eq!(a.evidence[0].family, PROBE_FAMILY);
        let c = a.terminal_candidate.expect("a signed candidate");
        assert_eq!(c.supporting_refs, a.observation_refs);
        assert!(c.text.contains("Steve: 12 minecraft:oak_log"), "{}", c.text);
        // Without the capability the probe is not read.
        req.capabilities = vec![];
        let a = run(&ex, req).await;
        assert!(a.evidence.iter().all(|e| e.family != PROBE_FAMILY));
    }

    #[tokio::test]
    async fn the_candidate_verifies_for_this_run_step_and_claim_only() {
        let ex = executor();
        let req = request(
            "What is the magnitude of the Casimir pressure between parallel plates at one micrometre?",
            None,
            vec![],
        );
        let a = run(&ex, req.clone()).await;
        let c = a.terminal_candidate.clone().expect("a terminal candidate");
        let refs: Vec<String> = a.evidence.iter().map(|e| e.reference.clone()).collect();
        assert_eq!(c.supporting_refs, refs);
        assert!(refs.iter().all(|r| c.text.contains(&format!("[{r}]"))), "{}", c.text);
        let mut keys = TrustedKeys::default();
        keys.insert(&ex.signer().issuer, &ex.signer().key_id, ex.signer().verifying_key());
        assert_eq!(keys.verify(&c, &req.run_id, req.step, &req.claim_token, &refs), Ok(()));
        assert!(keys.verify(&c, &req.run_id, req.step + 1, &req.claim_token, &refs).is_err());
        assert!(keys.verify(&c, &req.run_id, req.step, "another-claim", &refs).is_err());
    }

    #[tokio::test]
    async fn nothing_relevant_asks_which_topic_to_search() {
        let ex = executor();
        let mut req = request("Recommend a sourdough bread recipe with a long fermentation", None, vec![]);
        req.step = 4;
        let a = run(&ex, req).await;
        assert_eq!(a.solver_status, SolverStatus::Partial);
        assert!(a.evidence.is_empty() && a.satisfied_evidence_families.is_empty() && a.terminal_candidate.is_none());
        assert_eq!(
            a.pending_questions,
            vec![Question {
                question_id: "q_step4_focus".into(),
                prompt: "The research library has nothing on that objective. Which topic or keyword should the next turn search for?".into(),
            }]
        );
    }

    #[tokio::test]
    async fn without_the_capability_nothing_is_read() {
        let ex = executor();
        let mut req = request("sphere plate proximity force approximation", None, vec![]);
        req.capabilities = vec!["internet-search.search_web".into()];
        let a = run(&ex, req).await;
        assert_eq!(a.solver_status, SolverStatus::Partial);
        assert!(a.evidence.is_empty() && a.terminal_candidate.is_none() && a.pending_questions.is_empty());
        assert_eq!(a.unresolved_requirements.len(), 1);
        assert_eq!(a.unresolved_requirements[0].id, "capability:research-library.read_document");
    }
}
