//! Local executor: an offline solver over a document corpus (the `research_library`
//! data scope), so `helix serve` does real work end to end with no network.
//!
//! Documents are split into passages (Markdown paragraphs) and indexed once, at
//! construction, with the `bm25` crate (Okapi BM25, default English tokenizer: unicode
//! normalization, stop words, stemming). Each index entry is the document title plus
//! the passage, so a passage inherits the topic of its document.
//!
//! One turn:
//! - without the admitted capability `research-library.read_document` there is no
//!   retrieval tool: `partial`, no evidence, an unresolved `capability:...` requirement;
//! - the query is objective + instruction + the answers' values, the answers repeated
//!   [`ANSWER_WEIGHT`] times so that they narrow the ranking;
//! - the top [`TOP_K`] passages scoring at least the minimum become evidence
//!   (`research_library_evidence`, content-hashed), the family is declared satisfied,
//!   and a terminal candidate, an extractive answer citing the refs, is signed with the
//!   local signing key for exactly this run, step and claim token;
//! - when nothing relevant is found, the supplied answers alone are tried as the query;
//!   if that fails too (or there were none) the turn is `partial` with one pending
//!   question asking which topic to search for: its answer narrows the next turn.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bm25::{DefaultTokenizer, Document, Language, SearchEngine, SearchEngineBuilder, Tokenizer};
use tokio_util::sync::CancellationToken;

use super::{TurnExecutor, TurnRequest};
use crate::domain::authority::TerminalSigner;
use crate::domain::run::{Answer, Question, Requirement, RequirementKind};
use crate::domain::sha256_hex;
use crate::domain::source::{PROBE_CAPABILITY, PROBE_FAMILY, ROOM_EVIDENCE_CAPABILITY, ROOM_EVIDENCE_FAMILY};
use crate::domain::turn::{ArtifactEvidence, SolverStatus, TurnArtifact, TurnFailure};

/// The read capability a turn must be admitted to search the library.
pub const CAPABILITY: &str = "research-library.read_document";
/// The evidence family this executor supplies.
pub const EVIDENCE_FAMILY: &str = "research_library_evidence";
/// Passages returned per turn.
pub const TOP_K: usize = 3;
/// The BM25 score floor of a relevant passage (see [`LocalExecutor::with_min_score`]).
pub const DEFAULT_MIN_SCORE: f32 = 1.0;
/// A relevant passage contains at least this many distinct query terms (or all of
/// them, for a shorter query): a single incidental common word is not relevance.
pub const MIN_MATCHED_TERMS: usize = 2;
/// Times the document title is repeated in each passage's index entry (a title field
/// weight, as in BM25F).
pub const TITLE_WEIGHT: usize = 2;
/// A hit must also score at least this fraction of the best hit (drops weak tails).
pub const RELATIVE_CUTOFF: f32 = 0.25;
/// How many times the answers' text is repeated in the query (BM25 adds one term
/// contribution per query token occurrence, so repetition weights the answer).
pub const ANSWER_WEIGHT: usize = 3;
/// Largest accepted corpus file.
pub const MAX_DOCUMENT_BYTES: u64 = 4 * 1024 * 1024;
/// Most documents in one corpus.
pub const MAX_DOCUMENTS: usize = 10_000;
/// Passages longer than this are split at sentence boundaries.
pub const MAX_PASSAGE_CHARS: usize = 1500;
const EXCERPT_CHARS: usize = 400;
const CLAIM_CHARS: usize = 300;
const EXTENSIONS: &[&str] = &["md", "markdown", "txt"];

/// Why a corpus could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("cannot read the corpus at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("corpus document {path} is larger than {max} bytes")]
    TooLarge { path: PathBuf, max: u64 },
    #[error("the corpus has more than {0} documents")]
    TooManyDocuments(usize),
    #[error("the corpus has no text passages (Markdown or text files with paragraphs)")]
    Empty,
}

#[derive(Debug, Clone)]
struct Passage {
    /// Document name (file name for a directory corpus).
    document: String,
    title: String,
    /// 1-based position of the passage in its document.
    index: usize,
    /// Whitespace-normalized paragraph text: what is hashed and excerpted.
    text: String,
    sha256: String,
    /// Distinct index terms (title and text, tokenized as the index does).
    terms: HashSet<String>,
}

