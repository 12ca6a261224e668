//! Read mode at re-entry: a turn may cite only what its request admitted. Every read
//! capability it says it called must be one of the request's `capabilities`, and every
//! evidence family it names (on an evidence item or as satisfied) one of the run's
//! admitted families, for every family of the catalog alike. Anything else refuses the
//! whole turn, typed, before anything of it is projected.

use super::{TurnArtifact, TurnFailure};

/// The first read-mode violation of the artifact, if any.
pub fn read_mode_violation(a: &TurnArtifact, capabilities: &[String], families: &[String]) -> Option<TurnFailure> {
    if a.capabilities_used.iter().any(|c| !capabilities.contains(c)) {
        return Some(TurnFailure::CapabilityNotAdmitted);
    }
    let cited = a.evidence.iter().map(|e| &e.family).chain(&a.satisfied_evidence_families);
    cited.into_iter().any(|f| !families.contains(f)).then_some(TurnFailure::EvidenceFamilyNotAdmitted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::scopes::CATALOG;

    fn artifact(caps: &[&str], evidence_family: Option<&str>, satisfied: &[&str]) -> TurnArtifact {
        let evidence: Vec<serde_json::Value> = evidence_family
            .map(|f| serde_json::json!({ "ref": "ev:1", "family": f, "source": "s", "content_sha256": "00" }))
            .into_iter()
            .collect();
        serde_json::from_value(serde_json::json!({
            "solver_status": "succeeded",
            "summary": "s",
            "capabilities_used": caps,
            "evidence": evidence,
            "satisfied_evidence_families": satisfied,
        }))
        .unwrap()
    }

    #[test]
    fn every_catalog_family_and_capability_is_refused_outside_its_scope_and_admitted_within() {
        for scope in CATALOG {
            let caps: Vec<String> = scope.capabilities.iter().map(|c| c.to_string()).collect();
            let fams = vec![scope.evidence_family.to_string()];
            let (no_caps, no_fams): (Vec<String>, Vec<String>) = (vec![], vec![]);
            let f = scope.evidence_family;
            for cap in scope.capabilities {
                assert_eq!(read_mode_violation(&artifact(&[cap], None, &[]), &caps, &fams), None, "{cap}");
                let refused = read_mode_violation(&artifact(&[cap], None, &[]), &no_caps, &fams);
                assert_eq!(refused, Some(TurnFailure::CapabilityNotAdmitted), "{cap}");
            }
            assert_eq!(read_mode_violation(&artifact(&[], Some(f), &[f]), &caps, &fams), None, "{f}");
            for a in [artifact(&[], Some(f), &[]), artifact(&[], None, &[f])] {
                assert_eq!(
                    read_mode_violation(&a, &caps, &no_fams),
                    Some(TurnFailure::EvidenceFamilyNotAdmitted),
                    "{f}"
                );
            }
        }
    }
}
