//! Ranking: the BM25 search over the passage index, filtered to relevant, distinct
//! passages, and the query text an answer contributes. Reads the index only.

use std::collections::HashSet;

use bm25::Tokenizer;

use super::{LocalExecutor, MIN_MATCHED_TERMS, RELATIVE_CUTOFF, TOP_K};
use crate::domain::run::Answer;

impl LocalExecutor {
    /// Ranked relevant passages (indices into `passages`) for a query, best first,
    /// at most [`TOP_K`], distinct content only.
    pub(super) fn retrieve(&self, query: &str) -> Vec<(usize, f32)> {
        let terms: HashSet<String> = self.tokenizer.tokenize(query).into_iter().collect();
        if terms.is_empty() {
            return vec![];
        }
        let needed = MIN_MATCHED_TERMS.min(terms.len());
        let mut results = self.engine.search(query, TOP_K * 8);
        // The engine orders equal scores arbitrarily (hash-set order): make ties stable.
        results.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.document.id.cmp(&b.document.id)));
        let mut best = None;
        let mut hits: Vec<(usize, f32)> = Vec::new();
        for r in results {
            let i = r.document.id as usize;
            let passage = &self.passages[i];
            if r.score < self.min_score || r.score < best.unwrap_or(0.0) * RELATIVE_CUTOFF {
                break;
            }
            if terms.iter().filter(|t| passage.terms.contains(*t)).count() < needed
                || hits.iter().any(|(j, _)| self.passages[*j].sha256 == passage.sha256)
            {
                continue;
            }
            best.get_or_insert(r.score);
            hits.push((i, r.score));
            if hits.len() == TOP_K {
                break;
            }
        }
        hits
    }
}

/// The answers' text: string values (also inside arrays and objects) and numbers.
pub(super) fn answer_text(answers: &[Answer]) -> String {
    fn collect(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) if !s.trim().is_empty() => out.push(s.trim().to_owned()),
            serde_json::Value::Number(n) => out.push(n.to_string()),
            serde_json::Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
            serde_json::Value::Object(map) => map.values().for_each(|i| collect(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    answers.iter().for_each(|a| collect(&a.value, &mut out));
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::sha256_hex;
    use crate::domain::turn::SolverStatus;
    use crate::executor::local::tests::{executor, request, run};
    use crate::executor::local::{EVIDENCE_FAMILY, EXCERPT_CHARS};

    #[tokio::test]
    async fn a_sphere_plate_question_ranks_the_pfa_document_first() {
        let ex = executor();
        let a = run(
            &ex,
            request(
                "What is the Casimir force between a sphere and a plate?",
                Some("Explain the approximation used."),
                vec![],
            ),
        )
        .await;
        assert_eq!(a.solver_status, SolverStatus::Succeeded, "{a:?}");
        assert!(!a.evidence.is_empty() && a.evidence.len() <= TOP_K);
        assert!(
            a.evidence[0].source.starts_with("research-library://sphere-plate-proximity-force-approximation.md#p"),
            "{:?}",
            a.evidence.iter().map(|e| &e.source).collect::<Vec<_>>()
        );
        assert_eq!(a.satisfied_evidence_families, vec![EVIDENCE_FAMILY.to_string()]);
        assert_eq!(a.supported_claims.len(), a.evidence.len());
        for e in &a.evidence {
            let p = ex.passages.iter().find(|p| p.source() == e.source).unwrap();
            assert_eq!(e.content_sha256, sha256_hex(&p.text));
            assert_eq!(e.reference, format!("evidence:research_library:sha256:{}", &e.content_sha256[..16]));
            assert_eq!(e.family, EVIDENCE_FAMILY);
            assert!(e.excerpt.chars().count() <= EXCERPT_CHARS);
            assert!(p.text.starts_with(e.excerpt.trim_end_matches('…')));
        }
    }

    #[tokio::test]
    async fn other_topics_find_their_own_documents() {
        let ex = executor();
        for (objective, document) in [
            ("What did Lamoreaux measure with a torsion pendulum in 1997?", "lamoreaux-1997-torsion-pendulum.md"),
            ("Atomic force microscope Casimir measurement by Mohideen and Roy", "mohideen-roy-afm-measurements.md"),
            ("Can the Casimir force be repulsive?", "repulsive-casimir-forces.md"),
            ("Does stiction in MEMS devices come from Casimir forces?", "mems-and-stiction.md"),
            ("How do moving mirrors create photons from the vacuum?", "dynamical-casimir-effect.md"),
            ("Drude versus plasma model thermal correction at room temperature", "thermal-corrections.md"),
        ] {
            let a = run(&ex, request(objective, None, vec![])).await;
            assert!(
                a.evidence.first().is_some_and(|e| e.source.contains(document)),
                "{objective}: {:?}",
                a.evidence.iter().map(|e| &e.source).collect::<Vec<_>>()
            );
        }
    }

    #[tokio::test]
    async fn an_answer_narrows_the_next_turn() {
        let ex = executor();
        // Off-corpus objective: the answer alone becomes the query.
        let answer = |v: serde_json::Value| vec![Answer { question_id: "q_step1_focus".into(), value: v }];
        let a = run(
            &ex,
            request("Recommend a sourdough bread recipe", None, answer(json!("dynamical Casimir effect photons"))),
        )
        .await;
        assert_eq!(a.solver_status, SolverStatus::Succeeded, "{a:?}");
        assert!(a.pending_questions.is_empty());
        assert!(a.evidence[0].source.contains("dynamical-casimir-effect.md"), "{:?}", a.evidence);

        // On-corpus but broad objective: the answer reorders the ranking.
        let broad = "Casimir force measurements";
        let plain = run(&ex, request(broad, None, vec![])).await;
        let narrowed = run(&ex, request(broad, None, answer(json!(["surface roughness"])))).await;
        assert!(!plain.evidence[0].source.contains("roughness"), "{:?}", plain.evidence);
        assert!(
            narrowed.evidence[0].source.contains("finite-conductivity-and-roughness.md"),
            "{:?}",
            narrowed.evidence
        );

        // An answer that finds nothing either: asked again, differently.
        let none = run(&ex, request("Recommend a bread recipe", None, answer(json!("sourdough starter")))).await;
        assert_eq!(none.solver_status, SolverStatus::Partial);
        assert_eq!(none.pending_questions.len(), 1);
        assert!(none.pending_questions[0].prompt.contains("topic you gave"));
    }
}