impl Passage {
    fn reference(&self) -> String {
        format!("evidence:research_library:sha256:{}", &self.sha256[..16])
    }

    fn source(&self) -> String {
        format!("research-library://{}#p{}", uri_escape(&self.document), self.index)
    }
}

/// The offline solver. Cheap to share: the index is built once and only read.
pub struct LocalExecutor {
    engine: SearchEngine<u32>,
    tokenizer: DefaultTokenizer,
    passages: Vec<Passage>,
    documents: usize,
    signer: TerminalSigner,
    min_score: f32,
}

impl std::fmt::Debug for LocalExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalExecutor")
            .field("documents", &self.documents)
            .field("passages", &self.passages.len())
            .field("issuer", &self.signer.issuer)
            .field("key_id", &self.signer.key_id)
            .finish_non_exhaustive()
    }
}

impl LocalExecutor {
    /// Loads every `.md`, `.markdown` and `.txt` file directly inside `dir` (not
    /// recursive; hidden files skipped), in file-name order. Invalid UTF-8 is replaced.
    pub fn from_dir(dir: impl AsRef<Path>, signer: TerminalSigner) -> Result<Self, CorpusError> {
        let dir = dir.as_ref();
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CorpusError::Io { path, source }
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let entry = entry.map_err(io(dir))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let ext_ok = path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)));
            if name.starts_with('.') || !ext_ok {
                continue;
            }
            let meta = std::fs::metadata(&path).map_err(io(&path))?;
            if !meta.is_file() {
                continue;
            }
            if meta.len() > MAX_DOCUMENT_BYTES {
                return Err(CorpusError::TooLarge { path, max: MAX_DOCUMENT_BYTES });
            }
            files.push((name, path));
            if files.len() > MAX_DOCUMENTS {
                return Err(CorpusError::TooManyDocuments(MAX_DOCUMENTS));
            }
        }
        files.sort();
        let mut documents = Vec::with_capacity(files.len());
        for (name, path) in files {
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            documents.push((name, String::from_utf8_lossy(&bytes).into_owned()));
        }
        let executor = Self::from_documents(documents, signer);
        if executor.passages.is_empty() {
            return Err(CorpusError::Empty);
        }
        Ok(executor)
    }

    /// Builds the index from in-memory `(name, text)` documents (the CLI's embedded
    /// sample corpus). A document's title is its first `# ` line, else its name.
    /// Infallible: with no text at all every turn asks which topic to search.
    pub fn from_documents(documents: Vec<(String, String)>, signer: TerminalSigner) -> Self {
        let mut passages = Vec::new();
        let mut with_text = 0;
        for (name, text) in &documents {
            let before = passages.len();
            split_document(name, text, &mut passages);
            if passages.len() > before {
                with_text += 1;
            }
        }
        let tokenizer = DefaultTokenizer::new(Language::English);
        let entries: Vec<Document<u32>> = passages
            .iter_mut()
            .enumerate()
            .map(|(i, p)| {
                let entry = format!("{}\n{}", format!("{}\n", p.title).repeat(TITLE_WEIGHT), p.text);
                p.terms = tokenizer.tokenize(&entry).into_iter().collect();
                Document::new(i as u32, entry)
            })
            .collect();
        let engine = SearchEngineBuilder::<u32>::with_documents(Language::English, entries).build();
        Self { engine, tokenizer, passages, documents: with_text, signer, min_score: DEFAULT_MIN_SCORE }
    }

    /// Overrides the minimum BM25 score of a relevant passage.
    pub fn with_min_score(mut self, min_score: f32) -> Self {
        self.min_score = min_score;
        self
    }

    /// Documents that contributed at least one passage.
    pub fn document_count(&self) -> usize {
        self.documents
    }

    pub fn passage_count(&self) -> usize {
        self.passages.len()
    }

    /// The signer's issuer, key id and public key, for the server's trusted keys.
    pub fn signer(&self) -> &TerminalSigner {
        &self.signer
    }

    /// Ranked relevant passages (indices into `passages`) for a query, best first,
    /// at most [`TOP_K`], distinct content only.
    fn retrieve(&self, query: &str) -> Vec<(usize, f32)> {
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

    /// A turn with admitted live room observations uses them as passages: each fresh
    /// observation becomes a `shared_live_room_evidence` item and an observation ref of
    /// this turn, and the terminal candidate cites them. An answered environment probe
    /// becomes a `shared_live_room_environment_probe` item the same way. A run that also
    /// admits the research library gets both, cited together.
    fn solve(&self, req: &TurnRequest) -> TurnArtifact {
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

#[async_trait]
impl TurnExecutor for LocalExecutor {
    /// Synchronous and fast (the index is in memory); cancellation and an already
    /// passed deadline are checked before any work and end the turn as `turn_timeout`.
    async fn execute(&self, request: TurnRequest, cancel: CancellationToken) -> Result<TurnArtifact, TurnFailure> {
        if cancel.is_cancelled() || chrono::Utc::now() >= request.deadline {
            return Err(TurnFailure::TurnTimeout);
        }
        Ok(self.solve(&request))
    }
}

fn artifact(solver_status: SolverStatus, summary: String) -> TurnArtifact {
    TurnArtifact {
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

/// The answers' text: string values (also inside arrays and objects) and numbers.
fn answer_text(answers: &[Answer]) -> String {
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

/// Splits one document into passages: blocks separated by blank lines, headings
/// dropped (the first `# ` heading is the title), whitespace normalized, long blocks
/// cut at sentence boundaries.
fn split_document(name: &str, text: &str, out: &mut Vec<Passage>) {
    let mut title = None;
    let mut blocks: Vec<String> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let flush = |current: &mut Vec<&str>, blocks: &mut Vec<String>| {
        if !current.is_empty() {
            blocks.push(current.join(" ").split_whitespace().collect::<Vec<_>>().join(" "));
            current.clear();
        }
    };
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            flush(&mut current, &mut blocks);
        } else if trimmed.starts_with('#') {
            flush(&mut current, &mut blocks);
            if title.is_none() && trimmed.starts_with("# ") {
                title = Some(trimmed.trim_start_matches('#').trim().to_owned());
            }
        } else {
            current.push(trimmed);
        }
    }
    flush(&mut current, &mut blocks);
    let title = title.filter(|t| !t.is_empty()).unwrap_or_else(|| name.to_owned());
    let mut index = 0;
    for block in blocks {
        for chunk in chunk_passage(&block) {
            if !chunk.chars().any(char::is_alphanumeric) {
                continue;
            }
            index += 1;
            out.push(Passage {
                document: name.to_owned(),
                title: title.clone(),
                index,
                sha256: sha256_hex(&chunk),
                text: chunk,
                terms: HashSet::new(),
            });
        }
    }
}

fn chunk_passage(block: &str) -> Vec<String> {
    if block.chars().count() <= MAX_PASSAGE_CHARS {
        return vec![block.to_owned()];
    }
    let mut chunks = Vec::new();
    let mut rest = block;
    while rest.chars().count() > MAX_PASSAGE_CHARS {
        let limit = rest.char_indices().nth(MAX_PASSAGE_CHARS).map(|(i, _)| i).unwrap_or(rest.len());
        let cut = sentence_ends(rest).into_iter().take_while(|&e| e <= limit).last().unwrap_or(limit);
        chunks.push(rest[..cut].trim().to_owned());
        rest = rest[cut..].trim_start();
    }
    if !rest.is_empty() {
        chunks.push(rest.to_owned());
    }
    chunks
}

/// Byte offsets just after each sentence end: `.`, `!` or `?` followed by a space and
/// an uppercase letter, digit, quote or bracket, but not after a lone initial ("S. K").
fn sentence_ends(text: &str) -> Vec<usize> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut ends = Vec::new();
    for (k, &(pos, c)) in chars.iter().enumerate() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let next = chars.get(k + 1).map(|x| x.1);
        let after = chars.get(k + 2).map(|x| x.1);
        let starts_sentence = after.is_some_and(|a| a.is_uppercase() || a.is_ascii_digit() || "\"'(“‘[".contains(a));
        if next != Some(' ') || !starts_sentence {
            continue;
        }
        let initial =
            c == '.' && k >= 1 && chars[k - 1].1.is_uppercase() && (k == 1 || !chars[k - 2].1.is_alphanumeric());
        if !initial {
            ends.push(pos + c.len_utf8());
        }
    }
    ends
}

fn first_sentence(text: &str) -> &str {
    sentence_ends(text).first().map(|&e| &text[..e]).unwrap_or(text)
}

fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| w.chars().count() >= 4).map(str::to_lowercase)
}

