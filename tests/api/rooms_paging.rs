//! Rooms past the first page, on both store backends: the room list (REST and MCP), Device
//! Check and the `/rooms` page walk every page by `next_cursor`/`cursor`; a member past
//! the first page is listed and removable; a room's sources page too; a malformed cursor,
//! or another caller's, is a typed `invalid_request`. Rooms and members are seeded straight
//! into the store (through the storage kernel's records) so that a page boundary is
//! reached quickly.

use std::collections::BTreeSet;

use helix_core::domain::account::{account_id_for, account_ref};
use helix_core::domain::room::{RoomId, RoomRole};
use helix_core::service::records::rooms::{AccountRoom, BODY_VERSION, Membership, RoomRecord, RoomStatus};
use helix_core::store::WriteOp;
use helix_integration_tests::support::browser::between;
use helix_integration_tests::support::rooms::ALL;
use helix_integration_tests::*;
use serde_json::{Value, json};

/// More than one page of rooms (a page is 50).
const ROOMS: usize = 60;
/// More than one page of members (a page is 100), the owner included.
const MEMBERS: usize = 120;

fn account(app: &TestApp, subject: &str) -> String {
    account_id_for(&app.state.services.config.oauth.provider, subject)
}

fn membership(room_id: &str, account_id: &str, role: RoomRole) -> Membership {
    Membership {
        room_id: room_id.to_owned(),
        account_id: account_id.to_owned(),
        role,
        consent_version: 1,
        consent_receipt: format!("consent:{room_id}:{account_id}"),
        accepted_at: "2026-01-01T00:00:00Z".to_owned(),
        action_authority: false,
    }
}

async fn write_all(app: &TestApp, ops: Vec<WriteOp>) {
    for chunk in ops.chunks(90) {
        app.state.services.store.transact(chunk.to_vec()).await.unwrap();
    }
}

/// `n` active rooms owned by `subject`, each with its owner membership and listing entry.
async fn seed_rooms(app: &TestApp, subject: &str, n: usize) -> BTreeSet<String> {
    let owner = account(app, subject);
    let (mut ops, mut ids) = (vec![], BTreeSet::new());
    for i in 0..n {
        let room = RoomRecord {
            room_id: RoomId::generate().to_string(),
            name: format!("Seeded {i}"),
            description: None,
            owner_account: owner.clone(),
            status: RoomStatus::Active,
            consent_version: 1,
            created_at: chrono::Utc::now(),
            schema_version: BODY_VERSION,
            // The tenant the tests' tokens are signed for, as a room created by them records.
            tenant_ref: Some(helix_core::domain::account::tenant_ref(
                &app.state.services.config.oauth.issuer,
                "tenant-a",
            )),
        };
        let member = membership(&room.room_id, &owner, RoomRole::Owner);
        let entry = AccountRoom { account_id: owner.clone(), room_id: room.room_id.clone() };
        ops.push(WriteOp::Put { item: room.to_item().unwrap(), cond: None });
        ops.push(WriteOp::Put { item: member.to_item(), cond: None });
        ops.push(WriteOp::Put { item: entry.to_item(), cond: None });
        ids.insert(room.room_id);
    }
    write_all(app, ops).await;
    ids
}

/// Walks `GET /api/v1/rooms` by cursor; every page but the last has a next_cursor.
async fn rest_pages(app: &TestApp, token: &str) -> Vec<Value> {
    let mut pages: Vec<Value> = vec![];
    let mut cursor: Option<String> = None;
    loop {
        let path = cursor.as_ref().map_or("/api/v1/rooms".to_owned(), |c| format!("/api/v1/rooms?cursor={c}"));
        let (status, page) = read(app.get(&path, token).send().await.unwrap()).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["has_more"], page["next_cursor"].is_string(), "{page}");
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        pages.push(page);
        if cursor.is_none() {
            return pages;
        }
        assert!(pages.len() < 10, "the walk ends");
    }
}

fn room_ids(pages: &[Value], field: &str) -> Vec<String> {
    pages
        .iter()
        .flat_map(|p| p[field].as_array().unwrap().iter().map(|r| r["room_id"].as_str().unwrap().to_owned()))
        .collect()
}

