//! The code-owned catalog of logical data scopes and the OAuth scopes of the API.
//! Deployment configuration may enable an entry; it cannot add one or widen it.

pub const RUNS_READ: &str = "helix.agent_runs.read";
pub const RUNS_WRITE: &str = "helix.agent_runs.write";
pub const ROOMS_READ: &str = "helix.rooms.read";
pub const ROOMS_MANAGE: &str = "helix.rooms.manage";
pub const ROOM_SOURCES_MANAGE: &str = "helix.room_sources.manage";
pub const ENV_ACTIONS_READ: &str = "helix.environment_actions.read";
pub const ENV_ACTIONS_WRITE: &str = "helix.environment_actions.write";
/// The developer OAuth scope: in production, developer account privileges (room
/// sources) also need it on the bearer, besides the policy flag and the allowlist.
pub const DEVELOPER: &str = "helix.developer";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataScope {
    pub id: &'static str,
    pub oauth_scope: &'static str,
    pub evidence_family: &'static str,
    pub capabilities: &'static [&'static str],
    /// Admitted only for a run durably bound to one exact room, with the contract's
    /// per-continuation rechecks (binding, membership, consent, room, source).
    pub room_bound: bool,
}

pub const CATALOG: &[DataScope] = &[
    DataScope {
        id: "public_web",
        oauth_scope: "helix.data.public_web.read",
        evidence_family: "internet_search_evidence",
        capabilities: &["internet-search.search_web"],
        room_bound: false,
    },
    DataScope {
        id: "scholarly_research",
        oauth_scope: "helix.data.scholarly_research.read",
        evidence_family: "scholarly_evidence",
        capabilities: &["scholarly.paper_lookup", "scholarly.fulltext_fetch", "scholarly.numeric_extract"],
        room_bound: false,
    },
    DataScope {
        id: "research_library",
        oauth_scope: "helix.data.research_library.read",
        evidence_family: "research_library_evidence",
        capabilities: &["research-library.read_document"],
        room_bound: false,
    },
    DataScope {
        id: "repository_evidence",
        oauth_scope: "helix.data.repository_evidence.read",
        evidence_family: "repository_evidence",
        capabilities: &["repository.code_search", "repository.read_file", "repository.docs_search"],
        room_bound: false,
    },
    DataScope {
        id: "theory_registry",
        oauth_scope: "helix.data.theory_registry.read",
        evidence_family: "theory_registry_evidence",
        capabilities: &["theory-registry.reflect_context"],
        room_bound: false,
    },
    DataScope {
        id: "bound_room_evidence",
        oauth_scope: ROOMS_READ,
        evidence_family: "shared_live_room_evidence",
        capabilities: &["room.evidence.read_bound"],
        room_bound: true,
    },
    DataScope {
        id: "bound_room_environment_probe",
        oauth_scope: ROOMS_READ,
        evidence_family: "shared_live_room_environment_probe",
        capabilities: &["com.casimirbot.minecraft.inventory.check"],
        room_bound: true,
    },
];

pub fn lookup(id: &str) -> Option<&'static DataScope> {
    CATALOG.iter().find(|s| s.id == id)
}

/// Every OAuth scope the protected resource advertises, in a stable order.
pub fn all_oauth_scopes() -> Vec<&'static str> {
    let mut all = vec![
        RUNS_READ,
        RUNS_WRITE,
        ROOMS_READ,
        ROOMS_MANAGE,
        ROOM_SOURCES_MANAGE,
        ENV_ACTIONS_READ,
        ENV_ACTIONS_WRITE,
        DEVELOPER,
    ];
    for s in CATALOG {
        if !all.contains(&s.oauth_scope) {
            all.push(s.oauth_scope);
        }
    }
    all
}

