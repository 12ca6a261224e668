//! The chat and id rules over MCP on both store backends: a chat line is normalised
//! before its command check (a blank or invisible start, a look-alike slash), characters
//! a vanilla server refuses are `chat_text`, only canonical ids pass and the deny list
//! covers spawn eggs, fire, lava and the like. Nothing refused is queued; an admitted
//! chat line is delivered in its normalised form.

use helix_integration_tests::*;
use serde_json::{Value, json};

use super::embodiment::{act, err, paired, poll, register, select_first};

fn chat(text: &str) -> Value {
    json!({"type": "chat", "text": text})
}

fn place(item: &str) -> Value {
    json!({"type": "place_block", "x": 1, "y": 64, "z": 1, "item": item, "face": "up"})
}

async fn chat_and_id_rules_refuse_every_disguise_and_queue_nothing(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let mut refused = Vec::new();
    for text in [
        " /op mallory",
        "\u{3000}/op mallory",
        "\u{00a0}/op mallory",
        "\u{2028}/op mallory",
        "\u{200b}/op mallory",
        "\u{feff}/op mallory",
        "\u{202e}/op mallory",
        "\u{2066}/op mallory",
        "\u{ff0f}op mallory",
        "\u{2044}op mallory",
        "\u{2215}op mallory",
        "\u{29f8}op mallory",
        "\u{1735}op mallory",
    ] {
        refused.push((chat(text), "chat_command"));
    }
    for text in ["§4red", "tab\there", "del\u{7f}", "   "] {
        refused.push((chat(text), "chat_text"));
    }
    refused.push((json!({"type": "sequence", "steps": [chat("hi"), chat("\u{2060}/kill @a")]}), "chat_command"));
    for id in ["minecraft:./tnt", "minecraft:tnt/", "minecraft:a//b", "minecraft:../tnt", "..:tnt"] {
        refused.push((place(id), "invalid_id"));
    }
    for id in [
        "minecraft:zombie_spawn_egg",
        "minecraft:wither_skeleton_skull",
        "minecraft:lava",
        "minecraft:fire",
        "minecraft:soul_fire",
        "minecraft:spawner",
        "othermod:tnt",
    ] {
        refused.push((place(id), "denied"));
    }
    refused.push((json!({"type": "equip", "item": "minecraft:flint_and_steel", "slot": "mainhand"}), "denied"));
    refused.push((json!({"type": "craft", "item": "minecraft:tnt_minecart", "times": 1}), "denied"));
    // Every case is tried; the failure lists each one answered otherwise.
    let mut wrong = Vec::new();
    for (i, (action, reason)) in refused.iter().enumerate() {
        let (is_error, e) = act(&app, &w, &w.token, &format!("rules-key-{i:03}"), action.clone()).await;
        let got = (is_error, err(&e), e["error"]["details"]["reason"].as_str());
        if got != (true, "action_refused", Some(*reason)) {
            wrong.push(format!("{action} -> {}", e["status"].as_str().unwrap_or(err(&e))));
        }
    }
    assert!(wrong.is_empty(), "{} answered otherwise:\n{}", wrong.len(), wrong.join("\n"));
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert!(p["commands"].as_array().unwrap().is_empty(), "nothing was queued: {p}");

    // An admitted line is delivered as it was checked: NFKC, its blank start stripped.
    let (is_error, wf) = act(&app, &w, &w.token, "rules-key-ok-1", chat("\u{200b} ｈｅｌｌｏ a/b")).await;
    assert!(!is_error, "{wf}");
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["commands"][0]["workflow_ref"], wf["workflow_ref"], "{p}");
    assert_eq!(p["commands"][0]["step"], json!({"type": "chat", "text": "hello a/b"}), "{p}");
}

on_both_backends!(chat_and_id_rules_refuse_every_disguise_and_queue_nothing);