fn assert_each_once(listed: Vec<String>, want: &BTreeSet<String>) {
    let set: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(set.len(), listed.len(), "no room twice");
    assert_eq!(&set, want, "every room");
}

async fn the_room_list_walks_every_page_by_cursor_over_rest_and_mcp(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let seeded = seed_rooms(&app, "alice", ROOMS).await;

    let pages = rest_pages(&app, &alice).await;
    assert_eq!(pages.len(), 2);
    assert_eq!(pages[0]["rooms"].as_array().unwrap().len(), 50);
    assert_eq!(pages[1]["next_cursor"], Value::Null, "the last page");
    assert_each_once(room_ids(&pages, "rooms"), &seeded);

    // The same walk over MCP.
    let (mut listed, mut cursor, mut calls) = (vec![], None::<String>, 0);
    loop {
        let args = cursor.as_ref().map_or(json!({}), |c| json!({ "cursor": c }));
        let (status, v) =
            app.rpc("/mcp", &alice, "tools/call", json!({ "name": "helix_room_list", "arguments": args })).await;
        assert_eq!(status, 200, "{v}");
        let page = &v["result"]["structuredContent"];
        assert_ne!(v["result"]["isError"], true, "{v}");
        listed.extend(room_ids(std::slice::from_ref(page), "rooms"));
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        calls += 1;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(calls, 2);
    assert_each_once(listed, &seeded);
}

async fn a_malformed_or_foreign_cursor_is_a_typed_invalid_request(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let bob = app.token_for("bob", "tenant-a", ALL).await;
    seed_rooms(&app, "alice", ROOMS).await;
    let bobs = seed_rooms(&app, "bob", 2).await;

    for bad in ["cursor=nope", "cursor=hpc1_e30", "cursor=", "cursor=a&cursor=b", "owner=bob", "limit=5"] {
        let (status, v) = read(app.get(&format!("/api/v1/rooms?{bad}"), &alice).send().await.unwrap()).await;
        assert_eq!((status, code(&v)), (400, "invalid_request"), "{bad}: {v}");
        assert_eq!(v["schema"], "helix.agent_api.error.v1");
    }
    let (_, first) = read(app.get("/api/v1/rooms", &alice).send().await.unwrap()).await;
    let alices_cursor = first["next_cursor"].as_str().unwrap().to_owned();

    // Bob replaying alice's cursor learns nothing of her rooms: it is not his list's cursor.
    let (status, v) = read(app.get(&format!("/api/v1/rooms?cursor={alices_cursor}"), &bob).send().await.unwrap()).await;
    assert_eq!((status, code(&v)), (400, "invalid_request"), "{v}");
    assert!(!v.to_string().contains("room_"), "{v}");
    let (_, his) = read(app.get("/api/v1/rooms", &bob).send().await.unwrap()).await;
    assert_each_once(room_ids(std::slice::from_ref(&his), "rooms"), &bobs);

    // The same over MCP: a tool error with the typed code, for a forged or a foreign cursor.
    for c in ["nope", alices_cursor.as_str()] {
        let call = json!({ "name": "helix_room_list", "arguments": { "cursor": c } });
        let (_, v) = app.rpc("/mcp", &bob, "tools/call", call).await;
        assert_eq!(v["result"]["isError"], true, "{v}");
        assert_eq!(v["result"]["structuredContent"]["error"]["code"], "invalid_request", "{v}");
    }
    // A Device Check cursor is refused by the room list (bound to the list it came from).
    let call = json!({ "name": "helix_environment_device_check", "arguments": {} });
    let (_, v) = app.rpc("/mcp/device-check", &alice, "tools/call", call).await;
    let dc_cursor = v["result"]["structuredContent"]["next_cursor"].as_str().unwrap().to_owned();
    let (status, _) = read(app.get(&format!("/api/v1/rooms?cursor={dc_cursor}"), &alice).send().await.unwrap()).await;
    assert_eq!(status, 400);
}

async fn device_check_reports_rooms_past_the_first_page(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let reader = app.token_for("alice", "tenant-a", &["helix.rooms.read"]).await;
    let seeded = seed_rooms(&app, "alice", ROOMS).await;
    let (mut pages, mut cursor) = (vec![], None::<String>);
    loop {
        let args = cursor.as_ref().map_or(json!({}), |c| json!({ "cursor": c }));
        let call = json!({ "name": "helix_environment_device_check", "arguments": args });
        let (status, v) = app.rpc("/mcp/device-check", &reader, "tools/call", call).await;
        assert_eq!(status, 200, "{v}");
        assert_ne!(v["result"]["isError"], true, "{v}");
        let page = v["result"]["structuredContent"].clone();
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        pages.push(page);
        if cursor.is_none() {
            break;
        }
        assert!(pages.len() < 10);
    }
    assert_eq!(pages.len(), 2);
    assert_eq!(pages[0]["rooms"].as_array().unwrap().len(), 50);
    assert_each_once(room_ids(&pages, "rooms"), &seeded);
}

/// The `/rooms` page, with `cursor` when given.
async fn rooms_page(app: &TestApp, cookie: &str, href: &str) -> String {
    let res = app.http.get(format!("{}{href}", app.base)).header("cookie", cookie).send().await.unwrap();
    assert_eq!(res.status(), 200);
    res.text().await.unwrap()
}

fn page_rooms(html: &str) -> Vec<String> {
    html.split("data-room-id=\"").skip(1).map(|s| s[..s.find('"').unwrap()].to_owned()).collect()
}

fn page_members(html: &str) -> Vec<String> {
    html.split("class=\"member\" data-account-ref=\"").skip(1).map(|s| s[..s.find('"').unwrap()].to_owned()).collect()
}

async fn the_rooms_page_links_to_the_next_page_of_rooms(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let web = app.session("alice").await;
    let seeded = seed_rooms(&app, "alice", ROOMS).await;
    let first = rooms_page(&app, &web, "/rooms").await;
    let next = between(&first, "id=\"rooms-next\" href=\"", "\"").to_owned();
    assert!(next.starts_with("/rooms?cursor=hpc1_"), "{next}");
    let second = rooms_page(&app, &web, &next).await;
    assert!(!second.contains("id=\"rooms-next\""), "the last page");
    let (a, b) = (page_rooms(&first), page_rooms(&second));
    assert_eq!(a.len(), 50);
    assert_each_once([a, b].concat(), &seeded);
    // Another account's cursor, or a forged one, is refused.
    let bob = app.session("bob").await;
    let res = app.http.get(format!("{}{next}", app.base)).header("cookie", &bob).send().await.unwrap();
    assert_eq!(res.status(), 400);
    let res = app.http.get(format!("{}/rooms?cursor=hpc1_x", app.base)).header("cookie", &web).send().await.unwrap();
    assert_eq!(res.status(), 400);
}

async fn a_member_past_the_first_page_is_listed_and_removable(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let web = app.session("alice").await;
    let room_id = app.room(&alice, "Crowded").await;
    let subjects: Vec<String> = (1..MEMBERS).map(|i| format!("member-{i:03}")).collect();
    let mut ops = vec![];
    for s in &subjects {
        let id = account(&app, s);
        ops.push(WriteOp::Put { item: membership(&room_id, &id, RoomRole::Member).to_item(), cond: None });
        ops.push(WriteOp::Put { item: AccountRoom { account_id: id, room_id: room_id.clone() }.to_item(), cond: None });
    }
    write_all(&app, ops).await;

    let first = rooms_page(&app, &web, "/rooms").await;
    let on_first = page_members(&first);
    assert_eq!(on_first.len(), 100);
    let next = between(&first, "class=\"members-next\" href=\"", "\"").to_owned();
    let second = rooms_page(&app, &web, &next).await;
    assert!(second.contains("id=\"members-continued\"") && !second.contains("class=\"members-next\""));
    let on_second = page_members(&second);
    assert_eq!(on_second.len(), MEMBERS - 100);
    let all: BTreeSet<String> = on_first.iter().chain(&on_second).cloned().collect();
    assert_eq!(all.len(), MEMBERS, "each member once");

    // A member only on the second page is removed, and is gone from the list.
    let late = on_second.iter().find(|r| **r != account_ref(&account(&app, "alice"))).unwrap().clone();
    let subject = subjects.iter().find(|s| account_ref(&account(&app, s)) == late).unwrap();
    let (status, body) = app
        .form(&web, "/rooms/members/remove", &[("room_id", &room_id), ("account_ref", &late), ("confirm", "yes")])
        .await;
    assert_eq!(status, 303, "{body}");
    let member = app.token_for(subject, "tenant-a", ALL).await;
    assert_eq!(app.get(&format!("/api/v1/rooms/{room_id}"), &member).send().await.unwrap().status(), 404);
    let again = rooms_page(&app, &web, &next).await;
    assert!(!page_members(&again).contains(&late));
    // Removing it again, or an unknown reference, is not found.
    let (status, _) = app
        .form(&web, "/rooms/members/remove", &[("room_id", &room_id), ("account_ref", &late), ("confirm", "yes")])
        .await;
    assert_eq!(status, 404);
    // A members cursor of this room is refused to another account.
    let bob = app.session("bob").await;
    let res = app.http.get(format!("{}{next}", app.base)).header("cookie", &bob).send().await.unwrap();
    assert_eq!(res.status(), 400);
}

async fn a_rooms_sources_page_by_cursor_and_a_cursor_stays_with_its_room(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let owner = app.token_for("alice", "tenant-a", helix_integration_tests::support::sources::ALL).await;
    app.developer("alice").await;
    let room_id = app.room(&owner, "Many worlds").await;
    let other_room = app.room(&owner, "Another").await;
    let mut created = BTreeSet::new();
    for i in 0..51 {
        let body = json!({ "adapter_profile": "minecraft", "world_id": format!("world-{i:02}") });
        let (status, v) = app.create_source(&owner, &room_id, &format!("paged-source-{i:02}"), body).await;
        assert_eq!(status, 201, "{v}");
        created.insert(v["source"]["source_id"].as_str().unwrap().to_owned());
    }
    let path = format!("/api/v1/rooms/{room_id}/sources");
    let (status, first) = read(app.get(&path, &owner).send().await.unwrap()).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!((first["sources"].as_array().unwrap().len(), &first["has_more"]), (50, &json!(true)));
    let cursor = first["next_cursor"].as_str().unwrap();
    let (status, second) = read(app.get(&format!("{path}?cursor={cursor}"), &owner).send().await.unwrap()).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!((&second["next_cursor"], &second["has_more"]), (&Value::Null, &json!(false)));
    let listed: Vec<String> = [&first, &second]
        .iter()
        .flat_map(|p| p["sources"].as_array().unwrap().iter().map(|s| s["source_id"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(listed.len(), 51);
    assert_eq!(listed.into_iter().collect::<BTreeSet<_>>(), created);
    // The cursor of one room's sources is refused for another room, over REST and MCP.
    let other = format!("/api/v1/rooms/{other_room}/sources?cursor={cursor}");
    let (status, v) = read(app.get(&other, &owner).send().await.unwrap()).await;
    assert_eq!((status, code(&v)), (400, "invalid_request"), "{v}");
    let call = json!({ "name": "helix_room_source_list", "arguments": { "room_id": room_id, "cursor": cursor } });
    let (_, v) = app.rpc("/mcp", &owner, "tools/call", call).await;
    assert_eq!(v["result"]["structuredContent"]["sources"].as_array().map(Vec::len), Some(1), "{v}");
    let call = json!({ "name": "helix_room_source_list", "arguments": { "room_id": other_room, "cursor": cursor } });
    let (_, v) = app.rpc("/mcp", &owner, "tools/call", call).await;
    assert_eq!(v["result"]["structuredContent"]["error"]["code"], "invalid_request", "{v}");
}

on_both_backends!(
    a_rooms_sources_page_by_cursor_and_a_cursor_stays_with_its_room,
    the_room_list_walks_every_page_by_cursor_over_rest_and_mcp,
    a_malformed_or_foreign_cursor_is_a_typed_invalid_request,
    device_check_reports_rooms_past_the_first_page,
    the_rooms_page_links_to_the_next_page_of_rooms,
    a_member_past_the_first_page_is_listed_and_removable,
);