/// What an OAuth scope lets a client do, in plain words (the consent page shows it beside
/// the identifier); None for a scope this catalog does not have.
pub fn plain_words(oauth_scope: &str) -> Option<&'static str> {
    Some(match oauth_scope {
        RUNS_READ => "See your agent runs: their progress, events, evidence and answers.",
        RUNS_WRITE => "Start, continue and cancel agent runs for you.",
        ROOMS_READ => "See the Shared Live Rooms you belong to, and let a run bound to one read its live evidence.",
        ROOMS_MANAGE => "Create rooms for you and manage their members, invites and bindings.",
        ROOM_SOURCES_MANAGE => "Create live evidence sources in rooms you own.",
        ENV_ACTIONS_READ => "See the players and action workflows in your rooms' worlds.",
        ENV_ACTIONS_WRITE => "Drive the player you selected in a room's world (typed actions you can stop).",
        DEVELOPER => "Use your account's developer privileges (live evidence sources).",
        "helix.data.public_web.read" => "Let runs search the public web.",
        "helix.data.scholarly_research.read" => "Let runs look up and read scholarly papers.",
        "helix.data.research_library.read" => "Let runs read documents in the research library.",
        "helix.data.repository_evidence.read" => "Let runs search and read code repositories.",
        "helix.data.theory_registry.read" => "Let runs read the theory registry.",
        _ => return None,
    })
}

/// The OAuth scopes the requested logical scopes need, deduplicated in request order: those
/// of the enabled, known ones (any other is refused by [`admit`] whatever the token holds).
pub fn oauth_scopes_of(requested: &[String], enabled: &[String]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for scope in requested.iter().filter(|id| enabled.contains(id)).filter_map(|id| lookup(id)) {
        if !out.contains(&scope.oauth_scope) {
            out.push(scope.oauth_scope);
        }
    }
    out
}

/// Why a requested logical scope was refused (the four checks of the contract, in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeRefusal {
    NotEnabled(String),
    NotInCatalog(String),
    NotEntitled { scope: String, oauth_scope: &'static str },
    CapabilityUnavailable { scope: String, capability: &'static str },
}

/// Admits every requested logical scope or names the first one refused.
pub fn admit(
    requested: &[String],
    enabled: &[String],
    granted_oauth: &[String],
    capability_available: impl Fn(&str) -> bool,
) -> Result<Vec<&'static DataScope>, ScopeRefusal> {
    let mut admitted = Vec::new();
    for id in requested {
        if !enabled.contains(id) {
            return Err(ScopeRefusal::NotEnabled(id.clone()));
        }
        let scope = lookup(id).ok_or_else(|| ScopeRefusal::NotInCatalog(id.clone()))?;
        if !granted_oauth.iter().any(|g| g == scope.oauth_scope) {
            return Err(ScopeRefusal::NotEntitled { scope: id.clone(), oauth_scope: scope.oauth_scope });
        }
        if let Some(cap) = scope.capabilities.iter().find(|c| !capability_available(c)) {
            return Err(ScopeRefusal::CapabilityUnavailable { scope: id.clone(), capability: cap });
        }
        admitted.push(scope);
    }
    Ok(admitted)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_advertised_scope_has_plain_words() {
        for scope in all_oauth_scopes() {
            let words = plain_words(scope).unwrap_or_else(|| panic!("{scope} has no plain words"));
            assert!(words.ends_with('.') && !words.contains("helix."), "{scope}: {words}");
        }
        assert_eq!(plain_words("helix.unknown"), None);
    }

    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn empty_allowlist_admits_no_scope_but_an_empty_request_passes() {
        assert!(admit(&s(&[]), &s(&[]), &s(&[]), |_| true).unwrap().is_empty());
        assert_eq!(
            admit(&s(&["research_library"]), &s(&[]), &s(&["helix.data.research_library.read"]), |_| true),
            Err(ScopeRefusal::NotEnabled("research_library".into()))
        );
    }

    #[test]
    fn each_of_the_four_checks_refuses() {
        let granted = s(&["helix.data.research_library.read"]);
        assert_eq!(
            admit(&s(&["made_up"]), &s(&["made_up"]), &granted, |_| true),
            Err(ScopeRefusal::NotInCatalog("made_up".into()))
        );
        assert!(matches!(
            admit(&s(&["public_web"]), &s(&["public_web"]), &granted, |_| true),
            Err(ScopeRefusal::NotEntitled { .. })
        ));
        assert!(matches!(
            admit(&s(&["research_library"]), &s(&["research_library"]), &granted, |_| false),
            Err(ScopeRefusal::CapabilityUnavailable { capability: "research-library.read_document", .. })
        ));
        let ok = admit(&s(&["research_library"]), &s(&["research_library"]), &granted, |_| true).unwrap();
        assert_eq!(ok[0].evidence_family, "research_library_evidence");
    }
}
