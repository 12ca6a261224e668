//! The tenant a room belongs to: the owner tuple's tenant reference (issuer and signed
//! tenant, hashed), stored as the room item's `tenant_ref` attribute beside its body (the
//! body's shape is unchanged). A room written before tenants were recorded has no such
//! attribute and belongs to [`LEGACY_TENANT`], the tenant of the development setup that
//! wrote it. Memberships, listing entries, sources and bindings live under their room,
//! so the room's tenant is theirs. A chat claim item carries the tenant of the browser
//! session that issued it the same way. A chat observer records its creating session's
//! tenant too, but an observer stored without one belongs to no tenant: it is read by no
//! one (fail closed). Must not depend on the use cases above the kernel.

use super::{ObserverRecord, RoomRecord, TENANT_REF};
use crate::domain::account::tenant_ref;
use crate::store::{Cond, Item};

/// The signed tenant that owns every room stored without a tenant reference.
pub const LEGACY_TENANT: &str = "dev-tenant";

/// The tenant a caller reaches rooms (and chat claims) under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomTenant {
    /// None only for a browser session signed in before tenants were recorded.
    tenant_ref: Option<String>,
    /// The caller's tenant is [`LEGACY_TENANT`], so items stored without a tenant are its.
    legacy: bool,
}

impl RoomTenant {
    /// The tenant of a principal signed by `issuer` for `tenant`.
    pub fn of(issuer: &str, tenant: &str) -> Self {
        RoomTenant { tenant_ref: Some(tenant_ref(issuer, tenant)), legacy: tenant == LEGACY_TENANT }
    }

    /// The tenant of a browser session: the reference it recorded at sign-in (its identity
    /// signed by `issuer`), or, for a session stored before tenants were recorded, the
    /// legacy tenant alone.
    pub fn of_session(recorded: Option<&str>, issuer: &str) -> Self {
        match recorded {
            Some(t) => RoomTenant { tenant_ref: Some(t.to_owned()), legacy: t == tenant_ref(issuer, LEGACY_TENANT) },
            None => RoomTenant { tenant_ref: None, legacy: true },
        }
    }

    /// The reference an item created under this tenant records (None: none, as before).
    pub fn tenant_ref(&self) -> Option<&str> {
        self.tenant_ref.as_deref()
    }

    /// True when the room belongs to this tenant.
    pub fn admits(&self, room: &RoomRecord) -> bool {
        match &room.tenant_ref {
            Some(t) => self.tenant_ref.as_ref() == Some(t),
            None => self.legacy,
        }
    }

    /// True when the observer was created under this tenant: its recorded tenant is this
    /// one's. An observer without a tenant (stored before observers recorded it) and a
    /// session without one admit nothing.
    pub fn admits_observer(&self, observer: &ObserverRecord) -> bool {
        observer.tenant_ref.is_some() && observer.tenant_ref == self.tenant_ref
    }

    /// The same rule on a stored room or claim item, as a condition (for writes and
    /// lenient reads).
    pub fn cond(&self) -> Cond {
        let legacy = Cond::Missing(TENANT_REF.to_owned());
        match (&self.tenant_ref, self.legacy) {
            (Some(t), false) => Cond::eq_s(TENANT_REF, t),
            (Some(t), true) => Cond::Or(vec![Cond::eq_s(TENANT_REF, t), legacy]),
            (None, _) => legacy,
        }
    }

