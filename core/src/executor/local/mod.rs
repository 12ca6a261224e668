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
//!
//! Corpus loading and passages (`corpus`), ranking (`ranking`), turn building (`turn`)
//! and sentence work (`text`). Depends on the domain and the executor seam only; no
//! network, no store.

mod corpus;
mod ranking;
mod text;
mod turn;

use std::path::PathBuf;

use async_trait::async_trait;
use bm25::{DefaultTokenizer, Document, Language, SearchEngine, SearchEngineBuilder, Tokenizer};
use tokio_util::sync::CancellationToken;

use super::{TurnExecutor, TurnRequest};
use crate::domain::authority::TerminalSigner;
use crate::domain::turn::{TurnArtifact, TurnFailure};
use corpus::{Passage, split_document};

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
/// The sample corpus (the repository's `corpus/`), embedded at build time.
pub const BUNDLED_CORPUS: &[(&str, &str)] = &include!(concat!(env!("OUT_DIR"), "/corpus.rs"));

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

    /// The index of [`BUNDLED_CORPUS`].
    pub fn bundled(signer: TerminalSigner) -> Self {
        Self::from_documents(BUNDLED_CORPUS.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect(), signer)
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

#[cfg(test)]
pub(crate) mod tests;
