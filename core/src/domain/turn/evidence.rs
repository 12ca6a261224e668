//! What one turn re-enters and projects: the bounded refs of a successful artifact,
//! the service-owned requirements rebuilt from this turn alone (the evidence gate), and
//! the external projection of the audited refs. Pure, like the turn it serves.

use super::*;

/// The bounded refs one turn re-entered. Only a successful solver artifact re-enters
/// anything: a partial or failed one contributes no current-turn refs (contract:
/// evidence is projected only from the current turn's successful artifact).
pub(super) struct ReentryAudit {
    observations: Vec<String>,
    evidence: Vec<EvidenceItem>,
    receipts: Vec<String>,
}

impl ReentryAudit {
    pub(super) fn of(a: &TurnArtifact, step: u32) -> Self {
        if a.solver_status != SolverStatus::Succeeded {
            return Self { observations: vec![], evidence: vec![], receipts: vec![] };
        }
        let evidence = a
            .evidence
            .iter()
            .filter(|e| !e.reference.is_empty())
            .take(MAX_ITEMS_PER_TURN)
            .map(|e| EvidenceItem {
                reference: clip(&e.reference, MAX_REF_CHARS),
                family: clip(&e.family, 100),
                source: clip(&e.source, MAX_REF_CHARS),
                content_sha256: clip(&e.content_sha256, 64),
                excerpt: clip(&e.excerpt, MAX_EXCERPT_CHARS),
                step,
            })
            .collect();
        Self { observations: bounded_refs(&a.observation_refs), evidence, receipts: bounded_refs(&a.receipt_refs) }
    }

    /// Every current-turn ref, of all three kinds.
    pub(super) fn current_refs(&self) -> Vec<String> {
        let mut refs = self.observations.clone();
        refs.extend(self.evidence.iter().map(|e| e.reference.clone()));
        refs.extend(self.receipts.iter().cloned());
        refs
    }
}

/// Requirements: the executor may resolve and add its own; the service-owned ones (the
/// scope-required evidence gate, turn failures) are rebuilt here from this turn alone,
/// whatever the executor or earlier turns said. Returns whether the gate is open.
pub(super) fn rebuild_requirements(
    run: &mut Run,
    ctx: &TurnContext<'_>,
    a: &TurnArtifact,
    audit: &ReentryAudit,
) -> bool {
    let service_owned = |r: &Requirement| {
        r.kind.is_service_owned() || r.id.starts_with("required_evidence:") || r.id.starts_with("turn_failure:")
    };
    let mut unresolved: Vec<Requirement> = run
        .unresolved_requirements
        .iter()
        .filter(|r| !service_owned(r))
        .filter(|r| !a.resolved_requirements.contains(&r.id))
        .cloned()
        .collect();
    push_unique(
        &mut unresolved,
        a.unresolved_requirements.iter().filter(|r| !service_owned(r)).take(MAX_ITEMS_PER_TURN).cloned(),
    );
    let current = audit.current_refs();
    let turn_has_refs = !current.is_empty();
    let cites_issued = |f: &String| {
        ctx.family_refs
            .iter()
            .filter(|(family, _)| family == f)
            .all(|(_, refs)| refs.iter().any(|r| current.contains(r)))
    };
    let gate_open = ctx
        .required_families
        .iter()
        .filter(|f| !turn_has_refs || !a.satisfied_evidence_families.contains(f) || !cites_issued(f))
        .map(|f| required_evidence(f))
        .collect::<Vec<_>>();
    let gate_blocked = !gate_open.is_empty();
    unresolved.extend(gate_open);
    run.unresolved_requirements = unresolved;
    gate_blocked
}

/// External projection of the audited refs. When terminal grounding is required, only
/// what the verified authority cites is projected (nothing without one); supported claims
/// come only from a successful artifact. Contradictions are always kept: a conflict is
/// surfaced whatever the solver status.
pub(super) fn project_evidence(
    run: &mut Run,
    ctx: &TurnContext<'_>,
    a: &TurnArtifact,
    audit: &ReentryAudit,
    product: Option<&TerminalProduct>,
    log: &mut EventLog,
) {
    let grounded = run.completion_contract.require_terminal_authority;
    let admitted = |r: &String| !grounded || product.is_some_and(|p| p.supporting_evidence_refs.contains(r));
    let observations: Vec<String> = audit.observations.iter().filter(|r| admitted(r)).cloned().collect();
    let receipts: Vec<String> = audit.receipts.iter().filter(|r| admitted(r)).cloned().collect();
    let evidence: Vec<&EvidenceItem> = audit.evidence.iter().filter(|e| admitted(&e.reference)).collect();
    let evidence_refs: Vec<String> = evidence.iter().map(|e| e.reference.clone()).collect();

    push_unique(&mut run.evidence.observation_refs, observations.clone());
    push_unique(&mut run.evidence.evidence_refs, evidence_refs.clone());
    push_unique(&mut run.evidence.receipt_refs, receipts.clone());
    for item in evidence {
        if !run.evidence_items.iter().any(|e| e.reference == item.reference) {
            run.evidence_items.push(item.clone());
        }
    }
    if !audit.current_refs().is_empty() {
        log.push(
            run.version,
            EventData::EvidenceReentered(EvidenceReentered {
                evidence_refs,
                observation_refs: observations,
                receipt_refs: receipts,
                satisfied_evidence_families: a.satisfied_evidence_families.clone(),
                step: ctx.step,
            }),
        );
    }
    if a.solver_status == SolverStatus::Succeeded {
        push_unique(
            &mut run.supported_claims,
            a.supported_claims.iter().take(MAX_ITEMS_PER_TURN).map(|c| clip(c, 500)),
        );
    }
    push_unique(&mut run.contradictions, a.contradictions.iter().take(MAX_ITEMS_PER_TURN).cloned());
}
