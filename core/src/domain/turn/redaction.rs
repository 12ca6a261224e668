//! Executor output passes the one credential rule before anything of it is stored or
//! projected: free text (summary, excerpts, claims, question prompts, contradictions,
//! requirement details) is redacted; an identifier or ref that carries a credential is
//! replaced by a stable `redacted:` digest (so it still dedupes, and never matches an
//! issued ref); a terminal candidate whose signed text carries one is rejected (see
//! `evaluate_authority`), since its text cannot be changed under its signature.

use super::*;
use crate::domain::credential::identifier_carries_credential;
use crate::domain::room::redact_text;

/// True when the rule would change `text` (the server's own identifiers excepted).
pub(super) fn carries_credential(text: &str) -> bool {
    redact_text(text) != text
}

fn text(s: String) -> String {
    if carries_credential(&s) { redact_text(&s) } else { s }
}

fn id(s: String) -> String {
    if identifier_carries_credential(&s) { format!("redacted:{}", &sha256_hex(&s)[..16]) } else { s }
}

fn ids(v: Vec<String>) -> Vec<String> {
    v.into_iter().map(id).collect()
}

/// The artifact with every executor-supplied string screened by the rule.
pub(super) fn screened(a: TurnArtifact) -> TurnArtifact {
    TurnArtifact {
        solver_status: a.solver_status,
        summary: text(a.summary),
        observation_refs: ids(a.observation_refs),
        evidence: a
            .evidence
            .into_iter()
            .map(|e| ArtifactEvidence {
                reference: id(e.reference),
                family: id(e.family),
                source: text(e.source),
                content_sha256: id(e.content_sha256),
                excerpt: text(e.excerpt),
            })
            .collect(),
        receipt_refs: ids(a.receipt_refs),
        satisfied_evidence_families: ids(a.satisfied_evidence_families),
        unresolved_requirements: a
            .unresolved_requirements
            .into_iter()
            .map(|r| Requirement {
                id: id(r.id),
                kind: match r.kind {
                    RequirementKind::Solver(k) => RequirementKind::Solver(id(k)),
                    k => k,
                },
                detail: text(r.detail),
            })
            .collect(),
        resolved_requirements: ids(a.resolved_requirements),
        contradictions: a
            .contradictions
            .into_iter()
            .map(|c| Contradiction { id: id(c.id), claim: text(c.claim), evidence_refs: ids(c.evidence_refs) })
            .collect(),
        supported_claims: a.supported_claims.into_iter().map(text).collect(),
        pending_questions: a
            .pending_questions
            .into_iter()
            .map(|q| Question { question_id: id(q.question_id), prompt: text(q.prompt) })
            .collect(),
        terminal_candidate: a.terminal_candidate,
        capabilities_used: ids(a.capabilities_used),
        // Checked against its signed receipt and never projected: a screened target would
        // only break the receipt's digest, so it passes unchanged (and fails closed there).
        room_mutation: a.room_mutation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_executor_string_is_screened() {
        let a: TurnArtifact = serde_json::from_value(serde_json::json!({
            "solver_status": "partial",
            "summary": "read it; api token: abc123xyz",
            "evidence": [{ "ref": "ev:1", "family": "f", "source": "s", "content_sha256": "00",
                           "excerpt": "my password: hunter2" }],
            "unresolved_requirements": [{ "id": "r1", "kind": "capability", "detail": "client_secret = s3cr3t" }],
            "contradictions": [{ "id": "c1", "claim": "\"password\": \"hunter2\"", "evidence_refs": [] }],
            "supported_claims": ["Bearer\u{200b}abcdefgh12345678"],
            "pending_questions": [{ "question_id": "q:password=hunter2", "prompt": "secret: s3cr3t?" }],
        }))
        .unwrap();
        let out = serde_json::to_string(&screened(a)).unwrap();
        for secret in ["abc123xyz", "hunter2", "s3cr3t", "abcdefgh12345678"] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(out.contains("api token: [redacted]"), "{out}");
        assert!(out.contains("\"question_id\":\"redacted:"), "{out}");
        assert!(out.contains("\"ref\":\"ev:1\""), "plain refs stay: {out}");
        assert!(carries_credential("the answer is password: hunter2"));
        assert!(!carries_credential("Steve joined the overworld. [run_0123456789abcdef0123456789abcdef]"));
    }
}