/// The passage's sentence sharing the most query words (of four letters or more), the
/// first sentence on ties: the claim a passage supports for this question.
fn best_sentence<'a>(text: &'a str, query: &str) -> &'a str {
    let terms: std::collections::HashSet<String> = words(query).collect();
    let mut best = (0, first_sentence(text));
    let mut start = 0;
    for end in sentence_ends(text) {
        let sentence = text[start..end].trim();
        let score = words(sentence).filter(|w| terms.contains(w)).count();
        if score > best.0 {
            best = (score, sentence);
        }
        start = end;
    }
    best.1
}

fn clip_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// About `max` characters, cut at a word boundary when one is near.
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

fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max - 1).collect();
    let cut = match head.rfind(' ') {
        Some(i) if i > head.len() * 3 / 4 => &head[..i],
        _ => head.as_str(),
    };
    format!("{}…", cut.trim_end())
}

/// Percent-encodes everything outside RFC 3986 unreserved characters.
fn uri_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, Utc};
    use serde_json::json;

    use super::*;
    use crate::domain::authority::TrustedKeys;

    fn corpus_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus")
    }

    fn signer() -> TerminalSigner {
        TerminalSigner::from_seed("helix-local", "local-1", [3; 32])
    }

    fn executor() -> LocalExecutor {
        LocalExecutor::from_dir(corpus_dir(), signer()).expect("sample corpus loads")
    }

    fn request(objective: &str, instruction: Option<&str>, answers: Vec<Answer>) -> TurnRequest {
        TurnRequest {
            schema: super::super::TURN_REQUEST_SCHEMA.into(),
            run_id: "run_localtest01".into(),
            step: 1,
            claim_token: "claim-abc".into(),
            objective: objective.into(),
            constraints: vec![],
            instruction: instruction.map(Into::into),
            answers,
            capabilities: vec![CAPABILITY.into()],
            required_evidence_families: vec![EVIDENCE_FAMILY.into()],
            prior_evidence_refs: vec![],
            deadline: Utc::now() + Duration::seconds(30),
            room_evidence: None,
            room_probe: None,
        }
    }

    async fn run(ex: &LocalExecutor, req: TurnRequest) -> TurnArtifact {
        ex.execute(req, CancellationToken::new()).await.expect("local turns produce an artifact")
    }

    fn probe_input() -> crate::domain::source::RoomProbeInput {
        serde_json::from_value(json!({
            "probe_id": "prb_0123456789abcdef01234567",
            "capability": PROBE_CAPABILITY,
            "room_id": "room_0123456789abcdef0123",
            "binding_ref": "rrb_0123",
            "execution_enabled": false,
            "answer": {
                "observation_ref": "obsv_0123456789abcdef01234567",
                "kind": "snapshot",
                "event": null,
                "summary": "overworld: 1 player online",
                "data": { "capability": PROBE_CAPABILITY, "inventory": { "players": [
                    { "player": "Steve", "items": [ { "item": "minecraft:oak_log", "count": 12 } ] } ] } },
                "content_sha256": "00",
                "provenance": {
                    "source_id": "src_0123456789abcdef0123", "room_id": "room_0123456789abcdef0123",
                    "world_id": "overworld", "adapter_profile": "minecraft", "adapter_version": "1.0.0",
                    "adapter_hash": "sha256:00", "manifest_hash": "sha256:00", "producer_epoch": 1,
                    "request_id": "answer-0001", "observed_at": "2026-11-30T10:00:00Z",
                    "received_at": "2026-11-30T10:00:00Z", "probe_id": "prb_0123456789abcdef01234567"
                }
            }
        }))
        .unwrap()
    }

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

    #[test]
    fn the_sample_corpus_is_indexed_as_paragraph_passages() {
        let ex = executor();
        assert!(ex.document_count() >= 8, "{ex:?}");
        assert!(ex.passage_count() >= 40, "{ex:?}");
        assert!(ex.passages.iter().all(|p| !p.text.starts_with('#') && p.index >= 1));
        assert!(ex.passages.iter().any(|p| p.title == "Sphere-Plate Geometry and the Proximity Force Approximation"));
    }

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

    #[tokio::test]
    async fn cancellation_or_a_passed_deadline_stops_before_work() {
        let ex = executor();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let req = request("sphere plate", None, vec![]);
        assert_eq!(ex.execute(req.clone(), cancel).await, Err(TurnFailure::TurnTimeout));
        let mut late = req;
        late.deadline = Utc::now() - Duration::seconds(1);
        assert_eq!(ex.execute(late, CancellationToken::new()).await, Err(TurnFailure::TurnTimeout));
    }

    #[test]
    fn in_memory_documents_split_into_titled_passages() {
        let docs = vec![
            (
                "notes one.md".to_string(),
                "# Notes\n\nFirst paragraph about\nwrapped lines.\n\n## Sub\n\nSecond one. Has two sentences.\n"
                    .to_string(),
            ),
            ("untitled.txt".to_string(), "Just text without a heading.".to_string()),
            ("blank.md".to_string(), "# Only a title\n\n".to_string()),
        ];
        let ex = LocalExecutor::from_documents(docs, signer());
        assert_eq!(ex.document_count(), 2);
        let p: Vec<_> = ex.passages.iter().map(|p| (p.source(), p.title.as_str(), p.text.as_str())).collect();
        assert_eq!(
            p,
            vec![
                ("research-library://notes%20one.md#p1".into(), "Notes", "First paragraph about wrapped lines."),
                ("research-library://notes%20one.md#p2".into(), "Notes", "Second one. Has two sentences."),
                ("research-library://untitled.txt#p1".into(), "untitled.txt", "Just text without a heading."),
            ]
        );
        assert_eq!(LocalExecutor::from_documents(vec![], signer()).passage_count(), 0);
        let empty = tempfile::tempdir().unwrap();
        std::fs::write(empty.path().join("ignored.json"), "{}").unwrap();
        assert!(matches!(LocalExecutor::from_dir(empty.path(), signer()), Err(CorpusError::Empty)));
        assert!(matches!(LocalExecutor::from_dir("/nonexistent/helix-corpus", signer()), Err(CorpusError::Io { .. })));
    }

    #[test]
    fn the_claim_is_the_sentence_that_answers_the_query() {
        let text = "The setup is old. The measured force agreed with theory within five percent. It was hard.";
        assert_eq!(
            best_sentence(text, "what force was measured"),
            "The measured force agreed with theory within five percent."
        );
        assert_eq!(best_sentence(text, "nothing shared"), "The setup is old.");
    }

    #[test]
    fn sentences_and_chunks() {
        assert_eq!(first_sentence("Casimir predicted it in 1948. It is small."), "Casimir predicted it in 1948.");
        assert_eq!(first_sentence("Work by S. K. Lamoreaux. Next."), "Work by S. K. Lamoreaux.");
        assert_eq!(
            first_sentence("The value ζ(3) ≈ 1.202 appears, e.g. here. Then"),
            "The value ζ(3) ≈ 1.202 appears, e.g. here."
        );
        assert_eq!(first_sentence("no end"), "no end");
        let long = "A sentence that repeats. ".repeat(200);
        let chunks = chunk_passage(long.trim());
        assert!(chunks.len() > 1 && chunks.iter().all(|c| c.chars().count() <= MAX_PASSAGE_CHARS && c.ends_with('.')));
        let unbroken = "x".repeat(MAX_PASSAGE_CHARS * 2 + 5);
        assert_eq!(chunk_passage(&unbroken).iter().map(|c| c.len()).sum::<usize>(), unbroken.len());
    }
}
