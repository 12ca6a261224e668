//! The layer rules, read from the source tree: what each folder of `http/` may name, and
//! that `service/` never names `http` or `mcp`. Every path is resolved (`crate::`,
//! `super::`, `self::`, `use` groups) to the module it names; test-only items
//! (`#[cfg(test)]`) are not checked. A violation names the file and the path.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// One rule: files whose module path starts with `from` may not name a path that starts
/// with any of `forbidden`; `why` is said in the failure.
struct Rule {
    from: &'static [&'static str],
    forbidden: &'static [&'static [&'static str]],
    why: &'static str,
}

const LANES: [&str; 5] = ["agent", "browser", "connector", "oauth", "pages"];

/// The pieces of the pipeline every lane shares; they name no lane.
const SHARED: [&str; 7] = ["admission", "connections", "idempotent", "query", "ratelimit", "redact", "server"];

const STORE: &[&str] = &["store"];
const RECORDS: &[&str] = &["service", "records"];
const AGENT: &[&str] = &["http", "agent"];
const BROWSER: &[&str] = &["http", "browser"];
const CONNECTOR: &[&str] = &["http", "connector"];
const OAUTH: &[&str] = &["http", "oauth"];
const PAGES: &[&str] = &["http", "pages"];

const RULES: &[Rule] = &[
    Rule {
        from: &["http"],
        forbidden: &[STORE, RECORDS],
        why: "HTTP frames service calls; the store is the services'",
    },
    Rule {
        from: &["http", "agent"],
        forbidden: &[BROWSER, CONNECTOR, OAUTH, PAGES],
        why: "the bearer lanes never meet the cookie lanes",
    },
    Rule {
        from: &["http", "browser"],
        forbidden: &[AGENT, CONNECTOR, OAUTH],
        why: "the cookie lane builds on the pages kit and the shared pipeline only",
    },
    Rule {
        from: &["http", "connector"],
        forbidden: &[AGENT, BROWSER, OAUTH],
        why: "the connector and source lanes build on the pages kit and the shared pipeline only",
    },
    Rule {
        from: &["http", "oauth"],
        forbidden: &[AGENT, BROWSER, CONNECTOR],
        why: "the development issuer builds on the pages kit and the shared pipeline only",
    },
    Rule { from: &["http", "pages"], forbidden: &[AGENT, BROWSER, CONNECTOR, OAUTH], why: "the kit knows no lane" },
    Rule { from: &["service"], forbidden: &[&["http"], &["mcp"]], why: "services must not depend on a transport" },
];

/// The module path of a source file: `src/http/browser/account.rs` is `http::browser::account`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    parts
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| m.path().is_ident("test")))
}

/// Every path a file names, resolved to the crate root (paths into other crates are skipped).
struct Names {
    module: Vec<String>,
    found: Vec<Vec<String>>,
    /// How many times a field named `store` is read (`state.services.store`).
    store_fields: usize,
}

impl Names {
    /// `segments` as written in `self.module`, resolved; None for another crate's path.
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let mut at = self.module.clone();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                at.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    at.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        at.extend(rest.iter().cloned());
        Some(at)
    }

    fn note(&mut self, segments: &[String]) {
        if let Some(path) = self.resolve(segments) {
            self.found.push(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_name(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.use_name(prefix, &r.ident),
            syn::UseTree::Glob(_) => self.note(prefix),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(prefix, t)),
        }
    }

    fn use_name(&mut self, prefix: &mut Vec<String>, ident: &syn::Ident) {
        if ident != "self" {
            prefix.push(ident.to_string());
        }
        self.note(prefix);
        if ident != "self" {
            prefix.pop();
        }
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_cfg_test(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.module.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut vec![], &u.tree);
    }

    fn visit_expr_field(&mut self, e: &'ast syn::ExprField) {
        if matches!(&e.member, syn::Member::Named(m) if m == "store") {
            self.store_fields += 1;
        }
        syn::visit::visit_expr_field(self, e);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.note(&segments);
        syn::visit::visit_path(self, p);
    }
}