    /// [`Self::cond`] read on a room or claim item (absent: not admitted).
    pub fn admits_item(&self, room: Option<&Item>) -> bool {
        room.is_some() && self.cond().holds(room, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::records::rooms::room_key;

    fn room(tenant: Option<&RoomTenant>) -> RoomRecord {
        let body = r#"{"room_id":"room_a","name":"Lab","description":null,"owner_account":"acct_b","status":"active","consent_version":1,"created_at":"2026-01-01T00:00:00Z"}"#;
        let k = room_key("room_a");
        let mut item = Item::new(k.pk, k.sk).with_s(crate::service::records::BODY, body);
        if let Some(t) = tenant {
            item = item.with_s(TENANT_REF, t.tenant_ref().unwrap());
        }
        RoomRecord::from_item(&item).unwrap()
    }

    #[test]
    fn a_room_belongs_to_its_tenant_and_a_legacy_room_to_the_legacy_tenant_only() {
        let a = RoomTenant::of("https://issuer", "tenant-a");
        let b = RoomTenant::of("https://issuer", "tenant-b");
        let other_issuer = RoomTenant::of("https://other", "tenant-a");
        let legacy = RoomTenant::of("https://issuer", LEGACY_TENANT);
        let old_session = RoomTenant::of_session(None, "https://issuer");
        assert_eq!(RoomTenant::of_session(a.tenant_ref(), "https://issuer"), a);
        assert_eq!(RoomTenant::of_session(legacy.tenant_ref(), "https://issuer"), legacy);
        let of_a = room(Some(&a));
        assert!(a.admits(&of_a));
        for t in [&b, &other_issuer, &legacy] {
            assert!(!t.admits(&of_a), "{t:?}");
        }
        let old = room(None);
        assert!(legacy.admits(&old) && old_session.admits(&old));
        assert!(!a.admits(&old) && !b.admits(&old) && !old_session.admits(&of_a));
        for t in [&a, &b, &legacy, &old_session] {
            for r in [&of_a, &old] {
                assert_eq!(t.admits_item(Some(&r.to_item().unwrap())), t.admits(r), "{t:?} {r:?}");
            }
            assert!(!t.admits_item(None));
        }
    }

    /// An observer as stored before observers recorded their tenant.
    fn stored_observer() -> ObserverRecord {
        let body = r#"{"observer_ref":"obs_a","account_id":"acct_b","chat_hash":"c","claim_hash":"h","status":"awaiting_claim","binding_ref":null,"run_id":null,"snapshot_ref":null,"snapshot_message_count":0,"snapshot_char_count":0,"created_at":"2026-01-01T00:00:00Z","claim_expires_at":1}"#;
        let k = crate::service::records::rooms::observer_key("obs_a");
        ObserverRecord::from_item(&Item::new(k.pk, k.sk).with_s(crate::service::records::BODY, body)).unwrap()
    }

    #[test]
    fn an_observer_belongs_to_the_tenant_it_records_and_one_without_a_tenant_to_no_one() {
        let a = RoomTenant::of("https://issuer", "tenant-a");
        let b = RoomTenant::of("https://issuer", "tenant-b");
        let legacy = RoomTenant::of("https://issuer", LEGACY_TENANT);
        let old_session = RoomTenant::of_session(None, "https://issuer");
        let old = stored_observer();
        let of_a = ObserverRecord { tenant_ref: a.tenant_ref().map(str::to_owned), ..old.clone() };
        // The tenant is an attribute beside the unchanged body, and survives a round trip.
        let item = of_a.to_item().unwrap();
        assert_eq!(item.s(TENANT_REF), a.tenant_ref());
        assert!(!item.s(crate::service::records::BODY).unwrap().contains("tenant"));
        assert_eq!(ObserverRecord::from_item(&item).unwrap(), of_a);
        assert!(a.admits_observer(&of_a));
        for t in [&b, &legacy, &old_session] {
            assert!(!t.admits_observer(&of_a), "{t:?}");
        }
        for t in [&a, &b, &legacy, &old_session] {
            assert!(!t.admits_observer(&old), "{t:?}");
        }
    }

    #[test]
    fn a_claims_copy_of_its_observer_carries_the_claims_tenant() {
        let a = RoomTenant::of("https://issuer", "tenant-a");
        let observer = stored_observer();
        let observer = ObserverRecord { tenant_ref: a.tenant_ref().map(str::to_owned), ..observer };
        let claim = crate::service::records::rooms::Claim {
            observer: observer.clone(),
            expires_at: 1,
            tenant_ref: observer.tenant_ref.clone(),
        };
        let back = crate::service::records::rooms::Claim::from_item(&claim.to_item().unwrap()).unwrap();
        assert_eq!(back, claim);
        assert!(a.admits_observer(&back.observer));
    }
}
