//! The corpus: Markdown and text files read from a directory, split into passages
//! (paragraphs, long ones cut at sentences), each with its content hash and reference.
//! Reads the file system only at construction.

use std::collections::HashSet;
use std::path::Path;

use super::text::chunk_passage;
use super::{CorpusError, EXTENSIONS, LocalExecutor, MAX_DOCUMENT_BYTES, MAX_DOCUMENTS};
use crate::domain::authority::TerminalSigner;
use crate::domain::sha256_hex;

#[derive(Debug, Clone)]
pub(super) struct Passage {
    /// Document name (file name for a directory corpus).
    pub(super) document: String,
    pub(super) title: String,
    /// 1-based position of the passage in its document.
    pub(super) index: usize,
    /// Whitespace-normalized paragraph text: what is hashed and excerpted.
    pub(super) text: String,
    pub(super) sha256: String,
    /// Distinct index terms (title and text, tokenized as the index does).
    pub(super) terms: HashSet<String>,
}

impl Passage {
    pub(super) fn reference(&self) -> String {
        format!("evidence:research_library:sha256:{}", &self.sha256[..16])
    }

    pub(super) fn source(&self) -> String {
        format!("research-library://{}#p{}", uri_escape(&self.document), self.index)
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
}

/// Splits one document into passages: blocks separated by blank lines, headings
/// dropped (the first `# ` heading is the title), whitespace normalized, long blocks
/// cut at sentence boundaries.
pub(super) fn split_document(name: &str, text: &str, out: &mut Vec<Passage>) {
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
    use super::*;
    use crate::executor::local::tests::{executor, signer};

    #[test]
    fn the_sample_corpus_is_indexed_as_paragraph_passages() {
        let ex = executor();
        assert!(ex.document_count() >= 8, "{ex:?}");
        assert!(ex.passage_count() >= 40, "{ex:?}");
        assert!(ex.passages.iter().all(|p| !p.text.starts_with('#') && p.index >= 1));
        assert!(ex.passages.iter().any(|p| p.title == "Sphere-Plate Geometry and the Proximity Force Approximation"));
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
}