/// The violations of one file's source, as `file: names path (rule)` lines.
fn violations(module: &[String], shown: &str, source: &str) -> Vec<String> {
    let parsed = syn::parse_file(source).unwrap_or_else(|e| panic!("{shown} does not parse: {e}"));
    let mut names = Names { module: module.to_vec(), found: vec![], store_fields: 0 };
    names.visit_file(&parsed);
    let starts =
        |path: &[String], prefix: &[&str]| path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b);
    let mut rules: Vec<(Vec<&[&str]>, &str)> =
        RULES.iter().filter(|r| starts(module, r.from)).map(|r| (r.forbidden.to_vec(), r.why)).collect();
    if module.len() >= 2 && module[0] == "http" && SHARED.contains(&module[1].as_str()) {
        rules.push((vec![AGENT, BROWSER, CONNECTOR, OAUTH, PAGES], "the shared pipeline names no lane"));
    }
    let mut out = vec![];
    if names.store_fields > 0 && module.first().is_some_and(|m| m == "http") {
        out.push(format!("{shown}: reads a `.store` field (HTTP frames service calls; the store is the services')"));
    }
    for path in &names.found {
        for (forbidden, why) in &rules {
            if let Some(f) = forbidden.iter().find(|f| starts(path, f)) {
                let line =
                    format!("{shown}: names crate::{} (no crate::{} here: {why})", path.join("::"), f.join("::"));
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    out
}

fn sources_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn each_folder_names_only_what_its_layer_may() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    sources_under(&src.join("http"), &mut files);
    let http_files = files.len();
    sources_under(&src.join("service"), &mut files);
    assert!(http_files > 30 && files.len() > http_files + 30, "the scan reads the source tree");
    for lane in LANES {
        assert!(src.join("http").join(lane).join("mod.rs").is_file(), "the {lane} lane is a folder");
    }
    let mut found = vec![];
    for file in &files {
        let shown = format!("core/src/{}", file.strip_prefix(&src).unwrap().display());
        found.extend(violations(&module_of(&src, file), &shown, &std::fs::read_to_string(file).unwrap()));
    }
    assert!(found.is_empty(), "layer rules broken:\n{}", found.join("\n"));
}

#[test]
fn a_forbidden_name_is_reported_with_its_file_and_path() {
    let module = |m: &str| m.split("::").map(str::to_owned).collect::<Vec<_>>();
    let agent = "use super::super::browser::account;\nuse crate::http::{pages::{Page, SameOrigin}, AppState};\n\
                 fn f(s: S) { crate::store::NoStore; s.services.store.get(); }\n#[cfg(test)]\nmod tests { use crate::store::NoStore; }";
    let found = violations(&module("http::agent::rooms"), "rooms.rs", agent);
    assert_eq!(
        found,
        [
            "rooms.rs: reads a `.store` field (HTTP frames service calls; the store is the services')",
            "rooms.rs: names crate::http::browser::account (no crate::http::browser here: the bearer lanes never meet the cookie lanes)",
            "rooms.rs: names crate::http::pages::Page (no crate::http::pages here: the bearer lanes never meet the cookie lanes)",
            "rooms.rs: names crate::http::pages::SameOrigin (no crate::http::pages here: the bearer lanes never meet the cookie lanes)",
            "rooms.rs: names crate::store::NoStore (no crate::store here: HTTP frames service calls; the store is the services')",
        ]
    );
    let service = "use crate::mcp::Cx;\nuse super::records::oauth_grants::Grant;";
    assert_eq!(violations(&module("service::oauth"), "oauth.rs", service).len(), 1, "records are the services' own");
    let shared = "use super::pages::cookie;";
    assert_eq!(violations(&module("http::redact"), "redact.rs", shared).len(), 1);
    assert!(violations(&module("http::browser::account"), "account.rs", "use crate::http::pages::Page;").is_empty());
}
